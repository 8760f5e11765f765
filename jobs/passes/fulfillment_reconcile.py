"""`fulfillment_reconcile` (SPEC 2.16): every 15 minutes, a `reconcile`
operation for up to 500 entitlements not reconciled in the last 10 minutes,
the longest unchecked first: so every run takes the ones the previous run
checked, and a user the panel lost (wiped, restored from an old backup) is
recreated within ceil(live entitlements / 500) runs — by the next run while
there are at most 500.

Keyed `reconcile:<entitlementID>:<bucket>` (now truncated to 15 minutes), so
two passes in one bucket converge on one operation; correlation id
`scheduler:<bucket>`; desired state rebuilt from the entitlement row, never
deferred. Pending entitlements (still waiting for their first create) and
those that ended more than 30 days ago are left alone. The batch is written
TRANSACTION_ROWS entitlements per transaction; a run asked to stop (past its
timeout) returns between two of them.
"""

import datetime
import logging

import jobs
from fulfillment import rules
from fulfillment.desired_state import DesiredState
from fulfillment.enqueue import enqueue_operation, job_for
from jobs import every, huey, should_stop
from models.base import db, utcnow
from models.fulfillment import Entitlement

logger = logging.getLogger("omniflow.passes.reconcile")

NOT_RECONCILED = ("pending", "superseded")
TRANSACTION_ROWS = 100


def bucket_of(now):
    start = now.replace(second=0, microsecond=0)
    start -= datetime.timedelta(minutes=start.minute % (rules.RECONCILE_INTERVAL_S // 60))
    return start.isoformat(timespec="minutes") + "Z"


def due_entitlements(now, limit=rules.RECONCILE_BATCH):
    stale = now - datetime.timedelta(seconds=rules.RECONCILE_DUE_AFTER_S)
    horizon = now - datetime.timedelta(days=rules.RECONCILE_HORIZON_DAYS)
    return (
        Entitlement.select()
        .where(
            Entitlement.status.not_in(NOT_RECONCILED),
            Entitlement.ends_at >= horizon,
            (Entitlement.reconciled_at.is_null()) | (Entitlement.reconciled_at < stale),
        )
        .order_by(Entitlement.reconciled_at.asc(nulls="first"), Entitlement.id)
        .limit(limit)
    )


def dispatch(now=None):
    """Per transaction: the operations, then all their jobs in one statement. Returns (enqueued, skipped)."""
    now = now or utcnow()
    bucket = bucket_of(now)
    due = [entitlement.id for entitlement in due_entitlements(now).select(Entitlement.id)]
    enqueued = skipped = 0
    stopped = False
    for start in range(0, len(due), TRANSACTION_ROWS):
        stopped = should_stop()
        if stopped:
            break
        with db.atomic():
            # Read again inside the transaction: a row may have changed (or
            # stopped being due) since the batch was chosen.
            chosen = due_entitlements(now).where(Entitlement.id.in_(due[start : start + TRANSACTION_ROWS]))
            operations = [
                enqueue_operation(
                    entitlement,
                    "reconcile",
                    DesiredState.from_entitlement(entitlement),
                    f"reconcile:{entitlement.id}:{bucket}",
                    f"scheduler:{bucket}",
                    insert_job=False,
                ).operation
                for entitlement in chosen
            ]
            results = jobs.insert_many([job_for(operation.id) for operation in operations])
        inserted = sum(not result.skipped_as_duplicate for result in results)
        enqueued += inserted
        skipped += len(results) - inserted
    logger.info(
        f"fulfillment reconcile {'stopped before the end of its batch' if stopped else 'dispatched'}",
        extra={"task": "fulfillment_reconcile", "enqueued": enqueued, "skipped_as_duplicate": skipped},
    )
    return enqueued, skipped


@huey.periodic_task(every(seconds=rules.RECONCILE_INTERVAL_S), name="fulfillment_reconcile")
def fulfillment_reconcile():
    dispatch()
