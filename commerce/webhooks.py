"""Webhook intake (SPEC 13.6): a provider's delivery, stored raw, verified, confirmed and applied.

1. The delivery is parsed (the adapter verifies CryptoBot's signature before
   reading anything) and stored raw in `provider_webhook_events`, with
   `retain_until` 30 days on, in a short transaction of its own that commits
   before anything else: a crash afterwards keeps it. A delivery that is not
   the provider's (bad signature → 401, not its documented shape → 400) stays
   there with its outcome and `signature_ok = false`; nothing is settled.
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
from models.transactions import defer

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
    stored = _store(adapter.name, body, event, refused)
    if refused is not None:
        return Intake(401 if refused == BAD_SIGNATURE else 400, refused, stored.id)
    if event.subject == SUBJECT_REFUND and hasattr(adapter, "fetch_refund"):
        return _refund_notification(adapter, stored, event)
    if event.subject != SUBJECT_PAYMENT:
        return _processed(stored, IGNORED, None, signature_ok=event.signed)
    if _seen(stored, event):
        return _processed(stored, payments.REPLAYED, None, signature_ok=event.signed)
    if event.signed:
        payment = _signed_payment(event)
    else:
        try:
            payment = adapter.fetch_payment(event.payment_id)
        except ProviderError as error:
            if error.code == PAYMENT_NOT_FOUND:
                _mark(stored, outcome=UNCONFIRMED)
                return Intake(401, UNCONFIRMED, stored.id)
            _mark(stored, outcome=PROVIDER_UNAVAILABLE)
            return Intake(503, PROVIDER_UNAVAILABLE, stored.id)
    with db.atomic():
        applied = payments.apply_payment(payment, "provider_webhook")
        return _processed(stored, applied.outcome, applied.intent_id, signature_ok=True)


def _refund_notification(adapter, stored, event):
    """A refund's notification, a hint like a payment's: the refund is fetched from the API and what the API
    says finishes its row as the provider_refund job's poll would (commerce/provider_refund.py)."""
    if _seen(stored, event):
        return _processed(stored, payments.REPLAYED, None, signature_ok=event.signed)
    try:
        answer = adapter.fetch_refund(event.refund_id)
    except ProviderError as error:
        outcome, status = (UNCONFIRMED, 401) if error.code == PAYMENT_NOT_FOUND else (PROVIDER_UNAVAILABLE, 503)
        _mark(stored, outcome=outcome)
        return Intake(status, outcome, stored.id)
    with db.atomic():
        return _processed(stored, provider_refund.apply_notified_refund(answer), None, signature_ok=True)


def _store(provider, body, event, refused):
    """One INSERT outside any transaction: committed on its own, before anything else happens."""
    now = utcnow()
    return ProviderWebhookEvent.create(
        provider=provider,
        provider_event_id=None if event is None else event.event_id,
        received_at=now,
        signature_ok=event is not None and event.signed,
        outcome=refused,
        retain_until=now + RETENTION,
        body=bytes(body),
    )


def _seen(stored, event):
    return (
        ProviderWebhookEvent.select()
        .where(
            ProviderWebhookEvent.provider == stored.provider,
            ProviderWebhookEvent.provider_event_id == event.event_id,
            ProviderWebhookEvent.id != stored.id,
            ProviderWebhookEvent.processed_at.is_null(False),
            ProviderWebhookEvent.outcome.in_(FINAL_OUTCOMES),
        )
        .exists()
    )


def _processed(stored, outcome, intent_id, signature_ok):
    _mark(stored, processed_at=utcnow(), outcome=outcome, payment_intent=intent_id, signature_ok=signature_ok)
    return Intake(200, outcome, stored.id)


def _mark(stored, **columns):
    defer(ProviderWebhookEvent.update(**columns).where(ProviderWebhookEvent.id == stored.id))


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
