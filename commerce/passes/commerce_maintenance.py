"""`commerce_maintenance` (SPEC 5.1, 13.7): every minute, what waited past its time stops waiting.

1. Orders. A pending order whose payment deadline (`expires_at`, 30
   minutes after it was made: commerce/orders.py) has passed becomes
   `expired`, and its intents still open (`created`, `pending`) become
   `expired` with it — except a payment the provider holds (a pending
   intent with the provider's payment id): the payer may still complete it
   on the provider's page, so it stays `pending` and payment_reconcile goes
   on asking, until the provider says it was paid (the order settles late),
   canceled or expired, or LATE_POLL_WINDOW has passed (then it expires
   here). A late payment whose webhooks were all lost is never kept. The
   orders are read through `orders_awaiting_payment` (the orders that have
   a deadline), oldest deadline first, ORDER_BATCH per transaction under
   their row locks: a webhook or a poll applying a
   payment takes the same lock first (commerce/payments.py), so an order is
   settled or expired, one after the other, never both at once. A
   provider's payment that arrives after the expiry still settles the order
   (that money is real, commerce/settlement.py). A row whose deadline passed
   but that no longer waits for payment only has the deadline cleared, so
   it leaves the index.
   Such an intent still pending LATE_POLL_WINDOW after it was made is
   expired by the next step (`payment_intents_pending_created`, migration
   0026).
2. Bonus credits past their expiry: `ledger.expire_bonuses()`, up to its
   EXPIRY_BATCH credits per call, one `expiration` transaction per wallet.
3. Saved carts: `bot_checkout_sessions` past their expiry that never became
   an order are dropped by retention's own step for that table
   (ops/retention.py `sweep_table`), so the rule of which carts are
   disposable is written once. Retention's hourly sweep runs the same step;
   this pass keeps a cart to its 30 minutes (SPEC 14.7) instead of up to an
   hour and a half.

Each step does at most MAX_BATCHES batches per run, so one step with a
backlog leaves the others their turn, and the run checks `should_stop()`
between batches (its timeout is the interval): the next run carries on.
"""

import datetime
import logging
from dataclasses import dataclass

from commerce import ledger
from commerce.payments import OPEN_INTENT_STATES
from jobs import every, huey, should_stop
from models.base import db, utcnow
from models.commerce import Order
from models.payments import PaymentIntent
from models.transactions import locked
from ops import retention

logger = logging.getLogger("omniflow.passes.commerce")

NAME = "commerce_maintenance"
INTERVAL_S = 60
ORDER_BATCH = 100
CART_BATCH = 500
MAX_BATCHES = 20
# How long a payment the provider holds is still asked about after its order expired: a payer may
# finish on the provider's page late, and a late payment whose webhooks were lost is found by the poll.
LATE_POLL_WINDOW = datetime.timedelta(hours=24)
CARTS = "bot_checkout_sessions"


@dataclass
class Maintained:
    orders_expired: int = 0
    intents_expired: int = 0
    bonuses_expired: int = 0  # expiration transactions posted
    carts_dropped: int = 0
    stopped: bool = False


def expire_orders(now, done):
    """Pending orders past their deadline → expired, with their open intents."""
    for _ in range(MAX_BATCHES):
        if should_stop():
            done.stopped = True
            return
        with db.atomic():
            rows = list(
                locked(
                    Order.select(Order.id, Order.status)
                    .where(Order.expires_at.is_null(False), Order.expires_at <= now)
                    .order_by(Order.expires_at, Order.id)
                    .limit(ORDER_BATCH)
                )
            )
            pending = [row.id for row in rows if row.status == "pending"]
            not_waiting = [row.id for row in rows if row.status != "pending"]
            if pending:
                done.orders_expired += (
                    Order.update(status="expired", expires_at=None).where(Order.id.in_(pending)).execute()
                )
                done.intents_expired += (
                    PaymentIntent.update(status="expired", updated_at=now)
                    .where(
                        PaymentIntent.order.in_(pending),
                        PaymentIntent.status.in_(OPEN_INTENT_STATES),
                        ~_held_by_the_provider(),
                    )
                    .execute()
                )
            if not_waiting:
                Order.update(expires_at=None).where(Order.id.in_(not_waiting)).execute()
        if len(rows) < ORDER_BATCH:
            return


def _held_by_the_provider():
    return (PaymentIntent.status == "pending") & PaymentIntent.provider_payment_id.is_null(False)


def expire_unanswered_intents(now, done):
    """Pending intents the provider has held past LATE_POLL_WINDOW without an answer: no more polls."""
    for _ in range(MAX_BATCHES):
        if should_stop():
            done.stopped = True
            return
        with db.atomic():
            stale = [
                intent.id
                for intent in PaymentIntent.select(PaymentIntent.id)
                .where(PaymentIntent.status == "pending", PaymentIntent.created_at < now - LATE_POLL_WINDOW)
                .order_by(PaymentIntent.created_at, PaymentIntent.id)
                .limit(ORDER_BATCH)
            ]
            if stale:
                done.intents_expired += (
                    PaymentIntent.update(status="expired", updated_at=now)
                    .where(PaymentIntent.id.in_(stale), PaymentIntent.status == "pending")
                    .execute()
                )
        if len(stale) < ORDER_BATCH:
            return


def expire_bonus_credits(done):
    for _ in range(MAX_BATCHES):
        if should_stop():
            done.stopped = True
            return
        posted = ledger.expire_bonuses()
        done.bonuses_expired += posted
        if not posted:
            return


def drop_carts(now, done):
    if should_stop():
        done.stopped = True
        return
    result = retention.sweep_table(CARTS, now=now, batch=CART_BATCH, should_stop=should_stop)
    done.carts_dropped = result.removed


def maintain(now=None):
    """Run the steps in order; returns what they did."""
    now = now or utcnow()
    done = Maintained()
    expire_orders(now, done)
    expire_unanswered_intents(now, done)
    expire_bonus_credits(done)
    drop_carts(now, done)
    done.stopped = done.stopped or should_stop()
    logger.info(
        f"commerce maintenance {'stopped before its end' if done.stopped else 'finished'}",
        extra={
            "task": NAME,
            "count": done.orders_expired + done.bonuses_expired + done.carts_dropped,
            "state": (
                f"orders_expired={done.orders_expired},intents_expired={done.intents_expired},"
                f"bonuses_expired={done.bonuses_expired},carts_dropped={done.carts_dropped}"
            ),
        },
    )
    return done


@huey.periodic_task(every(seconds=INTERVAL_S), name=NAME)
def commerce_maintenance():
    maintain()
