"""The `goods_delivery` job (SPEC 3.1, 3.2, 15.4): one paid goods order handed to its provider, at most once.

Settlement writes the `goods_deliveries` row and this job in the paying
transaction (`open_delivery`). A run is three steps, and only the middle one
talks to the provider:

1. claim  — a short transaction locks the delivery row, refuses anything
            resolved, and claims the next attempt: the counter goes up, the
            row becomes `submitting` and its deadline moves SUBMIT_DEADLINE_S
            out, all committed *before* the provider is called;
2. call   — the purchase, outside any transaction, with the order's
            reference as the provider's idempotency key;
3. record — a second short transaction writes the outcome, only if the row
            is still this run's (`submitting`, same attempt).

A run that finds the row `submitting` does not call again: inside the
deadline it snoozes to the deadline (another run is calling); past it, the
run that called died or lost its way between call and record, and nobody can
tell whether the purchase happened — the row goes to `needs_review`
(`goods_submission_interrupted`) for an operator, never back to the
provider. So whatever crashes or retries, the provider is asked to buy an
order's goods at most once per answer we got that said "not bought".

Outcomes, by the adapter's failure class (integrations/goods.py):

- delivered: the row `delivered`, the order `fulfilled`, and the customer's
  `goods_delivered` notice carrying the payload sealed in its `secret` (the
  bot shows it once, then erases it; it is kept nowhere else);
- `retryable`, `provider_unavailable`, `provider_balance`: nothing was bought;
  `retrying` with the row's backoff (5 s × 2^attempt) and the job retried;
  after PROVIDER_ATTEMPTS asks the order is refunded as a permanent failure
  would be. A balance that ran out queues one operator notice per delivery;
- `permanent`, `recipient_invalid`: nothing was bought and nothing will be:
  the order is refunded to the wallet through commerce/refunds.py (ledger
  reversal, the customer's refund notice) and the row is `refunded`;
- `ambiguous`, and any exception that is not a classified failure
  (`adapter_error`): `needs_review` with an operator notice; only an
  operator resolves it (goods/review.py).

A claim of an order refunded meanwhile (an operator's refund) cancels the
delivery without calling. The row's attempt count, not the queue's 12
attempts, governs how often the provider is asked (SPEC 3.2): the queue's
attempts cover runs that never reached the provider.

The job kind is known everywhere (settlement inserts it) but run only by a
worker that has APP_DATA_ENCRYPTION_KEY (`declare_job`, called by
goods/schedule.py's `register`): the providers' tokens are sealed with it.
"""

import datetime
import json
import logging
import threading
import time
from dataclasses import dataclass

from prometheus_client import Counter

from integrations.goods import (
    ADAPTER_ERROR,
    AMBIGUOUS,
    PERMANENT,
    PROVIDER_BALANCE,
    PROVIDER_UNAVAILABLE,
    RECIPIENT_INVALID,
    RETRYABLE,
    Delivered,
    GoodsClient,
    GoodsFailure,
)
from jobs import UNIQUE_THROUGH_COMPLETED, JobSnooze, huey
from jobs.engine.executor import release_connection
from models.base import db, utcnow
from models.commerce import Order
from models.goods import FINAL_DELIVERY_STATUSES, GoodsDelivery, GoodsProvider
from models.ops import CustomerNotice
from models.transactions import fetch_one, is_postgres, locked, retry_serializable
from ops import sealing
from ops.records import queue_notice

logger = logging.getLogger("omniflow.goods")

KIND = "goods_delivery"
QUEUE = "critical"
QUEUE_ATTEMPTS = 12
PROVIDER_ATTEMPTS = 8  # asks of the provider that came back "not bought" before the order is refunded
SUBMIT_DEADLINE_S = 120  # a claim's call must be recorded by then (the adapter gives up after 10 s)
PAID_STATES = ("paid", "fulfilled", "partially_refunded")
RETRY_CLASSES = (RETRYABLE, PROVIDER_UNAVAILABLE, PROVIDER_BALANCE)
REFUND_CLASSES = (PERMANENT, RECIPIENT_INVALID)
REVIEW_CLASSES = (AMBIGUOUS, ADAPTER_ERROR)

