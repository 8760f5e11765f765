"""Error codes in plain words, with what an operator can do about each (SPEC 13.14).

The one catalogue every page that shows a code reads: operations, their
history, a subscription's and an order's operations, the Home page. Codes
stay machine-readable everywhere (fulfillment/rules.py, the Remnawave
adapter's classification, commerce's refusals); this is only how a person
reads them. `remnawave_http_<status>` is a family: one entry per class of
status.
"""

from dataclasses import dataclass

from bottle import html_escape

from fulfillment import rules
from integrations import payments, remnawave


@dataclass(frozen=True)
class Explanation:
    meaning: str
    action: str


CATALOGUE = {
    rules.REMNAWAVE_UNAVAILABLE: Explanation(
        "The panel did not answer (down, unreachable, timed out or answered nonsense). Nothing is lost: the "
        "customer sees the subscription as provisioning.",
        "Nothing, usually: it retries by itself with growing pauses. If it lasts, check that the panel is up and "
        "that APP_REMNAWAVE_URL reaches it.",
    ),
    rules.REMOTE_USER_NOT_FOUND: Explanation(
        "The panel has no user for this subscription (someone deleted it there).",
        "Retry: a reconcile recreates a deleted user; a change needs the user to exist first.",
    ),
    rules.INVALID_DESIRED_STATE: Explanation(
        "What this operation should push to the panel cannot be read; retrying cannot fix it.",
        "Cancel this operation and make the change again from the subscription's page; for a create, that "
        "page's Re-provision queues a new one from the period's entitlement.",
    ),
    rules.MAINTENANCE_ACTIVE: Explanation(
        "Maintenance mode is on, so fulfillment is held; no attempt is spent while it waits.",
        "Turn maintenance off on System → Queue when the work is done; the operation then runs within a minute.",
    ),
    rules.ENTITLEMENT_SUPERSEDED: Explanation(
        "A newer period of the same subscription replaced this one before it reached the panel.",
        "Nothing: the newer period's operation carries the subscription.",
    ),
    rules.ORDER_REFUNDED: Explanation(
        "The order was refunded before its access was provisioned, so nothing was made on the panel.",
        "Nothing.",
    ),
    rules.ORDER_NOT_PAID: Explanation(
        "The order was never paid, so its access is not provisioned.",
        "Nothing, unless the customer did pay: then look at the order's payments.",
    ),
    rules.UNSUPPORTED_OPERATION: Explanation(
        "The operation is not one of the eight the panel is changed by; it was cancelled for good.",
        "Nothing; report it, since no part of Omniflow should ask for one.",
    ),
    rules.INTERNAL_ERROR: Explanation(
        "Omniflow failed while running the operation; the worker's log has the details.",
        "Look up the operation in the worker's log, then Retry.",
    ),
    rules.LEASE_EXPIRED: Explanation(
        "A worker took the operation and stopped answering (it crashed or was killed) before recording.",
        "Nothing: another worker takes it over.",
    ),
    rules.NOT_PROVISIONED: Explanation(
        "The subscription was never provisioned (its create ended without making a user), so there is nothing on"
        " the panel to change, pause or resume.",
        "Look at the create operation of the same order; retry that one first.",
    ),
    rules.OPERATOR_CANCELLED: Explanation(
        "An operator cancelled this operation from the panel.",
        "Nothing; the audit log names who and why. Retry it if that was a mistake.",
    ),
    "order_not_refundable": Explanation(
        "Only a paid order can be refunded: this one is pending, expired or already refunded in full.",
        "Nothing to refund.",
    ),
    "invalid_refund_amount": Explanation(
        "A refund is a whole number of minor units, more than zero and at most what is left of the order.",
        "Enter an amount up to what the order page shows as left.",
    ),
    payments.BAD_SIGNATURE: Explanation(
        "The delivery's signature did not verify: it did not come from the provider with this shop's key.",
        "Nothing was settled. If real payments arrive like this, check APP_CRYPTOBOT_TOKEN against the provider.",
    ),
    "webhook_address_refused": Explanation(
        "The delivery came from an address YooKassa does not send notifications from.",
        "Nothing was settled. If genuine notifications arrive like this, set APP_TRUSTED_PROXY (behind a reverse"
        " proxy), or APP_YOOKASSA_WEBHOOK_ADDRESSES if YooKassa has published new addresses.",
    ),
    payments.MALFORMED_WEBHOOK: Explanation(
        "The delivery is not in the provider's documented shape.",
        "Nothing was settled; the reconcile pass polls the payment itself.",
    ),
    "payment_mismatch": Explanation(
        "The provider reports an amount or currency other than the order's, so the order was not settled.",
        "Compare the payment at the provider with the order; refund it there or settle it by hand.",
    ),
    payments.PROVIDER_UNAVAILABLE: Explanation(
        "The payment provider did not answer (down, unreachable or timed out).",
        "Nothing, usually: payments are polled again every minute.",
    ),
    "provider_not_configured": Explanation(
        "This process has no credentials for that payment provider, so it could not ask the provider about it.",
        "Set the provider's variables (APP_YOOKASSA_*, APP_CRYPTOBOT_TOKEN) on every process; the delivery's"
        " job tries again.",
    ),
    payments.REFUND_UNSUPPORTED: Explanation(
        "This provider cannot refund through its API (Crypto Pay), so the refund is recorded as manual.",
        "Pay the customer back by hand, or refund the order to the customer's wallet instead.",
    ),
    "invalid_refund_destination": Explanation(
        "A refund goes back where it was paid or to the customer's wallet; this order cannot go there"
        " (a wallet payment goes back to the wallet, a top-up back to the provider).",
        "Refund without choosing where, and it goes where the order was paid.",
    ),
    "partial_refund_unsupported": Explanation(
        "Telegram refunds a Stars payment whole, never a part of it.",
        "Refund the whole order, or refund the part to the customer's wallet.",
    ),
    "refund_exceeds_wallet": Explanation(
        "The customer has already spent the money this top-up put in the wallet; refunding it would take"
        " the wallet below zero.",
        "Refund at most what the wallet still holds, or refund the orders the wallet paid for.",
    ),
    "refund_canceled": Explanation(
        "The provider accepted the refund and then canceled it: the money did not go back.",
        "Check the payment at the provider; pay the customer back by hand or refund to the wallet.",
    ),
    "already_paused": Explanation("This subscription is paused already.", "Resume it instead."),
    "not_paused": Explanation("This subscription is not paused.", "Nothing to resume."),
}
HTTP_CLIENT = Explanation(
    "The panel refused the request (a 4xx answer). The panel's own error code is in the worker's log.",
    "Check the plan's limits and squads against the panel, then Retry.",
)
HTTP_SERVER = Explanation(
    "The panel failed while answering (a 5xx answer).",
    "Nothing, usually: it retries by itself. If it lasts, look at the panel's log.",
)
HTTP_REDIRECT = Explanation(
    "The panel answered with a redirect, which Omniflow never follows (it would carry the token elsewhere).",
    "Set APP_REMNAWAVE_URL to the panel's final address (https, the right path).",
)
UNKNOWN = Explanation("No explanation is recorded for this code.", "Look it up in the worker's log.")


def explain(code):
    """The explanation of a code, or None when there is no code to explain."""
    if not code:
        return None
    if code in CATALOGUE:
        return CATALOGUE[code]
    status = code.removeprefix(remnawave.REMNAWAVE_HTTP_PREFIX)
    if status != code and status.isascii() and status.isdigit():
        return {"3": HTTP_REDIRECT, "4": HTTP_CLIENT}.get(status[0], HTTP_SERVER)
    return UNKNOWN


def explained(code, known_only=False):
    """Safe HTML for a page: the code, then what it means and what to do; '' for no code.
    With `known_only`, a code the catalogue does not know (an outcome such as `settled`) is shown bare."""
    explanation = explain(code)
    if explanation is None:
        return ""
    if known_only and explanation is UNKNOWN:
        return f'<span class="code">{html_escape(code)}</span>'
    return (
        f'<span class="code">{html_escape(code)}</span><div class="explain">{html_escape(explanation.meaning)}'
        f" <strong>What to do:</strong> {html_escape(explanation.action)}</div>"
    )
