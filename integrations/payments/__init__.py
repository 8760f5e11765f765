"""The payment provider interface (SPEC 13.4): what every adapter offers, the values it answers, its classified errors.

An adapter creates a payment for an order, fetches a payment's status,
verifies and parses a webhook delivery, and refunds where its provider can.
Adapters are HTTP adapters only: they never import models and never settle;
commerce decides what a payment or an event means for an order.

Money is integer minor units plus a currency code (integrations/payments/amounts.py
converts to and from providers' decimal strings, exactly). Statuses are
normalized to the payment intent's words (SPEC 13.5); `provider_status` keeps
the provider's own.

Every failure is a ProviderError whose `code` is one of the constants below.
`str()` of an error is its code (plus the provider's own error code when it
sent one); no message, repr or log line carries a credential, a response
body, a URL path or a payer's details.
"""

import abc
import dataclasses
import re

# Classified error codes: the only texts a provider failure may carry.
PROVIDER_UNAVAILABLE = "provider_unavailable"  # transport error, timeout, 3xx, undecodable or oversized answer
PROVIDER_HTTP_PREFIX = "provider_http_"  # any other non-2xx answer: provider_http_<status>
PROVIDER_REJECTED = "provider_rejected"  # the provider refused the request's content (400)
PAYMENT_NOT_FOUND = "provider_payment_not_found"  # no such payment at the provider
REFUND_UNSUPPORTED = "refund_unsupported"  # the provider has no refund API (SPEC 13.10: refund to the wallet)
BAD_SIGNATURE = "bad_signature"  # a webhook whose signature does not verify
MALFORMED_WEBHOOK = "malformed_webhook"  # a webhook that is not the provider's documented shape

# Why a call was classified unavailable: a fixed word kept as `detail`.
DETAIL_TIMEOUT = "timeout"
DETAIL_TRANSPORT = "transport"
DETAIL_REDIRECT = "redirect"
DETAIL_OVERSIZED = "oversized"
DETAIL_UNDECODABLE = "undecodable"

# Normalized payment statuses (SPEC 13.5; `created` is the intent's own, before the provider answers).
STATUS_PENDING = "pending"
STATUS_SUCCEEDED = "succeeded"
STATUS_CANCELED = "canceled"
STATUS_EXPIRED = "expired"
PAYMENT_STATUSES = (STATUS_PENDING, STATUS_SUCCEEDED, STATUS_CANCELED, STATUS_EXPIRED)

# What a webhook event is about.
SUBJECT_PAYMENT = "payment"
SUBJECT_REFUND = "refund"

WEBHOOK_MAX_BYTES = 64 * 1024  # SPEC 13.6: bodies are capped
AMOUNT_MAX_MINOR = 2**63 - 1  # what the database's amounts hold: no payment can be larger


def http_error_code(status):
    return f"{PROVIDER_HTTP_PREFIX}{int(status)}"


class ProviderError(Exception):
    """A classified provider failure. `str()` is the code, plus the provider's error code when it sent one."""

    def __init__(self, code, provider=None, status=None, provider_error_code=None, detail=None):
        self.code = code
        self.provider = provider
        self.status = status
        self.provider_error_code = provider_error_code
        self.detail = detail
        super().__init__(f"{code} ({provider_error_code})" if provider_error_code else code)

    def __repr__(self):
        return (
            f"{type(self).__name__}(code={self.code!r}, provider={self.provider!r}, status={self.status!r}, "
            f"provider_error_code={self.provider_error_code!r}, detail={self.detail!r})"
        )

    @property
    def transient(self):
        """True when the same call may succeed later (with the same idempotence key): outages, 429, 5xx."""
        if self.code == PROVIDER_UNAVAILABLE:
            return True
        return self.status is not None and (self.status == 429 or self.status == 202 or self.status >= 500)


class WebhookRejected(ProviderError):
    """A webhook delivery refused before anything was read from it: `bad_signature` or `malformed_webhook`."""


