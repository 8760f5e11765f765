"""What a provider says about a payment, applied to its order (SPEC 13.5–13.7, 13.6's outcomes).

A webhook (commerce/webhooks.py), a poll (`poll_intent`, which the
payment_reconcile pass calls) and a Telegram Stars payment (commerce/stars.py)
all hand a ProviderPayment to `apply_payment`, inside their own transaction:

- paid, for the order's amount and currency → `settle_order` (the one
  settlement function), the intent `succeeded`: outcome `settled`;
  the same payment again → nothing written: `replayed`;
- paid for another amount or currency → nothing settled, the intent
  `failed`, one `payment_mismatch` notice: `amount_mismatch`;
- paid for an order that does not exist → one `payment_unknown_order`
  notice: `unknown_order` (the webhook still answers 200, so the provider
  stops retrying);
- paid for an order that cannot take it (settled by another payment,
  refunded) → the intent `succeeded`, one `payment_unapplied` notice for the
  operator to refund it: `unapplied`;
- still pending → the intent `pending`; canceled or expired → the intent
  follows, and so does a pending order with no other open intent.

The order row is locked first, so every delivery, poll and replay of one
order's payments is applied one after the other. A payment the shop has no
intent for (its creation's answer was lost, or someone paid a second
invoice) gets one, so every payment that touched an order is on record.
"""

from dataclasses import dataclass

from commerce import providers as configured
from commerce.settlement import SETTLED_STATES, SettlementRejected, lock_order, settle_locked
from integrations.payments import (
    STATUS_CANCELED,
    STATUS_EXPIRED,
    STATUS_PENDING,
    STATUS_SUCCEEDED,
    ProviderError,
)
from models.base import db, utcnow
from models.commerce import Order
from models.payments import PaymentIntent
from models.transactions import cached_select, execute_all
from ops.records import queue_notice

SETTLED = "settled"
REPLAYED = "replayed"
PENDING = "pending"
CANCELED = "canceled"
AMOUNT_MISMATCH = "amount_mismatch"
UNKNOWN_ORDER = "unknown_order"
UNAPPLIED = "unapplied"
# A poll that could not ask: nothing applied.
NOT_CREATED = "not_created"  # the provider never answered the intent's creation: nothing to ask about
NOT_POLLABLE = "not_pollable"  # Stars: the bot hears of its payments, there is nothing to poll

NOTICE_PAYMENT_MISMATCH = "payment_mismatch"
NOTICE_PAYMENT_UNKNOWN_ORDER = "payment_unknown_order"
NOTICE_PAYMENT_UNAPPLIED = "payment_unapplied"

OPEN_INTENT_STATES = ("created", "pending")
ORDER_FOLLOWS = {STATUS_CANCELED: "cancelled", STATUS_EXPIRED: "expired"}


@dataclass(frozen=True)
class Applied:
    outcome: str
    order_id: int = None
    intent_id: int = None
    settlement: object = None  # the Settlement when the order is (or already was) settled by this payment


def apply_payment(payment, settled_by):
    """Apply one ProviderPayment to its order, in the caller's transaction (or one of its own)."""
    with db.transaction():
        order = _locked_order(payment.order_id)
        intent = _intent_of(payment)
        if intent is not None and (order is None or intent.order_id != order.id):
            # The shop's own record of the payment names the order: lock that one, then read it again.
            order = _locked_order(intent.order_id)
            intent = _intent_of(payment)
        if order is None:
            _notice(NOTICE_PAYMENT_UNKNOWN_ORDER, payment, None)
            return Applied(UNKNOWN_ORDER)
        intent = intent or _adopted_intent(order, payment)
        if payment.status == STATUS_PENDING:
            if intent.status == "created":
                _set_status(intent, "pending")
            return Applied(PENDING, order.id, intent.id)
        if payment.status != STATUS_SUCCEEDED:
            _follow(order, intent, payment.status)
            return Applied(CANCELED, order.id, intent.id)
        if (payment.amount_minor, payment.currency) != (order.amount_minor, order.currency):
            if intent.status != "succeeded":
                _set_status(intent, "failed")
            _notice(NOTICE_PAYMENT_MISMATCH, payment, order)
            return Applied(AMOUNT_MISMATCH, order.id, intent.id)
        # The order is locked here already: settle_locked does not lock (nor read) it again.
        if intent.status == "succeeded" and order.status in SETTLED_STATES:
            return Applied(REPLAYED, order.id, intent.id, settle_locked(order, settled_by, payment.provider))
        if order.status in SETTLED_STATES:
            return _unapplied(order, intent, payment)
        try:
            settlement = settle_locked(order, settled_by, payment.provider)
        except SettlementRejected:
            return _unapplied(order, intent, payment)
        _set_status(intent, "succeeded")
        return Applied(SETTLED, order.id, intent.id, settlement)


