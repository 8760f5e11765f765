"""What is sold and the ways to get it (SPEC 13.1, 13.11): prices per currency,
add-ons, gift cards, access codes and their activations, personal offers, trials.

Gift cards and access codes keep only the SHA-256 of their normalised code
(commerce/codes.py): the code is shown once, when it is made, and a copy of
the database redeems nothing. A trial is one row per customer, so the
database itself refuses a second one.
"""

from peewee import BigAutoField, BigIntegerField, BooleanField, DateTimeField, ForeignKeyField, IntegerField, TextField

from models.base import BaseModel, utcnow
from models.commerce import Customer, Order, Plan

GIFT_CARD_STATUSES = ("active", "redeemed", "expired")
OFFER_STATUSES = ("active", "used", "expired")


class PlanPrice(BaseModel):
    id = BigAutoField()
    plan = ForeignKeyField(Plan, backref="prices", column_name="plan_id")
    currency = TextField()  # ISO 4217, or XTR for Telegram Stars
    amount_minor = BigIntegerField()

    class Meta:
        table_name = "plan_prices"
        indexes = ((("plan", "currency"), True),)


class Addon(BaseModel):
    """Extra traffic or extra devices, applied onto the current entitlement (SPEC 13.2)."""

    id = BigAutoField()
    code = TextField(unique=True)
    name = TextField()
    extra_traffic_bytes = BigIntegerField(default=0)
    extra_devices = IntegerField(default=0)
    active = BooleanField(default=True)
    created_at = DateTimeField(default=utcnow)

    class Meta:
        table_name = "addons"


class AddonPrice(BaseModel):
    id = BigAutoField()
    addon = ForeignKeyField(Addon, backref="prices", column_name="addon_id")
    currency = TextField()
    amount_minor = BigIntegerField()

    class Meta:
        table_name = "addon_prices"
        indexes = ((("addon", "currency"), True),)


class GiftCard(BaseModel):
    id = BigAutoField()
    code_hash = TextField(unique=True)
    plan = ForeignKeyField(Plan, column_name="plan_id")
    purchase_order = ForeignKeyField(Order, null=True, unique=True, backref="+", column_name="purchase_order_id")
    status = TextField(default="active")
    expires_at = DateTimeField()
    redeemed_by = ForeignKeyField(Customer, null=True, backref="+", column_name="redeemed_by_id")
    redeemed_at = DateTimeField(null=True)
    redemption_order = ForeignKeyField(Order, null=True, unique=True, backref="+", column_name="redemption_order_id")
    created_at = DateTimeField(default=utcnow)
    revoked_at = DateTimeField(null=True)  # an operator's revocation: it activates nothing after
    revoked_reason = TextField(null=True)

    class Meta:
        table_name = "gift_cards"


class AccessCode(BaseModel):
    id = BigAutoField()
    code_hash = TextField(unique=True)
    plan = ForeignKeyField(Plan, column_name="plan_id")
    max_activations = IntegerField()
    activation_count = IntegerField(default=0)  # CHECK: never above max_activations
    expires_at = DateTimeField(null=True)
    active = BooleanField(default=True)
    created_at = DateTimeField(default=utcnow)
    revoked_at = DateTimeField(null=True)  # an operator's revocation (active is then False too)
    revoked_reason = TextField(null=True)

    class Meta:
        table_name = "access_codes"


class AccessCodeActivation(BaseModel):
    id = BigAutoField()
    access_code = ForeignKeyField(AccessCode, backref="activations", column_name="access_code_id")
    customer = ForeignKeyField(Customer, backref="+", column_name="customer_id")
    order = ForeignKeyField(Order, unique=True, backref="+", column_name="order_id")
    activated_at = DateTimeField(default=utcnow)

    class Meta:
        table_name = "access_code_activations"
        indexes = ((("access_code", "customer"), True),)


class PersonalOffer(BaseModel):
    """A discount for one customer: a percentage, or an amount in one currency."""

    id = BigAutoField()
    customer = ForeignKeyField(Customer, backref="offers", column_name="customer_id")
    plan = ForeignKeyField(Plan, null=True, column_name="plan_id")  # None: any plan
    discount_percent = IntegerField(null=True)
    discount_minor = BigIntegerField(null=True)
    currency = TextField(null=True)  # of discount_minor
    status = TextField(default="active")
    expires_at = DateTimeField()
    used_at = DateTimeField(null=True)
    used_order = ForeignKeyField(Order, null=True, unique=True, backref="+", column_name="used_order_id")
    created_at = DateTimeField(default=utcnow)

    class Meta:
        table_name = "personal_offers"


class TrialActivation(BaseModel):
    id = BigAutoField()
    customer = ForeignKeyField(Customer, unique=True, backref="+", column_name="customer_id")
    plan = ForeignKeyField(Plan, column_name="plan_id")
    order = ForeignKeyField(Order, unique=True, backref="+", column_name="order_id")
    activated_at = DateTimeField(default=utcnow)

    class Meta:
        table_name = "trial_activations"


CATALOGUE_MODELS = [
    PlanPrice,
    Addon,
    AddonPrice,
    GiftCard,
    AccessCode,
    AccessCodeActivation,
    PersonalOffer,
    TrialActivation,
]
