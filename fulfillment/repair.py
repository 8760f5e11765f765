"""What an operator can do to a stuck fulfillment operation (SPEC 4.2).

- retry: the *same* operation, under the same idempotency key, back to
  `pending` with a fresh `next_attempt_at`, and its job queued again in the
  same transaction (`requeue`: a job still waiting for it is left alone).
- cancel: `cancelled` with `operator_cancelled`, and a history row.

A `succeeded` operation can be neither: the refusal is in the UPDATE's
WHERE, so a run that succeeds while the operator clicks cannot be undone.
Both write an audit event with the operator's reason in the same
transaction; the caller owns that transaction.
"""

from fulfillment import rules
from fulfillment.enqueue import requeue
from models.base import utcnow
from models.fulfillment import FulfillmentHistory, FulfillmentOperation
from ops.records import record_audit

AUDIT_CATEGORY = "system"
RETRIED = "panel.fulfillment.retried"
CANCELLED = "panel.fulfillment.cancelled"


class OperationNotFound(LookupError):
    pass


class StateConflict(Exception):
    """The operation's state forbids the change (it succeeded)."""


def retry_operation(operation_id, actor, reason):
    now = utcnow()
    changed = (
        FulfillmentOperation.update(status="pending", next_attempt_at=now, completed_at=None, updated_at=now)
        .where(FulfillmentOperation.id == operation_id, FulfillmentOperation.status != "succeeded")
        .execute()
    )
    _refused_unless(changed, operation_id)
    requeue([operation_id])
    record_audit(AUDIT_CATEGORY, RETRIED, actor, reason, "fulfillment_operation", operation_id)
    return FulfillmentOperation.get_by_id(operation_id)


def cancel_operation(operation_id, actor, reason):
    now = utcnow()
    changed = (
        FulfillmentOperation.update(
            status="cancelled", last_error_code=rules.OPERATOR_CANCELLED, completed_at=now, updated_at=now
        )
        .where(FulfillmentOperation.id == operation_id, FulfillmentOperation.status != "succeeded")
        .execute()
    )
    _refused_unless(changed, operation_id)
    operation = FulfillmentOperation.get_by_id(operation_id)
    FulfillmentHistory.create(
        operation=operation_id,
        attempt=operation.attempt_count,
        status="cancelled",
        error_code=rules.OPERATOR_CANCELLED,
        correlation_id=operation.correlation_id,
    )
    record_audit(AUDIT_CATEGORY, CANCELLED, actor, reason, "fulfillment_operation", operation_id)
    return operation


def _refused_unless(changed, operation_id):
    if changed:
        return
    if FulfillmentOperation.get_or_none(FulfillmentOperation.id == operation_id) is None:
        raise OperationNotFound(operation_id)
    raise StateConflict(operation_id)
