"""Payment records (SPEC 13.5, 13.6): one intent per payment attempt at a
provider, and every webhook delivery as it arrived.

A Telegram Stars payment is an intent of provider `stars` whose
`provider_payment_id` is the `telegram_payment_charge_id`: the unique
(provider, provider_payment_id) pair makes that id the Stars settlement key.
"""

from peewee import (
    BigAutoField,
    BigIntegerField,
    BlobField,
    BooleanField,
    DateTimeField,
    ForeignKeyField,
    IntegerField,
    TextField,
)

from models.base import BaseModel, utcnow
from models.commerce import Order
from models.ledger import LedgerTransaction

INTENT_STATUSES = ("created", "pending", "succeeded", "canceled", "failed", "expired")
WEBHOOK_BODY_LIMIT = 64 * 1024
REJECTED_BODY_KEPT = 1024
# What proved or disproved a delivery: CryptoBot's signature, or, for YooKassa's unsigned
# notifications, what the payment (or refund) fetched from the API said of the notification's claim.
SIGNATURE_VALID = "signature_valid"
SIGNATURE_BAD = "signature_bad"
CONFIRMED = "confirmed"
CONTRADICTED = "contradicted"
UNKNOWN = "unknown"
WEBHOOK_VERDICTS = (SIGNATURE_VALID, SIGNATURE_BAD, CONFIRMED, CONTRADICTED, UNKNOWN)


class PaymentIntent(BaseModel):
    id = BigAutoField()
    order = ForeignKeyField(Order, backref="payment_intents", column_name="order_id")
    provider = TextField()
    provider_payment_id = TextField(null=True)  # known once the provider has created the payment
    amount_minor = BigIntegerField()
    currency = TextField()
    status = TextField(default="created")
    confirmation_url = TextField(null=True)
    idempotence_key = TextField(unique=True)  # sent as YooKassa's Idempotence-Key
    created_at = DateTimeField(default=utcnow)
    updated_at = DateTimeField(default=utcnow)
    last_polled_at = DateTimeField(null=True)

    class Meta:
        table_name = "payment_intents"
        indexes = ((("provider", "provider_payment_id"), True),)


class ProviderWebhookEvent(BaseModel):
    """A delivery, stored before anything else is done with it.

    An accepted delivery's body is kept as received (at most WEBHOOK_BODY_LIMIT
    bytes) until `retain_until`; a rejected one's only its first
    REJECTED_BODY_KEPT bytes, with the size and digest of the whole. A body may
    carry card digits, so it is never logged or shown.
    """

    id = BigAutoField()
    provider = TextField()
    provider_event_id = TextField(null=True)  # None when the body could not be read
    received_at = DateTimeField(default=utcnow)
    signature_ok = BooleanField()  # a signature verified (CryptoBot); never true for an unsigned provider
    verdict = TextField(null=True)  # WEBHOOK_VERDICTS: what was checked; None while nothing has been
    processed_at = DateTimeField(null=True)
    outcome = TextField(null=True)
    payment_intent = ForeignKeyField(PaymentIntent, null=True, backref="+", column_name="payment_intent_id")
    retain_until = DateTimeField()
    body = BlobField()
    body_size = IntegerField(null=True)  # the whole body's, whatever part of it is kept
    body_sha256 = TextField(null=True)
    headers = BlobField(null=True)  # JSON: the client's address and the headers that matter for audit

    class Meta:
        table_name = "provider_webhook_events"


REFUND_DESTINATIONS = ("provider", "wallet", "manual")
REFUND_STATUSES = ("pending", "processing", "succeeded", "failed", "manual")


class Refund(BaseModel):
    """One refund of an order (SPEC 13.10): its money is reversed in the ledger when the row
    is written; `status` follows the provider's refund, where there is one to call."""

    id = BigAutoField()
    order = ForeignKeyField(Order, backref="refunds", column_name="order_id")
    amount_minor = BigIntegerField()
    currency = TextField()
    destination = TextField()  # REFUND_DESTINATIONS
    status = TextField()  # REFUND_STATUSES
    provider = TextField(null=True)
    provider_payment_id = TextField(null=True)
    provider_refund_id = TextField(null=True)
    idempotence_key = TextField(unique=True)  # sent as YooKassa's Idempotence-Key
    ledger_transaction = ForeignKeyField(LedgerTransaction, null=True, backref="+", column_name="ledger_transaction_id")
    last_error_code = TextField(null=True)
    created_at = DateTimeField(default=utcnow)
    updated_at = DateTimeField(default=utcnow)
    completed_at = DateTimeField(null=True)

    class Meta:
        table_name = "refunds"


PAYMENT_MODELS = [PaymentIntent, ProviderWebhookEvent, Refund]
