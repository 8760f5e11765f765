"""Webhook intake (SPEC 13.6): a provider's delivery stored raw and answered at once; a job confirms and applies it.

In the request (web/webhooks.py calls `receive`):

1. The delivery is parsed; the adapter verifies CryptoBot's signature before
   reading anything. One that is not the provider's (bad signature → 401, not
   its documented shape → 400, or refused by the route: an address YooKassa
   does not notify from → 403) is rejected: stored with its outcome for
   audit, and nothing else happens. A rejected delivery keeps what audit
   needs (its size, SHA-256 digest, the client's address, the headers that
   matter and the first REJECTED_BODY_KEPT bytes of its body) for
   REJECTED_RETENTION, so junk cannot fill the database.
2. An accepted one is stored raw in `provider_webhook_events` (`retain_until`
   30 days on) with its `webhook_delivery` job, in one transaction: the
   delivery is never kept without the job that applies it, nor the job
   without its delivery. The same statement asks whether the event was
   already applied: a replay gets no job and is answered 200 `replayed`.
   Anything else is answered 200 `accepted` once that transaction committed:
   the provider need not deliver it again, the job applies it whatever
   crashes next.

The request calls no provider and settles nothing, so its answer never
waits on the provider's API (YooKassa's confirming fetch) and a burst of
deliveries is answered as fast as it can be stored; the worker settles them
behind it (a customer's payment is usually settled within a second).

In the job (`settle_delivery`, run by the worker):

3. A delivery already processed, or one whose event another delivery
   applied (a replay that came in before the first was applied): `replayed`,
   nothing changes.
4. YooKassa signs nothing, so its notification is only a hint: the payment
   is fetched from the API and what the API says is applied. The delivery's
   verdict records what the API said of the notification's claim:
   `confirmed`, `contradicted` (another status or amount: the API's is
   applied), or `unknown` (no such payment: the delivery ends processed as
   `unconfirmed`). `signature_ok` stays false: nothing signed it. An API that does not
   answer leaves `provider_unavailable` on the delivery and the job tries
   again with backoff (ATTEMPTS over about an hour and a half); meanwhile
   payment_reconcile polls the payment itself, so a payment is settled even
   if every attempt fails. CryptoBot's signed update is its word (verdict
   `signature_valid`, set when it was stored).
5. The payment is applied (commerce/payments.py) and the delivery marked
   processed with its outcome in the same transaction as any settlement.
6. YooKassa's `refund.succeeded` is confirmed the same way, by fetching the
   refund, and finishes our pending refund as the provider_refund job's poll
   does (commerce/provider_refund.py `apply_notified_refund`).

Nothing here logs a body or a header: a body may carry a payer's card digits.
"""

import datetime
import hashlib
import json
from dataclasses import dataclass

import jobs
from commerce import payments, provider_refund, providers
from integrations.payments import (
    BAD_SIGNATURE,
    PAYMENT_NOT_FOUND,
    SUBJECT_PAYMENT,
    SUBJECT_REFUND,
    ProviderError,
    ProviderPayment,
    WebhookRejected,
    header,
)
from integrations.payments.cryptobot import SIGNATURE_HEADER
from jobs import huey
from models.base import db, utcnow
from models.payments import (
    CONFIRMED,
    CONTRADICTED,
    REJECTED_BODY_KEPT,
    SIGNATURE_BAD,
    SIGNATURE_VALID,
    UNKNOWN,
    ProviderWebhookEvent,
)
from models.transactions import execute_all, fetch_one

RETENTION = datetime.timedelta(days=30)
# A rejected delivery is audit of an attempt, not of money: kept long enough to look into a burst of them.
REJECTED_RETENTION = datetime.timedelta(days=3)
# Kept with every delivery, each value cut to AUDITED_HEADER_CHARS: enough to tell a sender and its software.
AUDITED_HEADERS = ("Content-Type", "User-Agent")
AUDITED_HEADER_CHARS = 256
# Of a signature only its length is kept: its value is the sender's to choose (our own token, say), and
# whoever reads the row is not to see it.
AUDITED_LENGTHS = (SIGNATURE_HEADER,)
JOB_KIND = "webhook_delivery"
# Backoff attempt⁴ s: the last of 8 tries comes about 78 minutes after the first.
ATTEMPTS = 8

ACCEPTED = "accepted"  # stored with its job; the job has not applied it yet
REPLAYED = payments.REPLAYED

