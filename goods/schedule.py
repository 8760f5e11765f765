"""`goods_delivery_schedule` (SPEC 5.1, 5.3, 15.4): every 30 seconds, a `goods_delivery` job for up to
200 deliveries that are due and have none.

A dispatcher only: it finds open deliveries (pending, retrying, or submitting
past their deadline) whose next attempt has been due for a grace period, so
it never grabs one whose own job is about to run, oldest first, and inserts
their jobs in one transaction, one multi-row insert, uniqueness by args: a
delivery whose job is queued, backing off or running is skipped as a
duplicate. It picks up what settlement's job could not finish: a job that
used its 12 attempts, a killed worker's claim past its deadline (which the
job then hands to review, never to the provider).

Registered only when APP_DATA_ENCRYPTION_KEY is set, together with the job
itself (SPEC 3.3, 5.2): the providers' tokens are sealed with it. Without the
key the worker logs `digital goods delivery disabled` and runs the rest.
"""

import datetime
import logging

import jobs
from goods.delivery import KIND, declare_job
from jobs import JobInsert, every, huey
from models.base import db, utcnow
from models.goods import OPEN_DELIVERY_STATUSES, GoodsDelivery

logger = logging.getLogger("omniflow.passes.goods")

NAME = "goods_delivery_schedule"
INTERVAL_S = 30
BATCH = 200
GRACE = datetime.timedelta(seconds=INTERVAL_S)
DISABLED = "digital goods delivery disabled"


def due_orders(now, limit=BATCH):
    return [
        row.order_id
        for row in GoodsDelivery.select(GoodsDelivery.order)
        .where(GoodsDelivery.status.in_(OPEN_DELIVERY_STATUSES), GoodsDelivery.next_attempt_at <= now - GRACE)
        .order_by(GoodsDelivery.next_attempt_at, GoodsDelivery.id)
        .limit(limit)
    ]


def dispatch(now=None):
    """One run; returns (enqueued, skipped_as_duplicate)."""
    now = now or utcnow()
    with db.atomic():
        results = jobs.insert_many([JobInsert(KIND, {"orderId": order_id}) for order_id in due_orders(now)])
    enqueued = sum(not result.skipped_as_duplicate for result in results)
    skipped = len(results) - enqueued
    logger.info("goods delivery schedule dispatched", extra={"task": NAME, "enqueued": enqueued,
                                                             "skipped_as_duplicate": skipped})  # fmt: skip
    return enqueued, skipped


def goods_delivery_schedule():
    dispatch()


def register(settings):
    """Run goods delivery (the job and this pass) when the worker has the data key; otherwise say why not."""
    if not settings.data_encryption_key:
        logger.warning(DISABLED, extra={"reason": "APP_DATA_ENCRYPTION_KEY is not set"})
        return f"{DISABLED}: APP_DATA_ENCRYPTION_KEY is not set (goods providers' tokens are sealed with it)"
    declare_job()
    huey.periodic_task(every(seconds=INTERVAL_S), name=NAME)(goods_delivery_schedule)
    return None
