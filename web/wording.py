"""The shop's stored values in plain words, for the back office's pages (SPEC 13.14).

Orders, payments and refunds keep machine values (`partially_refunded`,
`topup`, `provider_webhook`, `manual`…) and the panel API answers with them;
a page shows what they mean instead and keeps the value in a `data-`
attribute or a title for scripts and tests. Like web/explanations.py, this
is only how a person reads them: a value missing here is shown as it is
stored, so a new one is never hidden. What each word promises is what
commerce/refunds.py and commerce/settlement.py do.
"""

from commerce import payments, provider_refund, webhooks
from commerce.refunds import MANUAL, REFUND_APIS, TO_PROVIDER, TO_WALLET
from commerce.settlement import FREE_PATHS, PROVIDER_PATHS, WALLET_PATHS
from models.payments import CONFIRMED, CONTRADICTED, SIGNATURE_BAD, SIGNATURE_VALID, UNKNOWN

PROVIDERS = {"yookassa": "YooKassa", "cryptobot": "CryptoBot", "stars": "Telegram Stars"}
CURRENCIES = {"XTR": "Telegram Stars"}  # a currency people know by another name than its code

ORDER_STATUSES = {
    "draft": "draft",
    "pending": "waiting for payment",
    "paid": "paid",
    "fulfilled": "fulfilled",
    "cancelled": "cancelled",
    "expired": "expired unpaid",
    "partially_refunded": "partially refunded",
    "refunded": "refunded",
}

# An order's operation is its kind (SPEC 13.2).
ORDER_KINDS = {
    "purchase": "purchase",
    "extension": "extension",
    "renewal": "renewal",
    "upgrade": "upgrade",
    "downgrade": "downgrade",
    "addon": "add-on",
    "topup": "wallet top-up",
    "gift": "gift card",
    "code": "access code",
    "trial": "trial",
}

SETTLED_BY = {
    "provider_webhook": "paid by provider webhook",
    "provider_poll": "paid, found by polling the provider",
    "stars": "paid with Telegram Stars",
    "wallet": "paid from the customer's wallet",
    "renewal": "renewed from the customer's wallet",
    "gift": "free: a gift card redeemed",
    "code": "free: an access code",
    "trial": "free: a trial",
}

PAYMENT_STATUSES = {
    "created": "created",
    "pending": "waiting for the customer",
    "succeeded": "paid",
    "canceled": "canceled",
    "failed": "failed",
    "expired": "expired",
}

REFUND_STATUSES = {
    "pending": "waiting for the provider",
    "processing": "at the provider",
    "succeeded": "done",
    "failed": "failed",
    "manual": "to be paid back by hand",
}


# What a webhook delivery did (commerce/webhooks.py, commerce/payments.py). Its refusals (bad_signature,
# malformed_webhook, provider_unavailable) are error codes: web/explanations.py explains those.
WEBHOOK_OUTCOMES = {
    webhooks.ACCEPTED: "stored: its job has not confirmed and applied it yet",
    payments.SETTLED: "settled the order",
    payments.REPLAYED: "a repeat of a delivery already applied: nothing changed",
    payments.PENDING: "the payment is still pending",
    payments.CANCELED: "the payment was canceled at the provider",
    payments.AMOUNT_MISMATCH: "another amount or currency than the order's: not settled, the operators were told",
    payments.UNKNOWN_ORDER: "no such order: nothing settled, the operators were told",
    payments.UNAPPLIED: "paid, but the order could not take it (paid already or refunded): refund it at the provider",
    webhooks.IGNORED: "about nothing this shop follows: ignored",
    webhooks.UNCONFIRMED: "the provider's API knows no such payment: not one of ours, ignored",
    provider_refund.NOTIFIED_RECORDED: "finished a refund",
    provider_refund.NOTIFIED_PROCESSING: "a refund the provider is still working on",
    provider_refund.NOTIFIED_ALREADY_RECORDED: "about a refund already finished: nothing changed",
    provider_refund.NOTIFIED_UNMATCHED: "about a refund not made here (at the provider's dashboard, say)",
}


def webhook_outcome(outcome):
    """A delivery's outcome in words, or None for an error code (shown explained) or an unknown one."""
    return WEBHOOK_OUTCOMES.get(outcome)


# What proved or disproved a delivery (models/payments.py WEBHOOK_VERDICTS), and whether that speaks for it.
WEBHOOK_VERDICTS = {
    SIGNATURE_VALID: ("signature valid", True),
    SIGNATURE_BAD: ("signature bad", False),
    CONFIRMED: ("confirmed by the API", True),
    CONTRADICTED: ("contradicted by the API", False),
    UNKNOWN: ("unknown to the API", False),
}


def webhook_verdict(event):
    """(words, True/False/None) for what was checked of a delivery: its signature, or for an unsigned
    provider what its API said of the notification; None when nothing speaks for or against it."""
    if event.verdict in WEBHOOK_VERDICTS:
        return WEBHOOK_VERDICTS[event.verdict]
    return ("not recorded" if event.processed_at is not None else "not checked"), None


