"""Webhook intake (SPEC 13.6): a provider's delivery, stored raw, verified, confirmed and applied.

1. The delivery is parsed (the adapter verifies CryptoBot's signature before
   reading anything) and stored raw in `provider_webhook_events`, with
   `retain_until` 30 days on, in a short transaction of its own that commits
   before anything else: a crash afterwards keeps it. The same statement
   asks whether the event was already applied (step 2). An accepted
   delivery's commit does not wait for the disk: the synchronous commit that
   records its outcome, before it is answered, flushes it with its own
   (`fetch_one_flushed_by_next_commit`); a refused one's does, as nothing follows it.
   A delivery that is not the provider's (bad signature → 401, not its
   documented shape → 400) stays there with its outcome and
   `signature_ok = false`; nothing is settled.
2. A delivery of an event already processed is a replay: 200, nothing changes.
3. YooKassa signs nothing, so its notification is only a hint: the payment
   is fetched from the API and what the API says is applied. A payment the
   API does not know is not confirmed (401); an API that does not answer is
   a 503, so YooKassa delivers again later. CryptoBot's signed update is its
   word.
4. The payment is applied (commerce/payments.py) and the event marked
   processed with its outcome in the same transaction as any settlement.
5. YooKassa's `refund.succeeded` is confirmed the same way, by fetching the
   refund, and finishes our pending refund as the provider_refund job's poll
   does (commerce/provider_refund.py `apply_notified_refund`).

Nothing here logs a body or a header: a body may carry a payer's card digits.
"""

import datetime
from dataclasses import dataclass

from commerce import payments, provider_refund
from integrations.payments import (
    BAD_SIGNATURE,
    PAYMENT_NOT_FOUND,
    SUBJECT_PAYMENT,
    SUBJECT_REFUND,
    ProviderError,
    ProviderPayment,
    WebhookRejected,
)
from models.base import db, utcnow
from models.payments import ProviderWebhookEvent
from models.transactions import execute_all, fetch_one, fetch_one_flushed_by_next_commit

RETENTION = datetime.timedelta(days=30)

IGNORED = "ignored"  # a delivery about neither a payment nor a refund the provider's API can confirm
UNCONFIRMED = "unconfirmed"  # YooKassa's API knows no such payment: not a notification of ours
PROVIDER_UNAVAILABLE = "provider_unavailable"  # the confirming fetch failed: the provider delivers again
# What makes a later delivery of the same event a replay: it was applied, and its outcome is final.
FINAL_OUTCOMES = (
    payments.SETTLED,
    payments.REPLAYED,
    payments.AMOUNT_MISMATCH,
    payments.UNKNOWN_ORDER,
    payments.UNAPPLIED,
    payments.CANCELED,
    IGNORED,
    provider_refund.NOTIFIED_RECORDED,
    provider_refund.NOTIFIED_ALREADY_RECORDED,
    provider_refund.NOTIFIED_UNMATCHED,
)


@dataclass(frozen=True)
class Intake:
    """What the route answers: its HTTP status, and the outcome (a problem's code when refused)."""

    status: int
    outcome: str
    event_id: int


def receive(adapter, body, headers):
    """Take one delivery for `adapter`'s provider; the body is already capped by the route."""
    try:
        event, refused = adapter.parse_webhook(body, headers), None
    except WebhookRejected as rejected:
        event, refused = None, rejected.code
    stored, seen = _store(adapter.name, body, event, refused)
    if refused is not None:
        return Intake(401 if refused == BAD_SIGNATURE else 400, refused, stored)
    if event.subject == SUBJECT_REFUND and hasattr(adapter, "fetch_refund"):
        return _refund_notification(adapter, stored, event, seen)
    if event.subject != SUBJECT_PAYMENT:
        return _processed(stored, IGNORED, None, signature_ok=event.signed)
    if seen:
        return _processed(stored, payments.REPLAYED, None, signature_ok=event.signed)
    if event.signed:
        payment = _signed_payment(event)
    else:
        try:
            payment = adapter.fetch_payment(event.payment_id)
        except ProviderError as error:
            if error.code == PAYMENT_NOT_FOUND:
                _mark_outcome(stored, UNCONFIRMED)
                return Intake(401, UNCONFIRMED, stored)
            _mark_outcome(stored, PROVIDER_UNAVAILABLE)
            return Intake(503, PROVIDER_UNAVAILABLE, stored)
    with db.atomic():
        applied = payments.apply_payment(payment, "provider_webhook")
        return _processed(stored, applied.outcome, applied.intent_id, signature_ok=True)


