"""A full refund takes the access it bought away (SPEC 2.10, 13.10).

The refund's transaction queues a `disable` (key `refund:<orderID>:disable`)
for the order's entitlement when it is or may be provisioned: provisioned,
or pending with a create that has already called the panel (in flight, or
retrying after an answer that may have been lost). A create that has never
called the panel needs nothing: its claim cancels it (`order_refunded`).
Afterwards the worker keeps a refunded order's user disabled: its create and
its reconciles push no period and enable nothing (jobs/fulfillment.py).
"""

from fulfillment.desired_state import DesiredState
from fulfillment.enqueue import enqueue_operation
from models.base import utcnow
from models.fulfillment import Entitlement, FulfillmentOperation
from models.transactions import locked


def revoke_access(order_id):
    """Queue the refund's `disable` if the entitlement needs one; in the refund's transaction.
    Returns the operation, or None when there is nothing on the panel to revoke."""
    entitlement = locked(Entitlement.select().where(Entitlement.order == order_id)).first()
    if entitlement is None or entitlement.status == "superseded":
        return None
    # Written, not only locked: a claim of the create that began before this
    # transaction and reads the order as still paid then cannot commit (on
    # PostgreSQL its FOR UPDATE of the entitlement refuses to serialize), so
    # its retry reads the refund; and a claim that committed first is seen
    # below as an attempt.
    Entitlement.update(updated_at=utcnow()).where(Entitlement.id == entitlement.id).execute()
    if entitlement.status == "pending" and not _create_has_called(entitlement.id):
        return None
    return enqueue_operation(
        entitlement,
        "disable",
        DesiredState.from_entitlement(entitlement),
        f"refund:{order_id}:disable",
        correlation_id=f"refund:{order_id}",
    ).operation


def _create_has_called(entitlement_id):
    return (
        FulfillmentOperation.select()
        .where(
            FulfillmentOperation.entitlement == entitlement_id,
            FulfillmentOperation.operation == "create",
            FulfillmentOperation.attempt_count > 0,
        )
        .exists()
    )