INTERRUPTED = "goods_submission_interrupted"  # claimed, called perhaps, never recorded
ATTEMPTS_EXHAUSTED = "goods_attempts_exhausted"
ORDER_REFUNDED = "order_refunded"
NOTICE_CUSTOMER_DELIVERED = "goods_delivered"  # customer notice; the payload in its sealed secret
NOTICE_REVIEW = "goods_delivery_review"  # operator notice: an order may or may not have been bought
NOTICE_BALANCE = "goods_provider_balance"  # operator notice: the provider's balance ran out

DELIVERIES_TOTAL = Counter(
    "omniflow_goods_deliveries_total",
    "Goods delivery runs by outcome (delivered, retrying, refunded, needs_review, cancelled, waiting, stale).",
    ["outcome"],
)


def backoff_seconds(attempt):
    """10 s, 20 s, 40 s … 1280 s: the row's next attempt and the job's retry agree."""
    return 5 * 2 ** min(max(attempt, 1), 8)


huey.insert_only(KIND, queue=QUEUE, max_attempts=QUEUE_ATTEMPTS, unique_states=UNIQUE_THROUGH_COMPLETED,
                 backoff=backoff_seconds)  # fmt: skip


def open_delivery(order, now):
    """In the settlement's transaction: the order's delivery row and its job."""
    GoodsDelivery.insert(
        order=order.id,
        goods=order.goods_id,
        customer=order.customer_id,
        status="pending",
        attempt_count=0,
        next_attempt_at=now,
        created_at=now,
        updated_at=now,
    ).execute()
    return huey.client.insert(KIND, {"orderId": order.id})


# -- what claim and record decide ------------------------------------------------------


@dataclass(frozen=True)
class Done:
    outcome: str


@dataclass(frozen=True)
class Snooze:
    seconds: float


@dataclass(frozen=True)
class Retry:
    code: str


@dataclass(frozen=True)
class Claim:
    delivery_id: int
    order_id: int
    attempt: int
    goods_name: str
    sku: str
    provider_id: int
    base_url: str
    token: str  # sealed, as stored: opened in the call (_client)
    recipient: dict


@dataclass(frozen=True)
class Failed:
    failure_class: str
    code: str


class GoodsRetry(Exception):
    """The provider did not buy it this time; the queue runs the job again with the row's backoff."""

    def __init__(self, code):
        super().__init__(code)
        self.code = code


# -- the job ---------------------------------------------------------------------------


def in_transaction(fn):
    """Claim and record lock the delivery row (FOR UPDATE on PostgreSQL, the write lock on SQLite): that lock
    is their whole guarantee, so they run at the default isolation, retried on a deadlock or a busy file."""
    return retry_serializable(fn, transaction=db.atomic)


def goods_delivery(orderId):
    decision = in_transaction(lambda: claim(orderId))
    if isinstance(decision, Claim):
        outcome = call(decision)
        decision = in_transaction(lambda: record(decision, outcome))
    _count(decision)
    if isinstance(decision, Snooze):
        raise JobSnooze(decision.seconds)
    if isinstance(decision, Retry):
        raise GoodsRetry(decision.code)
    return decision.outcome


_declared = threading.Lock()


def declare_job():
    """Run the kind in this process (a worker with the data key); once."""
    with _declared:
        if huey.kinds.get(KIND).task_class is None:
            huey.job(KIND, queue=QUEUE, max_attempts=QUEUE_ATTEMPTS, unique_states=UNIQUE_THROUGH_COMPLETED,
                     backoff=backoff_seconds)(goods_delivery)  # fmt: skip


def _count(decision):
    if isinstance(decision, Snooze):
        DELIVERIES_TOTAL.labels(outcome="waiting").inc()
    elif isinstance(decision, Retry):
        DELIVERIES_TOTAL.labels(outcome="retrying").inc()
    else:
        DELIVERIES_TOTAL.labels(outcome=decision.outcome).inc()


# -- 1. claim --------------------------------------------------------------------------------


def _update(delivery_id, **values):
    values["updated_at"] = utcnow()
    GoodsDelivery.update(**values).where(GoodsDelivery.id == delivery_id).execute()