def _refund_notification(adapter, stored, event, seen):
    """A refund's notification, a hint like a payment's: the refund is fetched from the API and what the API
    says finishes its row as the provider_refund job's poll would (commerce/provider_refund.py)."""
    if seen:
        return _processed(stored, payments.REPLAYED, None, signature_ok=event.signed)
    try:
        answer = adapter.fetch_refund(event.refund_id)
    except ProviderError as error:
        outcome, status = (UNCONFIRMED, 401) if error.code == PAYMENT_NOT_FOUND else (PROVIDER_UNAVAILABLE, 503)
        _mark_outcome(stored, outcome)
        return Intake(status, outcome, stored)
    with db.atomic():
        return _processed(stored, provider_refund.apply_notified_refund(answer), None, signature_ok=True)


# The delivery is stored, and asked whether its event was already applied, in one statement: the
# replay check reads committed rows only, and the new row is not one of them (nor processed).
_STORE = (
    "INSERT INTO provider_webhook_events"
    " (provider, provider_event_id, received_at, signature_ok, outcome, retain_until, body)"
    " VALUES (%s, %s, %s, %s, %s, %s, %s)"
    " RETURNING id, EXISTS (SELECT 1 FROM provider_webhook_events AS applied"
    " WHERE applied.provider = %s AND applied.provider_event_id = %s AND applied.processed_at IS NOT NULL"
    f" AND applied.outcome IN ({', '.join(['%s'] * len(FINAL_OUTCOMES))}))"
)
_MARK_OUTCOME = "UPDATE provider_webhook_events SET outcome = %s WHERE id = %s"
_MARK_PROCESSED = (
    "UPDATE provider_webhook_events SET processed_at = %s, outcome = %s, payment_intent_id = %s, signature_ok = %s"
    " WHERE id = %s"
)


def _store(provider, body, event, refused):
    """One INSERT outside any transaction, committed on its own before anything else happens.
    Returns the event's id and whether a delivery of the same event was already applied."""
    now = utcnow()
    event_id = None if event is None else event.event_id
    params = (
        (provider, event_id, now, event is not None and event.signed, refused, now + RETENTION, _blob(body))
        + (provider, event_id)
        + FINAL_OUTCOMES
    )
    if refused is not None:
        row = fetch_one(_STORE, params)  # answered next: its commit waits for the disk
    else:
        # Every accepted delivery writes again, in a synchronous commit (the outcome, or the
        # settlement with it), before it is answered: that commit makes this one durable too.
        row = fetch_one_flushed_by_next_commit(_STORE, params)
    return row[0], bool(row[1])


def _blob(body):
    """The body as the driver's binary type, as the model's BlobField sends it: its repr (in a
    debug log of the statement) is an object's, never the bytes, which may hold card digits."""
    return ProviderWebhookEvent.body.db_value(bytes(body))


def _processed(stored, outcome, intent_id, signature_ok):
    """Marked processed with its outcome; inside the settlement's transaction it commits with it."""
    execute_all([(_MARK_PROCESSED, (utcnow(), outcome, intent_id, signature_ok, stored))])
    return Intake(200, outcome, stored)


def _mark_outcome(stored, outcome):
    execute_all([(_MARK_OUTCOME, (outcome, stored))])


def _signed_payment(event):
    return ProviderPayment(
        provider=event.provider,
        payment_id=event.payment_id,
        status=event.status,
        provider_status=event.event_type,
        amount_minor=event.amount_minor,
        currency=event.currency,
        order_id=event.order_id,
    )