def poll_intent(intent, providers=None):
    """Ask the provider how one intent's payment stands and apply the answer (SPEC 13.7).

    Returns the Applied outcome, or Applied(<classified error code>) when the
    provider could not answer; the intent's `last_polled_at` moves either way,
    so a pass can take the longest-unpolled first."""
    providers = configured.process_providers() if providers is None else providers
    PaymentIntent.update(last_polled_at=utcnow()).where(PaymentIntent.id == intent.id).execute()
    if intent.provider not in configured.HOSTED:
        return Applied(NOT_POLLABLE, intent.order_id, intent.id)
    if intent.provider_payment_id is None:
        return Applied(NOT_CREATED, intent.order_id, intent.id)
    try:
        adapter = configured.adapter(providers, intent.provider)
        payment = adapter.fetch_payment(intent.provider_payment_id)
    except configured.ProviderNotConfigured as missing:
        return Applied(missing.code, intent.order_id, intent.id)
    except ProviderError as error:
        return Applied(error.code, intent.order_id, intent.id)
    return apply_payment(payment, "provider_poll")


def _locked_order(order_id):
    return None if order_id is None else lock_order(order_id)


def _intent_of(payment):
    def build():
        return PaymentIntent.select().where(
            (PaymentIntent.provider == payment.provider) & (PaymentIntent.provider_payment_id == payment.payment_id)
        ).limit(1)

    rows = cached_select("payments.intent_of", build, (payment.provider, payment.payment_id, 1))
    return rows[0] if rows else None


def _adopted_intent(order, payment):
    """The intent for a payment the shop has none for: the order's intent at that provider whose
    creation answer never arrived, else a new one (its key names the payment)."""
    now = utcnow()
    waiting = (
        PaymentIntent.select()
        .where(
            PaymentIntent.order == order,
            PaymentIntent.provider == payment.provider,
            PaymentIntent.provider_payment_id.is_null(),
        )
        .order_by(PaymentIntent.id)
        .first()
    )
    if waiting is not None:
        PaymentIntent.update(provider_payment_id=payment.payment_id, updated_at=now).where(
            PaymentIntent.id == waiting.id
        ).execute()
        return PaymentIntent.get_by_id(waiting.id)
    return PaymentIntent.create(
        order=order,
        provider=payment.provider,
        provider_payment_id=payment.payment_id,
        amount_minor=payment.amount_minor or order.amount_minor,
        currency=payment.currency,
        status="pending",
        confirmation_url=payment.confirmation_url,
        idempotence_key=f"{payment.provider}:{payment.payment_id}",
        created_at=now,
        updated_at=now,
    )


def _set_status(intent, status):
    statement = "UPDATE payment_intents SET status = %s, updated_at = %s WHERE id = %s"
    execute_all([(statement, (status, utcnow(), intent.id))])


def _follow(order, intent, status):
    """A canceled or expired payment: the intent follows, and the order too while it is pending
    and no other of its intents may still be paid."""
    if intent.status in OPEN_INTENT_STATES:
        _set_status(intent, "expired" if status == STATUS_EXPIRED else "canceled")
    others_open = (
        PaymentIntent.select()
        .where(
            PaymentIntent.order == order, PaymentIntent.id != intent.id, PaymentIntent.status.in_(OPEN_INTENT_STATES)
        )
        .exists()
    )
    if order.status == "pending" and not others_open:
        Order.update(status=ORDER_FOLLOWS.get(status, "cancelled"), expires_at=None).where(
            Order.id == order.id
        ).execute()


def _unapplied(order, intent, payment):
    _set_status(intent, "succeeded")
    _notice(NOTICE_PAYMENT_UNAPPLIED, payment, order)
    return Applied(UNAPPLIED, order.id, intent.id)


def _notice(kind, payment, order):
    """One notice per provider payment: what came in, what the order asked for; never a payer's details."""
    payload = {
        "provider": payment.provider,
        "paymentId": payment.payment_id,
        "paidMinor": payment.amount_minor,
        "paidCurrency": payment.currency,
    }
    if order is not None:
        payload.update(
            orderId=order.id, orderStatus=order.status, amountMinor=order.amount_minor, currency=order.currency
        )
    queue_notice(kind, f"{payment.provider}:{payment.payment_id}", payload)