_CLAIM_SQL = """
SELECT d.id, d.status, d.attempt_count, d.next_attempt_at, d.customer_id, o.status, g.name, g.provider_sku,
       p.id, p.base_url, p.api_token, c.telegram_id
FROM goods_deliveries d
JOIN orders o ON o.id = d.order_id
JOIN goods g ON g.id = d.goods_id
JOIN goods_providers p ON p.id = g.provider_id
JOIN customers c ON c.id = d.customer_id
WHERE d.order_id = %s"""


@dataclass
class _Row:
    """The delivery as claim reads it, with what the call needs, in one round trip."""

    id: int
    order_id: int
    status: str
    attempt_count: int
    next_attempt_at: datetime.datetime | None
    customer_id: str


def claim(order_id):
    now = utcnow()
    found = fetch_one(_CLAIM_SQL + (" FOR UPDATE OF d" if is_postgres() else ""), (order_id,))
    if found is None:
        return Done("missing")
    due = GoodsDelivery.next_attempt_at.python_value(found[3])
    row = _Row(found[0], order_id, found[1], found[2], due, found[4])
    order_status, goods_name, sku, provider_id, base_url, sealed_token, telegram_id = found[5:]
    if row.status in FINAL_DELIVERY_STATUSES or row.status == "needs_review":
        return Done(row.status)
    if row.status == "submitting":
        if row.next_attempt_at is not None and row.next_attempt_at > now:
            return Snooze((row.next_attempt_at - now).total_seconds() + 1)
        _to_review(row, AMBIGUOUS, INTERRUPTED, now)
        return Done("needs_review")
    if order_status not in PAID_STATES:
        _update(row.id, status="cancelled", last_error_code=ORDER_REFUNDED, finished_at=now)
        logger.info("goods delivery cancelled: the order was refunded", extra={"order_id": order_id})
        return Done("cancelled")
    if row.next_attempt_at is not None and row.next_attempt_at > now:
        return Snooze((row.next_attempt_at - now).total_seconds() + 1)
    attempt = row.attempt_count + 1
    _update(
        row.id,
        status="submitting",
        attempt_count=attempt,
        next_attempt_at=now + datetime.timedelta(seconds=SUBMIT_DEADLINE_S),
    )
    return Claim(
        delivery_id=row.id,
        order_id=order_id,
        attempt=attempt,
        goods_name=goods_name,
        sku=sku,
        provider_id=provider_id,
        base_url=base_url,
        token=sealed_token,
        recipient={"customerId": row.customer_id, "telegramId": telegram_id},
    )


# -- 2. call ---------------------------------------------------------------------------------

_clients = {}
_clients_lock = threading.Lock()


def _client(claim):
    """The provider's client, its token unsealed once per process and sealed value."""
    key = (claim.provider_id, claim.base_url, claim.token)
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            token = sealing.unseal(claim.token, GoodsProvider.api_token.context, claim.provider_id)
            client = _clients[key] = GoodsClient(claim.base_url, token)
        return client


def reference(order_id):
    """The order's reference at the provider (its idempotency key)."""
    return f"omniflow-order-{order_id}"


def call(claim):
    """The purchase; Delivered or Failed, never raises."""
    release_connection()  # nothing pooled is held while the provider answers
    started = time.monotonic()
    try:
        outcome = _client(claim).submit(reference(claim.order_id), claim.sku, claim.recipient)
    except GoodsFailure as failure:
        outcome = Failed(failure.failure_class, failure.code)
    except Exception as error:  # unclassified: we do not know whether it was bought (SPEC 3.2)
        logger.error(
            "goods provider call failed unexpectedly",
            extra={"order_id": claim.order_id, "attempt": claim.attempt, "error": type(error).__name__},
        )
        outcome = Failed(ADAPTER_ERROR, ADAPTER_ERROR)
    logger.info(
        "goods provider answered",
        extra={
            "order_id": claim.order_id,
            "attempt": claim.attempt,
            "outcome": "delivered" if isinstance(outcome, Delivered) else outcome.failure_class,
            "error": None if isinstance(outcome, Delivered) else outcome.code,
            "seconds": round(time.monotonic() - started, 3),
        },
    )
    return outcome


