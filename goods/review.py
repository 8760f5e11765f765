"""Deliveries that need review (SPEC 15.4): an operator checks at the provider and resolves each one.

Only a delivery in `needs_review` can be resolved, with a reason, audited in
the same transaction (`panel.goods_delivery.delivered` / `.refunded`):

- `delivered`: the provider did sell it (the operator gave the customer what
  it sold, or saw it arrive): the row `delivered`, the order `fulfilled`;
- `refund`: it was not sold, or will not be: the order refunded to the wallet
  through commerce/refunds.py (ledger reversal, the customer told), the row
  `refunded`.

Neither calls the provider: a delivery that needed review is never
submitted again (SPEC 3.1).
"""

from goods.delivery import fulfil_order, refund_delivery
from models.base import db, utcnow
from models.goods import GoodsDelivery
from models.transactions import locked
from ops.records import record_audit

OUTCOMES = ("delivered", "refund")
CATEGORY = "payments"
AUDIT_ACTIONS = {"delivered": "panel.goods_delivery.delivered", "refund": "panel.goods_delivery.refunded"}

DELIVERY_NOT_FOUND = "delivery_not_found"
DELIVERY_NOT_IN_REVIEW = "delivery_not_in_review"
INVALID_OUTCOME = "invalid_outcome"
REFUND_REFUSED = "refund_refused"


class ReviewRejected(ValueError):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


def needing_review(limit=200):
    """Deliveries waiting for an operator, oldest first."""
    return list(
        GoodsDelivery.select().where(GoodsDelivery.status == "needs_review").order_by(GoodsDelivery.id).limit(limit)
    )


def resolve(delivery_id, outcome, reason, actor):
    """Resolve one delivery in review; returns the row as it now stands. Nothing is written on a refusal."""
    if outcome not in OUTCOMES:
        raise ReviewRejected(INVALID_OUTCOME, f"outcome is one of {', '.join(OUTCOMES)}")
    with db.atomic():
        row = locked(GoodsDelivery.select().where(GoodsDelivery.id == delivery_id)).first()
        if row is None:
            raise ReviewRejected(DELIVERY_NOT_FOUND, f"delivery {delivery_id} does not exist")
        if row.status != "needs_review":
            raise ReviewRejected(DELIVERY_NOT_IN_REVIEW, f"delivery {delivery_id} is {row.status}")
        now = utcnow()
        if outcome == "delivered":
            GoodsDelivery.update(status="delivered", finished_at=now, updated_at=now).where(
                GoodsDelivery.id == row.id
            ).execute()
            fulfil_order(row.order_id, now)
        elif refund_delivery(row, row.failure_class, row.last_error_code, now).outcome != "refunded":
            raise ReviewRejected(REFUND_REFUSED, f"order {row.order_id} cannot be refunded")
        GoodsDelivery.update(resolved_by=actor, resolution_reason=reason).where(GoodsDelivery.id == row.id).execute()
        record_audit(CATEGORY, AUDIT_ACTIONS[outcome], actor, reason, "goods_delivery", row.id,
                     details={"orderId": row.order_id, "failureClass": row.failure_class,
                              "errorCode": row.last_error_code})  # fmt: skip
    return GoodsDelivery.get_by_id(row.id)