IGNORED = "ignored"  # a delivery about neither a payment nor a refund the provider's API can confirm
UNCONFIRMED = "unconfirmed"  # YooKassa's API knows no such payment: not a notification of ours
PROVIDER_UNAVAILABLE = "provider_unavailable"  # the confirming fetch failed: the job tries again
ADDRESS_REFUSED = "webhook_address_refused"  # not from the provider's published addresses: rejected, 403
# What a notification claims, checked against what the API answers when it is fetched.
PAYMENT_CLAIMS = ("payment_id", "status", "amount_minor", "currency", "order_id")
REFUND_CLAIMS = ("refund_id", "payment_id", "status", "amount_minor", "currency")
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


class DeliveryRetry(Exception):
    """The delivery could not be confirmed now (the provider's API, or its credentials here); the queue
    runs the job again with backoff. Its message is the code, which is also on the delivery's row."""


def receive(adapter, body, headers, address):
    """Take one delivery for `adapter`'s provider from the client at `address`; the body is already
    capped by the route."""
    try:
        event, refused = adapter.parse_webhook(body, headers), None
    except WebhookRejected as rejected:
        event, refused = None, rejected.code
    if refused is not None:
        stored = reject(adapter.name, body, headers, address, refused)
        return Intake(401 if refused == BAD_SIGNATURE else 400, refused, stored)
    with db.atomic():
        verdict = SIGNATURE_VALID if event.signed else None
        stored, seen = _store(adapter.name, body, _audit(body, headers, address), event, ACCEPTED, verdict, RETENTION)
        if seen:
            return Intake(200, _processed(stored, REPLAYED, None), stored)
        jobs.client.insert_new([jobs.JobInsert(JOB_KIND, {"deliveryId": stored})])
    return Intake(200, ACCEPTED, stored)


def reject(provider, body, headers, address, code):
    """Store a delivery refused with `code` as audit needs it (step 1); returns its id."""
    verdict = SIGNATURE_BAD if code == BAD_SIGNATURE else None
    audit = _audit(body, headers, address)
    stored, _ = _store(provider, body[:REJECTED_BODY_KEPT], audit, None, code, verdict, REJECTED_RETENTION)
    return stored


# With the fulfillment jobs, in the order they came: a flood of deliveries (forged YooKassa notifications
# cost a fetch each) holds up no access already paid for longer than the deliveries before it.
@huey.job(JOB_KIND, queue="critical", max_attempts=ATTEMPTS)
def webhook_delivery(deliveryId):
    return settle_delivery(deliveryId)


def settle_delivery(delivery_id):
    """Confirm and apply one stored delivery (steps 3–6) with this process's providers; returns its outcome."""
    row = fetch_one(_LOAD, (delivery_id,))
    if row is None or row[3] is not None:
        return None if row is None else row[4]
    provider, event_id, body = row[0], row[1], bytes(row[2])
    try:
        adapter = providers.adapter(providers.process_providers(), provider)
    except providers.ProviderNotConfigured as missing:
        _mark_outcome(delivery_id, missing.code)
        raise DeliveryRetry(missing.code) from None
    try:
        event = adapter.read_stored_webhook(body)
    except WebhookRejected as rejected:  # read once at intake already: only a changed adapter gets here
        _mark_outcome(delivery_id, rejected.code)
        return rejected.code
    refund = event.subject == SUBJECT_REFUND and hasattr(adapter, "fetch_refund")
    if not refund and event.subject != SUBJECT_PAYMENT:
        return _processed(delivery_id, IGNORED, None)
    if _applied_elsewhere(provider, event_id, delivery_id):
        return _processed(delivery_id, REPLAYED, None)
    if refund:
        return _refund_notification(adapter, delivery_id, event)
    if event.signed:
        payment, verdict = _signed_payment(event), None
    else:
        payment = _fetched(adapter.fetch_payment, event.payment_id, delivery_id)
        if payment is None:
            return UNCONFIRMED
        verdict = _verdict(event, payment, PAYMENT_CLAIMS)
    with db.atomic():
        applied = payments.apply_payment(payment, "provider_webhook")
        return _processed(delivery_id, applied.outcome, applied.intent_id, verdict)


def _refund_notification(adapter, delivery_id, event):
    """A refund's notification, a hint like a payment's: the refund is fetched from the API and what the API
    says finishes its row as the provider_refund job's poll would (commerce/provider_refund.py)."""
    answer = _fetched(adapter.fetch_refund, event.refund_id, delivery_id)
    if answer is None:
        return UNCONFIRMED
    with db.atomic():
        outcome = provider_refund.apply_notified_refund(answer)
        return _processed(delivery_id, outcome, None, _verdict(event, answer, REFUND_CLAIMS))