# -- 3. record -------------------------------------------------------------------------------


def record(claim, outcome):
    now = utcnow()
    row = locked(GoodsDelivery.select().where(GoodsDelivery.id == claim.delivery_id)).first()
    if row is None or row.status != "submitting" or row.attempt_count != claim.attempt:
        logger.warning("stale goods delivery run discarded its result", extra={"order_id": claim.order_id})
        return Done("stale")
    if isinstance(outcome, Delivered):
        return _delivered(row, claim, outcome, now)
    if outcome.failure_class in REVIEW_CLASSES:
        _to_review(row, outcome.failure_class, outcome.code, now)
        return Done("needs_review")
    if outcome.failure_class in RETRY_CLASSES and claim.attempt < PROVIDER_ATTEMPTS:
        _update(
            row.id,
            status="retrying",
            failure_class=outcome.failure_class,
            last_error_code=outcome.code,
            next_attempt_at=now + datetime.timedelta(seconds=backoff_seconds(claim.attempt)),
        )
        if outcome.failure_class == PROVIDER_BALANCE:
            queue_notice(NOTICE_BALANCE, f"goods_delivery:{row.id}", _notice_payload(row, outcome), returning=False)
        return Retry(outcome.code)
    code = outcome.code if outcome.failure_class in REFUND_CLASSES else ATTEMPTS_EXHAUSTED
    return refund_delivery(row, outcome.failure_class, code, now)


def _delivered(row, claim, outcome, now):
    _update(
        row.id,
        status="delivered",
        failure_class=None,
        last_error_code=None,
        provider_reference=outcome.provider_reference,
        next_attempt_at=None,
        finished_at=now,
    )
    fulfil_order(row.order_id, now)
    # The model, not a raw INSERT: the secret column seals the payload.
    CustomerNotice.create(
        customer=row.customer_id,
        kind=NOTICE_CUSTOMER_DELIVERED,
        dedupe_key=f"order:{row.order_id}",
        payload=json.dumps({"orderId": row.order_id, "goodsName": claim.goods_name}, sort_keys=True),
        secret="\n".join(outcome.payload[key] for key in ("code", "link") if key in outcome.payload),
        created_at=now,
    )
    logger.info("goods delivered", extra={"order_id": row.order_id, "attempt": claim.attempt})
    return Done("delivered")


def fulfil_order(order_id, now):
    Order.update(status="fulfilled", fulfilled_at=now).where(Order.id == order_id, Order.status == "paid").execute()


def refund_delivery(row, failure_class, code, now):
    """The order's money back to the wallet (commerce/refunds.py: ledger reversal, the customer told) and
    the row `refunded`; in the caller's transaction. An order an operator refunded meanwhile is only marked."""
    from commerce.refunds import refund_order
    from commerce.settlement import SettlementRejected

    order = locked(Order.select().where(Order.id == row.order_id)).get()
    if order.status in PAID_STATES:
        try:
            refund_order(order.id, to="wallet")
        except SettlementRejected as rejected:
            _to_review(row, failure_class, f"refund_refused_{rejected.code}", now)
            return Done("needs_review")
    _update(row.id, status="refunded", failure_class=failure_class, last_error_code=code, next_attempt_at=None,
            finished_at=now)  # fmt: skip
    logger.info("goods delivery refunded", extra={"order_id": row.order_id, "error": code})
    return Done("refunded")


def _to_review(row, failure_class, code, now):
    _update(row.id, status="needs_review", failure_class=failure_class, last_error_code=code, next_attempt_at=None)
    queue_notice(NOTICE_REVIEW, f"goods_delivery:{row.id}", _notice_payload(row, Failed(failure_class, code)),
                 returning=False)  # fmt: skip
    logger.warning(
        "goods delivery needs review", extra={"order_id": row.order_id, "error": code, "attempt": row.attempt_count}
    )


def _notice_payload(row, failed):
    return {"deliveryId": row.id, "orderId": row.order_id, "failureClass": failed.failure_class,
            "errorCode": failed.code}  # fmt: skip
