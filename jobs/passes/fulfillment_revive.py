"""`fulfillment_revive` (SPEC 2.18): every 5 minutes, a `fulfillment` job for
operations that should have run and did not.

Selected: operations in pending, retrying or running whose creation time AND
recorded next attempt are both more than 10 minutes in the past (for a
running row, next_attempt_at is the claim's lease: an expired claim). The
jobs are inserted with the settlement's arguments and uniqueness, so an
operation whose job is merely backing off gets nothing new; one whose job
was discarded after its 12 attempts, or that never had one, gets a job, and
one whose job completed while the operation stayed open (an operator retried
it afterwards) gets that job back (`requeue`). The batch is written
TRANSACTION_ROWS operations per transaction, each with an `anomaly_samples`
row counting the operations it gave a job (the `revive_count` anomaly rule,
ops/anomalies.py); a run asked to stop (past its timeout) returns between two
of them.
"""

import datetime
import logging

from fulfillment import rules
from fulfillment.enqueue import requeue
from jobs import every, huey, should_stop
from models.base import db, utcnow
from models.fulfillment import FulfillmentOperation
from ops import anomalies

logger = logging.getLogger("omniflow.passes.revive")

REVIVABLE = ("pending", "retrying", "running")
TRANSACTION_ROWS = 100


def stuck_operations(now, limit=rules.REVIVE_BATCH):
    idle_since = now - datetime.timedelta(seconds=rules.REVIVE_IDLE_S)
    return (
        FulfillmentOperation.select(FulfillmentOperation.id)
        .where(
            FulfillmentOperation.completed_at.is_null(),  # open: the index revive scans
            FulfillmentOperation.status.in_(REVIVABLE),
            FulfillmentOperation.created_at < idle_since,
            (FulfillmentOperation.next_attempt_at.is_null()) | (FulfillmentOperation.next_attempt_at < idle_since),
        )
        .order_by(FulfillmentOperation.id)
        .limit(limit)
    )


def dispatch(now=None):
    """Per transaction, the jobs in one statement; returns (enqueued, skipped_as_duplicate)."""
    now = now or utcnow()
    stuck = [operation.id for operation in stuck_operations(now)]
    enqueued = skipped = 0
    stopped = False
    for start in range(0, len(stuck), TRANSACTION_ROWS):
        stopped = should_stop()
        if stopped:
            break
        with db.atomic():
            queued, waiting = requeue(stuck[start : start + TRANSACTION_ROWS])
            anomalies.record_sample(anomalies.REVIVE_COUNT, queued, now)  # read by the revive_count rule
        enqueued += queued
        skipped += waiting
    logger.info(
        f"fulfillment revive {'stopped before the end of its batch' if stopped else 'dispatched'}",
        extra={"task": "fulfillment_revive", "enqueued": enqueued, "skipped_as_duplicate": skipped},
    )
    return enqueued, skipped


@huey.periodic_task(every(seconds=rules.REVIVE_INTERVAL_S), name="fulfillment_revive")
def fulfillment_revive():
    dispatch()
