"""Sales for back-office tests, written straight into the database: customers with a
Telegram identity, orders paid at a provider (their payment intent and settlement,
with its ledger movement), a provisioned subscription, a wallet topped up."""

import itertools
import uuid

from commerce.catalogue import set_plan_price
from commerce.orders import create_order
from commerce.settlement import settle_order
from models.base import db, utcnow
from models.commerce import Customer, Order, Subscription
from models.fulfillment import Entitlement, FulfillmentOperation
from models.payments import PaymentIntent
from tests.support import commerce

_telegram_ids = itertools.count(700000001)


def customer(name="Alice Shopper", username="alice_shop"):
    return Customer.create(display_name=name, telegram_id=next(_telegram_ids), telegram_username=username)


def plan(code="monthly", prices=None):
    """A limited plan (100 GiB, 3 devices, two squads, a day's grace) on sale per currency."""
    created = commerce.limited_plan(code)
    for currency, amount in (prices or {"RUB": 29900, "USD": 399, "XTR": 250}).items():
        set_plan_price(created, currency, amount)
    return created


def paid_order(buyer, plan_, currency="RUB", provider="yookassa", kind="purchase", subscription=None):
    """An order paid at `provider`: its intent, the sale in the ledger and the settlement, in one transaction.
    Returns (order, settlement, intent)."""
    order = create_order(
        buyer.id,
        kind,
        currency,
        plan_id=plan_.id,
        provider=provider,
        subscription_id=getattr(subscription, "id", subscription),
    )
    with db.atomic():
        intent = PaymentIntent.create(
            order=order,
            provider=provider,
            provider_payment_id=f"{provider}-{order.id}",
            amount_minor=order.amount_minor,
            currency=currency,
            status="succeeded",
            idempotence_key=str(uuid.uuid4()),
        )
        settlement = settle_order(order.id, "provider_webhook")
    return Order.get_by_id(order.id), settlement, intent


def provision(settlement, username=None):
    """What the worker's success writes, in short: the create succeeded, the entitlement is
    active, the subscription knows its panel user. Returns the subscription."""
    entitlement = Entitlement.get_by_id(settlement.entitlement_id)
    FulfillmentOperation.update(status="succeeded", completed_at=utcnow(), attempt_count=1).where(
        FulfillmentOperation.id == settlement.operation_id
    ).execute()
    Entitlement.update(status="active").where(Entitlement.id == entitlement.id).execute()
    Subscription.update(
        remote_user_id=str(settlement.order_id), remote_username=username or f"omniflow_{settlement.order_id:016x}"
    ).where(Subscription.id == entitlement.subscription_id).execute()
    Order.update(status="fulfilled", fulfilled_at=utcnow()).where(Order.id == settlement.order_id).execute()
    return Subscription.get_by_id(entitlement.subscription_id)


def topped_up(buyer, amount, currency="RUB", provider="yookassa"):
    """A top-up paid at `provider`: the money in the customer's wallet. Returns the order."""
    order = create_order(buyer.id, "topup", currency, amount_minor=amount, provider=provider)
    settle_order(order.id, "provider_webhook")
    return Order.get_by_id(order.id)