@dataclasses.dataclass(frozen=True)
class ProviderPayment:
    """A payment as the provider reports it."""

    provider: str
    payment_id: str  # the provider's id: unique per provider (SPEC 13.5)
    status: str  # one of PAYMENT_STATUSES
    provider_status: str  # the provider's own word (YooKassa waiting_for_capture, Crypto Pay active, ...)
    amount_minor: int
    currency: str
    order_id: int | None  # from the payment's metadata; None when absent or not an order id
    confirmation_url: str | None = None  # where the payer goes to pay
    refunded_minor: int = 0

    @property
    def paid(self):
        return self.status == STATUS_SUCCEEDED


@dataclasses.dataclass(frozen=True)
class ProviderRefund:
    provider: str
    refund_id: str
    payment_id: str
    status: str  # pending | succeeded | canceled
    amount_minor: int
    currency: str


@dataclasses.dataclass(frozen=True)
class WebhookEvent:
    """One webhook delivery, parsed.

    `signed` says whether the delivery's signature was verified. An unsigned
    event (YooKassa's notifications carry no signature) is only a hint: the
    payment must be fetched from the provider's API before anything settles
    on it. A signed event's fields are the provider's word.
    """

    provider: str
    event_id: str  # stable across redeliveries of the same event: the replay key (SPEC 13.6)
    event_type: str  # the provider's event name: payment.succeeded, invoice_paid, ...
    subject: str  # SUBJECT_PAYMENT or SUBJECT_REFUND
    payment_id: str
    status: str  # the payment's normalized status; for a refund event the refund's status
    amount_minor: int
    currency: str
    order_id: int | None
    signed: bool
    refund_id: str | None = None


class PaymentProvider(abc.ABC):
    """What commerce calls for every provider; one instance per shop configuration, safe across threads."""

    name: str = ""
    webhooks_signed: bool = False  # False: an event is confirmed by fetch_payment before settling
    supports_refunds: bool = False
    # The largest payment the provider takes, in minor units: checkout refuses a larger order before writing it.
    max_amount_minor: int = AMOUNT_MAX_MINOR

    @abc.abstractmethod
    def create_payment(
        self, *, order_id, amount_minor, currency, description, return_url, idempotence_key
    ) -> ProviderPayment:
        """Create a payment for an order; the same idempotence key never makes a second one where the provider
        honours keys (a retry after a timeout must reuse the key)."""

    def find_created_payment(self, *, order_id, currency, idempotence_key, created_after) -> ProviderPayment | None:
        """The payment an earlier create_payment with this key made, whose answer was lost, or None.

        Only a provider that keeps no idempotence key needs to look (a create retried there would make a
        second payment): one that honours the key answers a retried create with the first payment, so
        this default finds nothing and the caller creates again with the same key. `created_after` is
        when the caller first asked (nothing older can be that payment)."""
        return None

    @abc.abstractmethod
    def fetch_payment(self, payment_id) -> ProviderPayment:
        """The payment as the provider holds it now; PAYMENT_NOT_FOUND when it has none with this id."""

    @abc.abstractmethod
    def parse_webhook(self, body, headers) -> WebhookEvent:
        """Verify (where the provider signs) and parse one raw delivery; WebhookRejected when it is not one."""

    def read_stored_webhook(self, body) -> WebhookEvent:
        """Parse a delivery again from its stored body, its signature (where the provider signs) verified
        by parse_webhook when it came in: the settling job reads the body, the headers are not kept."""
        return self.parse_webhook(body, {})

    @abc.abstractmethod
    def refund(self, *, payment_id, amount_minor, currency, idempotence_key, description=None) -> ProviderRefund:
        """Refund all or part of a succeeded payment; REFUND_UNSUPPORTED where the provider has no refunds."""


def parse_order_id(value):
    """An order id carried in a payment's metadata (text or number) → a positive int, else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value > 0 else None
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 18:
        number = int(value)
        return number if number > 0 else None
    return None


def http_url(value, what):
    """`value` when it is an http(s) URL; ValueError naming `what` otherwise."""
    text = str(value or "").strip()
    if not _HTTP_URL.match(text):
        raise ValueError(f"{what} must be an http:// or https:// URL")
    return text


_HTTP_URL = re.compile(r"^https?://[^\s/?#]+\S*$")


def header(headers, name):
    """A header's value from any mapping of headers (case-insensitive), or None."""
    wanted = name.lower()
    for key, value in (headers or {}).items():
        if str(key).lower() == wanted:
            return value
    return None
