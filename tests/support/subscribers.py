"""Many customers with one active, provisioned subscription each, written in a few statements: the
subscription knows its panel user, the fake panel holds that user, the period is the plan's.
For bulk tests that need hundreds of subscribers without settling hundreds of orders."""

import datetime
import uuid

from fulfillment.usernames import username_for
from models.base import db, utcnow
from models.commerce import Customer, Order, Subscription
from models.fulfillment import Entitlement

CHUNK = 500  # rows per INSERT: SQLite takes at most 32 766 parameters


def _insert(model, rows):
    for start in range(0, len(rows), CHUNK):
        model.insert_many(rows[start : start + CHUNK]).execute()


def provisioned(panel, plan, count, ends_in=datetime.timedelta(days=20)):
    """`count` subscribers of `plan` ending `ends_in` from now; returns their subscriptions' ids, sorted.
    Without a fake `panel` (tests that never reach one) the panel ids are made up."""
    now = utcnow().replace(microsecond=0)
    ends_at = now + ends_in
    expire_at = ends_at + datetime.timedelta(hours=plan.grace_period_hours)
    customers = [str(uuid.uuid4()) for _ in range(count)]
    subscriptions = [str(uuid.uuid4()) for _ in range(count)]
    users = [
        panel.seed_user(username_for(s), expire_at, plan.traffic_allowance_bytes or 0, plan.device_limit or 0,
                        plan.squads)["id"] if panel else n
        for n, s in enumerate(subscriptions, 1)
    ]  # fmt: skip
    with db.atomic():
        _insert(Customer, [{"id": c, "display_name": f"subscriber {n}"} for n, c in enumerate(customers)])
        _insert(
            Subscription,
            [
                {"id": s, "customer": c, "slot": 1, "remote_user_id": str(u), "remote_username": username_for(s),
                 "plan": plan.id}
                for s, c, u in zip(subscriptions, customers, users)
            ],
        )  # fmt: skip
        orders = [
            Order.create(customer=c, subscription=s, plan=plan, status="fulfilled", amount_minor=plan.price_minor,
                         currency=plan.currency, paid_at=now, fulfilled_at=now).id
            for s, c in zip(subscriptions, customers)
        ]  # fmt: skip
        _insert(
            Entitlement,
            [
                {"order": o, "subscription": s, "plan": plan.id, "status": "active",
                 "starts_at": ends_at - datetime.timedelta(days=plan.duration_days),
                 "ends_at": ends_at, "traffic_allowance_bytes": plan.traffic_allowance_bytes,
                 "device_limit": plan.device_limit, "squad_ids": plan.squad_ids,
                 "grace_period_hours": plan.grace_period_hours, "created_at": now, "updated_at": now}
                for o, s in zip(orders, subscriptions)
            ],
        )  # fmt: skip
    return sorted(subscriptions)
