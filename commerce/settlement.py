"""Settlement (SPEC 2.2, 8.1): the one function every way of paying calls.

A provider webhook, a wallet-covered order, a gift and a code all end here.
One transaction writes order → paid, the entitlement, the fulfillment
operation (key `order:<id>:fulfill`) and its job, the `order.paid` outbox
event and the operator notice: all of it commits, or none of it does, so a
paid order always has a job waiting for it. Settling an order again returns
the first settlement's result and writes nothing.
"""

import datetime
from dataclasses import dataclass

from fulfillment.desired_state import DesiredState
from fulfillment.enqueue import enqueue_operation
from fulfillment.revocation import revoke_access
from fulfillment.rules import NOTICE_ORDER_PAID
from models.base import db, utcnow
from models.commerce import RESETS_TRAFFIC, Order, Subscription
from models.fulfillment import Entitlement, FulfillmentOperation
from models.transactions import locked
from ops.records import emit_event, queue_notice

SETTLED_STATES = ("paid", "fulfilled", "partially_refunded", "refunded")
SETTLEABLE_STATES = ("draft", "pending")
SETTLED_BY = ("provider_webhook", "wallet", "gift", "code")
KEY_PREFIX = {"gift": "gift", "code": "code"}


class SettlementRejected(ValueError):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Settlement:
    order_id: int
    entitlement_id: int
    operation_id: int
    already_settled: bool


def settle_order(order_id, settled_by):
    """Mark an order paid and create everything its access needs, atomically."""
    if settled_by not in SETTLED_BY:
        raise SettlementRejected("invalid_settlement_source", f"unknown settlement source {settled_by!r}")
    with db.atomic():
        order = locked(Order.select().where(Order.id == order_id)).first()
        if order is None:
            raise SettlementRejected("order_not_found", f"order {order_id} does not exist")
        if order.status in SETTLED_STATES:
            return _first_settlement(order)
        if order.status not in SETTLEABLE_STATES:
            raise SettlementRejected("order_not_payable", f"order {order_id} is {order.status}")

        now = utcnow().replace(microsecond=0)
        subscription = order.subscription or _new_subscription(order)
        current = _current_period(subscription)
        starts_at = _period_start(order, current, now)
        plan = order.plan
        entitlement = Entitlement.create(
            order=order,
            subscription=subscription,
            plan=plan,
            status="pending",
            starts_at=starts_at,
            ends_at=starts_at + datetime.timedelta(days=plan.duration_days),
            paused_at=_carried_pause(order, current, starts_at),
            traffic_allowance_bytes=plan.traffic_allowance_bytes,
            device_limit=plan.device_limit,
            squad_ids=plan.squad_ids,
            grace_period_hours=plan.grace_period_hours,
            created_at=now,
            updated_at=now,
        )
        desired = DesiredState.from_entitlement(entitlement, reset_traffic=order.operation in RESETS_TRAFFIC)
        prefix = KEY_PREFIX.get(order.operation, "order")
        enqueued = enqueue_operation(
            entitlement, "create", desired, f"{prefix}:{order.id}:fulfill", correlation_id=f"order:{order.id}"
        )
        Order.update(status="paid", paid_at=now, settled_by=settled_by, subscription=subscription).where(
            Order.id == order.id
        ).execute()
        emit_event(
            "order.paid",
            {
                "orderId": order.id,
                "customerId": order.customer_id,
                "entitlementId": entitlement.id,
                "amountMinor": order.amount_minor,
                "currency": order.currency,
            },
            aggregate=f"customer:{order.customer_id}",
        )
        queue_notice(NOTICE_ORDER_PAID, f"order:{order.id}", {"orderId": order.id, "entitlementId": entitlement.id})
        return Settlement(order.id, entitlement.id, enqueued.operation.id, already_settled=False)


def _first_settlement(order):
    entitlement = Entitlement.get(Entitlement.order == order)
    operation = (
        FulfillmentOperation.select()
        .where(FulfillmentOperation.entitlement == entitlement, FulfillmentOperation.operation == "create")
        .order_by(FulfillmentOperation.id)
        .get()
    )
    return Settlement(order.id, entitlement.id, operation.id, already_settled=True)


def _new_subscription(order):
    """A purchase without a target subscription opens the customer's next slot."""
    used = [s.slot for s in Subscription.select(Subscription.slot).where(Subscription.customer == order.customer_id)]
    return Subscription.create(customer=order.customer_id, slot=max(used, default=0) + 1)


CONTINUES_PERIOD = ("extension", "renewal")


def _current_period(subscription):
    """The subscription's latest period (its newest end), or None."""
    return (
        Entitlement.select(Entitlement.ends_at, Entitlement.paused_at)
        .where(Entitlement.subscription == subscription, Entitlement.status != "superseded")
        .order_by(Entitlement.ends_at.desc())
        .first()
    )


def _period_start(order, current, now):
    """Extensions and renewals continue the current period; everything else starts now.
    A paused period's end stands still, so the next one starts there even if it is past:
    the resume moves both by the time paused."""
    if order.operation not in CONTINUES_PERIOD or current is None:
        return now
    return current.ends_at if current.paused_at is not None else max(now, current.ends_at)


def _carried_pause(order, current, starts_at):
    """Only a resume lifts a pause (SPEC 2.6, 2.25): a new period of a paused subscription
    is paused too, from the same moment when it continues the paused period, else from
    its own start."""
    if current is None or current.paused_at is None:
        return None
    return current.paused_at if order.operation in CONTINUES_PERIOD else starts_at


REFUNDABLE_STATES = ("paid", "fulfilled", "partially_refunded")


def refund_order(order_id, amount_minor=None):
    """Refund a paid order, in full (`amount_minor` None or all that is left) or in part
    (SPEC 13.10). In full: the order `refunded` and its access revoked
    (fulfillment/revocation.py); fulfillment's create for it is cancelled if it has not
    called the panel; if it is already calling, its success cannot move the order back
    to fulfilled, and the `disable` queued here runs after it. In part:
    `partially_refunded`, the refunded amount counted, access kept. Returns the order."""
    with db.atomic():
        order = locked(Order.select().where(Order.id == order_id)).first()
        if order is None:
            raise SettlementRejected("order_not_found", f"order {order_id} does not exist")
        if order.status not in REFUNDABLE_STATES:
            raise SettlementRejected("order_not_refundable", f"order {order_id} is {order.status}")
        left = order.amount_minor - order.refunded_amount_minor
        amount = left if amount_minor is None else amount_minor
        if amount_minor is not None and (
            isinstance(amount, bool) or not isinstance(amount, int) or not 0 < amount <= left
        ):
            raise SettlementRejected(
                "invalid_refund_amount", f"a refund of order {order_id} is a whole number from 1 to {left}"
            )
        full = amount == left
        Order.update(
            status="refunded" if full else "partially_refunded",
            refunded_amount_minor=order.refunded_amount_minor + amount,
            refunded_at=utcnow(),
        ).where(Order.id == order.id).execute()
        if full:
            revoke_access(order.id)
        return Order.get_by_id(order.id)
