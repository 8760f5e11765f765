"""Commerce records: customers, plans, subscriptions (slots), orders.

A payment (order), what it bought (entitlement, models/fulfillment.py) and
the panel's user are separate records on purpose: they fail independently,
and merging them would let a panel outage lose a payment.
"""

import json
import uuid

from peewee import BigAutoField, BigIntegerField, BooleanField, DateTimeField, ForeignKeyField, IntegerField, TextField

from models.base import BaseModel, utcnow

ORDER_STATUSES = ("draft", "pending", "paid", "fulfilled", "cancelled", "expired", "partially_refunded", "refunded")
ORDER_OPERATIONS = ("purchase", "extension", "renewal", "upgrade", "downgrade", "addon", "gift", "code", "trial")
# Order operations whose desired state resets the traffic counter once applied (SPEC 2.6).
RESETS_TRAFFIC = ("extension", "renewal", "upgrade")


def new_uuid():
    return str(uuid.uuid4())


class Customer(BaseModel):
    id = TextField(primary_key=True, default=new_uuid)
    display_name = TextField(default="")
    created_at = DateTimeField(default=utcnow)

    class Meta:
        table_name = "customers"


class Plan(BaseModel):
    id = BigAutoField()
    code = TextField(unique=True)
    name = TextField()
    duration_days = IntegerField()
    traffic_allowance_bytes = BigIntegerField(null=True)  # None: unlimited
    device_limit = IntegerField(null=True)  # None: unlimited
    squad_ids = TextField(default="[]")  # JSON list of internal squad UUIDs
    grace_period_hours = IntegerField(default=0)
    price_minor = BigIntegerField()
    currency = TextField(default="USD")
    active = BooleanField(default=True)

    class Meta:
        table_name = "plans"

    @property
    def squads(self):
        return json.loads(self.squad_ids)


class Subscription(BaseModel):
    id = TextField(primary_key=True, default=new_uuid)
    customer = ForeignKeyField(Customer, backref="subscriptions", column_name="customer_id")
    slot = IntegerField()
    remote_user_id = TextField(null=True)  # the panel's id of the user, once known
    remote_username = TextField(null=True)
    observed_state = TextField(null=True)  # JSON: status, expireAt, limits as last read from the panel
    created_at = DateTimeField(default=utcnow)

    class Meta:
        table_name = "subscriptions"
        indexes = ((("customer", "slot"), True),)


class Order(BaseModel):
    id = BigAutoField()
    customer = ForeignKeyField(Customer, backref="orders", column_name="customer_id")
    subscription = ForeignKeyField(Subscription, null=True, backref="orders", column_name="subscription_id")
    plan = ForeignKeyField(Plan, column_name="plan_id")
    operation = TextField(default="purchase")
    status = TextField(default="pending")
    amount_minor = BigIntegerField()
    currency = TextField(default="USD")
    settled_by = TextField(null=True)  # provider_webhook | wallet | gift | code
    created_at = DateTimeField(default=utcnow)
    paid_at = DateTimeField(null=True)
    fulfilled_at = DateTimeField(null=True)
    refunded_at = DateTimeField(null=True)

    class Meta:
        table_name = "orders"
