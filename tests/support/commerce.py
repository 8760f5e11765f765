"""Customers, plans and orders for fulfillment and commerce tests."""

import json

from commerce.catalogue import set_plan_price
from models.commerce import Customer, Order, Plan

SQUAD_A = "11111111-2222-4333-8444-555555555555"
SQUAD_B = "66666666-7777-4888-9999-aaaaaaaaaaaa"

GIB = 1 << 30


def plan(code="basic", traffic=None, devices=None, squads=(), days=30, grace_hours=0):
    return Plan.create(
        code=code,
        name=code.title(),
        duration_days=days,
        traffic_allowance_bytes=traffic,
        device_limit=devices,
        squad_ids=json.dumps(list(squads)),
        grace_period_hours=grace_hours,
        price_minor=500,
    )


def unlimited_plan(code="unlimited"):
    return plan(code)


def limited_plan(code="limited", squads=(SQUAD_A, SQUAD_B)):
    return plan(code, traffic=100 * GIB, devices=3, squads=squads, grace_hours=24)


def customer(name="Alice"):
    return Customer.create(display_name=name)


def order(
    customer_, plan_, operation="purchase", subscription=None, status="pending", amount=None, provider="yookassa"
):
    """An order of `plan_` at its first price (or `amount`), paid through `provider` when it is settled."""
    return Order.create(
        customer=customer_,
        plan=plan_,
        subscription=subscription,
        operation=operation,
        status=status,
        amount_minor=plan_.price_minor if amount is None else amount,
        provider=provider,
    )


def priced_plan(code="priced", prices=None, trial=False, days=30):
    """A plan on sale at `prices` ({currency: minor units}; default 500 USD and 250 XTR)."""
    created = plan(code, days=days)
    Plan.update(trial=trial).where(Plan.id == created.id).execute()
    for currency, amount in ({"USD": 500, "XTR": 250} if prices is None else prices).items():
        set_plan_price(created, currency, amount)
    return Plan.get_by_id(created.id)