# A ledger transaction's kind (models/ledger.py TRANSACTION_KINDS), as the wallet and an order's ledger show it.
LEDGER_KINDS = {
    "topup": "wallet top-up",
    "purchase": "purchase",
    "renewal": "renewal",
    "refund": "refund",
    "expiration": "bonus expired",
    "bonus": "bonus",
    "proration_credit": "upgrade credit (the old period's unused part)",
}


def ledger_kind(kind):
    return LEDGER_KINDS.get(kind, kind)


def currency_name(currency):
    return CURRENCIES.get(currency, currency)


def provider_name(provider):
    return PROVIDERS.get(provider, provider or "")


def order_status(status):
    return ORDER_STATUSES.get(status, status)


def order_kind(operation):
    return ORDER_KINDS.get(operation, operation)


def payment_status(status):
    return PAYMENT_STATUSES.get(status, status)


def refund_status(status):
    return REFUND_STATUSES.get(status, status)


def settled(order):
    """How the order was paid: "paid by provider webhook (YooKassa)", "not paid yet", …"""
    if not order.settled_by:
        return f"not paid yet ({provider_name(order.provider)})" if order.provider else "not paid yet"
    words = SETTLED_BY.get(order.settled_by, order.settled_by)
    if order.settled_by in PROVIDER_PATHS and order.provider and order.settled_by != "stars":
        words += f" ({provider_name(order.provider)})"
    return words


def destination(refund):
    """Where a refund's money went, as commerce/refunds.py sent it."""
    at = provider_name(refund.provider)
    if refund.destination == TO_WALLET:
        return f"to the customer's wallet (paid at {at})" if refund.provider else "back to the customer's wallet"
    if refund.destination == TO_PROVIDER:
        return f"back at {at}, through its refund API"
    if refund.destination == MANUAL:
        where = f" at {at}" if refund.provider else ""
        return f"manual: an operator pays it back{where} by hand"
    return refund.destination


def refund_form(order, provider, provider_payment):
    """What the refund form offers for this order, by how it was paid (commerce/refunds.py `_give_back`):
    the "where it goes" choices as (value, label) — "" is the API's default — and what a refund does.

    `provider` is the provider of the order's payment (its succeeded payment's, else the order's);
    `provider_payment` whether that payment has the provider's id a refund API call needs."""
    at = provider_name(provider)
    if provider not in REFUND_APIS:
        back = f"manual: an operator pays it back at {at} by hand ({at} has no refund API)"
    elif provider_payment:
        back = f"back at {at}, through its refund API"
    else:
        back = f"manual: an operator pays it back at {at} by hand (no payment at {at} is recorded)"
    if order.settled_by in WALLET_PATHS:
        choices = [("", "back to the customer's wallet (it was paid from there)")]
    elif order.amount_minor == 0:
        choices = [("", "nothing to pay back (the order was free)")]
    elif order.settled_by in FREE_PATHS or order.settled_by is None:
        choices = [("", "manual: an operator pays it back by hand (no payment is booked)")]
    elif order.operation == "topup":  # a top-up never goes back to the wallet it filled
        choices = [("", f"{back}, from the wallet it filled")]
    elif provider in REFUND_APIS:
        choices = [("", back), (TO_WALLET, "to the customer's wallet instead")]
    else:
        # Crypto Pay has no refund API: the default is the wallet, and `provider` records a manual refund.
        choices = [
            ("", f"to the customer's wallet ({at} has no refund API)"),
            (TO_PROVIDER, f"manual: an operator pays it back at {at} by hand"),
        ]
    return choices, refund_effect(order, provider)


def refund_effect(order, provider):
    """What a refund of this order does beyond giving money back, by the order's kind."""
    if order.operation == "topup":
        full = (
            "The money leaves the wallet this top-up filled; a wallet that has spent it refuses the refund"
            " (refund what it still holds)."
        )
    elif order.operation == "gift" and order.settled_by not in FREE_PATHS:
        full = (
            "In full, the gift card expires if it has not been redeemed yet; a redeemed card's access is"
            " switched off and whoever redeemed it is told."
        )
    elif order.operation == "addon":
        full = "The add-on's extra traffic and devices stay until the period ends: nothing is revoked."
    elif order.operation == "upgrade":
        full = (
            "In full, the access is revoked and the credit the upgrade gave for the old period leaves the wallet"
            " again (refused if the wallet has spent it)."
        )
    else:
        full = "In full, the access is revoked."
    extra = ""
    if provider == "stars" and order.settled_by in PROVIDER_PATHS:
        extra = " Telegram refunds a Stars payment whole: a part can go to the customer's wallet only."
    wallet = ""
    if order.operation != "topup" and order.settled_by in PROVIDER_PATHS:
        wallet = " To the wallet, the customer can spend it in the bot at once."
    return f"Leave the amount empty to refund all that is left. {full}{extra}{wallet}"
