"""Commerce records: customers, plans, subscriptions (slots), orders.

A payment (order), what it bought (entitlement, models/fulfillment.py) and
the panel's user are separate records on purpose: they fail independently,
and merging them would let a panel outage lose a payment.
"""

import json
import uuid

from peewee import (
    BigAutoField,
    BigIntegerField,
    BooleanField,
    DateTimeField,
    DeferredForeignKey,
    ForeignKeyField,
    IntegerField,
    TextField,
)

from models.base import BaseModel, utcnow

ORDER_STATUSES = ("draft", "pending", "paid", "fulfilled", "cancelled", "expired", "partially_refunded", "refunded")
# The spec calls an order's operation its kind (SPEC 13.2); `code` is an access-code activation.
ORDER_OPERATIONS = (
    "purchase",
    "extension",
    "renewal",
    "upgrade",
    "downgrade",
    "addon",
    "topup",
    "gift",
    "code",
    "trial",
    "goods",
)
# Orders that buy no plan: a top-up fills the wallet, an add-on changes the current entitlement,
# goods are delivered by their provider (goods/).
PLANLESS_OPERATIONS = ("topup", "addon", "goods")
PAYMENT_PROVIDERS = ("yookassa", "cryptobot", "stars")
# Order operations whose desired state resets the traffic counter once applied (SPEC 2.6).
RESETS_TRAFFIC = ("extension", "renewal", "upgrade")


def new_uuid():
    return str(uuid.uuid4())


def search_name(name):
    """A name as customers are found by it: case-folded in any script ("ИВАН" → "иван"), spaces collapsed."""
    return " ".join(str(name or "").casefold().split())


class Customer(BaseModel):
    id = TextField(primary_key=True, default=new_uuid)
    display_name = TextField(default="")
    telegram_id = BigIntegerField(null=True, unique=True)
    telegram_username = TextField(null=True)
    language_code = TextField(null=True)
    blocked = BooleanField(default=False)
    blocked_reason = TextField(null=True)
    blocked_at = DateTimeField(null=True)
    created_at = DateTimeField(default=utcnow)
    telegram_unreachable_at = DateTimeField(null=True)  # Telegram answered 403: the customer blocked the bot
    search_name = TextField(default="")  # search_name(display_name), kept by save() and every rename

    class Meta:
        table_name = "customers"

    def save(self, *args, **kwargs):
        self.search_name = search_name(self.display_name)
        return super().save(*args, **kwargs)


class Plan(BaseModel):
    id = BigAutoField()
    code = TextField(unique=True)
    name = TextField()
    duration_days = IntegerField()
    traffic_allowance_bytes = BigIntegerField(null=True)  # None: unlimited
    device_limit = IntegerField(null=True)  # None: unlimited
    squad_ids = TextField(default="[]")  # JSON list of internal squad UUIDs
    grace_period_hours = IntegerField(default=0)
    # The first price, from before prices per currency; catalogue reads plan_prices (SPEC 13.1).
    price_minor = BigIntegerField()
    currency = TextField(default="USD")
    active = BooleanField(default=True)
    trial = BooleanField(default=False)

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
    plan = ForeignKeyField(Plan, null=True, column_name="plan_id")  # what a renewal buys again
    auto_renew = BooleanField(default=False)
    created_at = DateTimeField(default=utcnow)

    class Meta:
        table_name = "subscriptions"
        indexes = ((("customer", "slot"), True),)


class Order(BaseModel):
    id = BigAutoField()
    customer = ForeignKeyField(Customer, backref="orders", column_name="customer_id")
    subscription = ForeignKeyField(Subscription, null=True, backref="orders", column_name="subscription_id")
    plan = ForeignKeyField(Plan, null=True, column_name="plan_id")  # None only for PLANLESS_OPERATIONS
    addon = DeferredForeignKey("Addon", null=True, column_name="addon_id")
    personal_offer = DeferredForeignKey("PersonalOffer", null=True, column_name="personal_offer_id")
    goods = DeferredForeignKey("Goods", null=True, column_name="goods_id")
    operation = TextField(default="purchase")
    status = TextField(default="pending")
    amount_minor = BigIntegerField()
    currency = TextField(default="USD")
    refunded_amount_minor = BigIntegerField(default=0)
    provider = TextField(null=True)  # the payment provider chosen at checkout
    idempotency_key = TextField(null=True, unique=True)  # e.g. renewal:<subscription>:<period end>
    settled_by = TextField(null=True)  # provider_webhook | wallet | gift | code
    created_at = DateTimeField(default=utcnow)
    # A pending order's payment deadline (SPEC 13.7); cleared once it stops waiting for payment.
    expires_at = DateTimeField(null=True)
    paid_at = DateTimeField(null=True)
    fulfilled_at = DateTimeField(null=True)
    refunded_at = DateTimeField(null=True)

    class Meta:
        table_name = "orders"
