"""Enqueueing a fulfillment operation and its job, in the caller's transaction (SPEC 2.4, 2.8).

Every path that wants the panel changed comes through `enqueue_operation`:
settlement, operator changes, pause/resume, refunds, reconcile. It makes the
idempotency key a promise, checked first: the same key with the same
parameters returns the existing operation (whatever happened to the
entitlement since), the same key with different parameters is refused. Only
a new key is then judged against the entitlement as it stands: what can
never succeed is refused before anything is queued (an operation outside the
eight, negative limits, an `extend` that would shorten the period).
"""

from dataclasses import dataclass

import jobs
import jobs.fulfillment  # noqa: F401  (declares the `fulfillment` job kind this module inserts)
from fulfillment.desired_state import DesiredState
from jobs.engine.states import COMPLETED
from models.base import db, utcnow
from models.fulfillment import OPERATIONS, FulfillmentOperation
from models.transactions import fetch_one

FULFILLMENT_JOB = "fulfillment"
IDEMPOTENCY_MISMATCH = "idempotency key was already used with different fulfillment parameters"


class FulfillmentRequestRejected(ValueError):
    """Refused before anything was queued; `code` is machine-readable."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Enqueued:
    operation: FulfillmentOperation
    created: bool  # False: the key was already used with the same parameters
    job_id: int  # None for a new operation (its job is inserted unread) or when the caller inserts the jobs itself


def validate(entitlement, operation, desired):
    if operation not in OPERATIONS:
        raise FulfillmentRequestRejected("unsupported_operation", f"unsupported fulfillment operation {operation!r}")
    for name, value in (("traffic allowance", desired.traffic_allowance_bytes), ("device limit", desired.device_limit)):
        if value is not None and value < 0:
            raise FulfillmentRequestRejected("invalid_limit", f"{name} cannot be negative")
    if operation == "extend" and not desired.ends_at > entitlement.ends_at:
        raise FulfillmentRequestRejected("invalid_ends_at", "extend needs an endsAt later than the current end")


def _same_request(existing, entitlement, operation, desired):
    return (
        existing.entitlement_id == entitlement.id
        and existing.operation == operation
        and DesiredState.parse(existing.desired_state).same_parameters(desired, operation)
    )


def _checked(existing, entitlement, operation, desired):
    if not _same_request(existing, entitlement, operation, desired):
        raise FulfillmentRequestRejected("idempotency_key_reused", IDEMPOTENCY_MISMATCH)
    return existing


def replayed(idempotency_key, entitlement, operation, desired):
    """The operation already queued under this key (its parameters checked), or None.
    Callers that change the entitlement before they enqueue ask this first."""
    existing = find_operation(idempotency_key)
    return None if existing is None else _checked(existing, entitlement, operation, desired)


def find_operation(idempotency_key):
    return FulfillmentOperation.get_or_none(FulfillmentOperation.idempotency_key == idempotency_key)


def job_for(operation_id, scheduled_at=None):
    return jobs.JobInsert(FULFILLMENT_JOB, {"operationId": operation_id}, scheduled_at=scheduled_at)


def requeue(operation_ids):
    """Make sure each open operation has a job that will run: insert one, or,
    when a *completed* job still holds the operation's unique key (it ran and
    found nothing to do then), put that job back to available. A job still
    waiting or running is left alone. Returns (queued, already_waiting)."""
    results = jobs.insert_many([job_for(operation_id) for operation_id in operation_ids])
    queued = sum(not result.skipped_as_duplicate for result in results)
    for result in results:
        if result.skipped_as_duplicate and jobs.client.get(result.job_id).state == COMPLETED:
            jobs.client.retry(result.job_id)
            queued += 1
    return queued, len(results) - queued


def enqueue_operation(entitlement, operation, desired, idempotency_key, correlation_id, insert_job=True):
    """Insert the operation and its `fulfillment` job; must run inside the caller's transaction.

    A dispatcher passes insert_job=False and inserts all its jobs with one
    multi-row statement (`job_for` builds each)."""
    if not db.in_transaction():
        raise RuntimeError("enqueue_operation must run inside the transaction of the change that needs it")
    # The key is claimed by the INSERT itself (ON CONFLICT DO NOTHING): a new key costs one
    # statement and no savepoint, a used one the read that judges it. An operation that cannot
    # be valid now may still be the replay of one that was: the key decides first.
    try:
        validate(entitlement, operation, desired)
    except FulfillmentRequestRejected:
        record = replayed(idempotency_key, entitlement, operation, desired)
        if record is None:
            raise
        return _enqueued_again(record, insert_job)
    now = utcnow()
    record = FulfillmentOperation(
        entitlement=entitlement,
        operation=operation,
        status="pending",
        idempotency_key=idempotency_key,
        desired_state=desired.to_json(),
        attempt_count=0,
        correlation_id=correlation_id,
        next_attempt_at=desired.effective_at or now,
        created_at=now,
        updated_at=now,
    )
    row = fetch_one(
        "INSERT INTO fulfillment_operations (entitlement_id, operation, status, idempotency_key, desired_state,"
        " attempt_count, correlation_id, next_attempt_at, created_at, updated_at)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (idempotency_key) DO NOTHING RETURNING id",
        (entitlement.id, operation, record.status, idempotency_key, record.desired_state, 0, correlation_id,
         record.next_attempt_at, now, now),
    )  # fmt: skip
    if row is None:
        # Taken before, or by a concurrent request that committed first: a replay if the same request.
        return _enqueued_again(_checked(find_operation(idempotency_key), entitlement, operation, desired), insert_job)
    record.id = row[0]
    record._dirty.clear()  # it is the row just inserted, not one to save again
    if not insert_job:
        return Enqueued(record, True, None)
    # A new operation's id is new, so no job holds its key yet: nothing to read back.
    jobs.client.insert_new([job_for(record.id, desired.effective_at)])
    return Enqueued(record, True, None)


def _enqueued_again(record, insert_job):
    """The operation already under the key: its job made sure of (a unique job key keeps one)."""
    if not insert_job:
        return Enqueued(record, False, None)
    job = jobs.insert_many([job_for(record.id)])[0]
    return Enqueued(record, False, job.job_id)