def _fetched(fetch, provider_id, delivery_id):
    """What the provider's API holds under `provider_id`: None when it knows nothing of it (the delivery
    ends processed, `unconfirmed`: another delivery of it would be fetched again); DeliveryRetry when it
    did not answer."""
    try:
        return fetch(provider_id)
    except ProviderError as error:
        if error.code == PAYMENT_NOT_FOUND:
            _processed(delivery_id, UNCONFIRMED, None, UNKNOWN)
            return None
        _mark_outcome(delivery_id, PROVIDER_UNAVAILABLE)
        raise DeliveryRetry(PROVIDER_UNAVAILABLE) from None


def _verdict(event, fetched, claims):
    """`confirmed` when the API says what the notification claims, else `contradicted`."""
    same = all(getattr(event, claim) == getattr(fetched, claim) for claim in claims)
    return CONFIRMED if same else CONTRADICTED


_FINAL = f"processed_at IS NOT NULL AND outcome IN ({', '.join(['%s'] * len(FINAL_OUTCOMES))})"
# The delivery is stored, and asked whether its event was already applied, in one statement: the
# replay check reads committed rows only, and the new row is not one of them (nor processed).
_STORE = (
    "INSERT INTO provider_webhook_events"
    " (provider, provider_event_id, received_at, signature_ok, verdict, outcome, retain_until, body,"
    " body_size, body_sha256, headers)"
    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
    " RETURNING id, EXISTS (SELECT 1 FROM provider_webhook_events AS applied"
    f" WHERE applied.provider = %s AND applied.provider_event_id = %s AND applied.{_FINAL})"
)
_APPLIED_ELSEWHERE = (
    "SELECT EXISTS (SELECT 1 FROM provider_webhook_events"
    f" WHERE provider = %s AND provider_event_id = %s AND id <> %s AND {_FINAL})"
)
_LOAD = "SELECT provider, provider_event_id, body, processed_at, outcome FROM provider_webhook_events WHERE id = %s"
_MARK_OUTCOME = "UPDATE provider_webhook_events SET outcome = %s WHERE id = %s"
_MARK_PROCESSED = (
    "UPDATE provider_webhook_events SET processed_at = %s, outcome = %s, payment_intent_id = %s,"
    " verdict = COALESCE(%s, verdict) WHERE id = %s"
)


def _store(provider, kept_body, audit, event, outcome, verdict, retention):
    """One INSERT; returns the delivery's id and whether a delivery of the same event was already applied."""
    now = utcnow()
    event_id = None if event is None else event.event_id
    signed = verdict == SIGNATURE_VALID
    params = (
        (provider, event_id, now, signed, verdict, outcome, now + retention, _blob(kept_body))
        + audit
        + (provider, event_id)
        + FINAL_OUTCOMES
    )
    row = fetch_one(_STORE, params)
    return row[0], bool(row[1])


def _audit(body, headers, address):
    """(size, SHA-256 digest, JSON of the client's address and the headers that matter) of a delivery."""
    seen = {"address": address}
    for name in AUDITED_HEADERS + AUDITED_LENGTHS:
        value = header(headers, name)
        if value is not None:
            seen[name.lower()] = f"{len(value)} characters" if name in AUDITED_LENGTHS else value[:AUDITED_HEADER_CHARS]
    return len(body), hashlib.sha256(body).hexdigest(), _blob(json.dumps(seen, sort_keys=True).encode())


def _applied_elsewhere(provider, event_id, delivery_id):
    return bool(fetch_one(_APPLIED_ELSEWHERE, (provider, event_id, delivery_id) + FINAL_OUTCOMES)[0])


def _blob(body):
    """The body (or the audited headers) as the driver's binary type, as the model's BlobField sends it: its
    repr (in a debug log of the statement) is an object's, never the bytes, which may hold card digits."""
    return ProviderWebhookEvent.body.db_value(bytes(body))


def _processed(stored, outcome, intent_id, verdict=None):
    """Marked processed with its outcome, which it returns, and what was checked (None: as it was); inside
    the settlement's transaction it commits with it."""
    execute_all([(_MARK_PROCESSED, (utcnow(), outcome, intent_id, verdict, stored))])
    return outcome


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
