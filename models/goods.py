"""Digital goods (SPEC 3, 15.4): the providers that sell them, the goods and their prices, and one
delivery per paid goods order — the truth about what is owed (SPEC 3.2), not the queue."""

from peewee import BigAutoField, BigIntegerField, BooleanField, DateTimeField, ForeignKeyField, IntegerField, TextField

from models.base import BaseModel, utcnow
from models.commerce import Customer, Order
from ops.sealing import SealedField

DELIVERY_STATUSES = ("pending", "submitting", "retrying", "delivered", "needs_review", "refunded", "cancelled")
OPEN_DELIVERY_STATUSES = ("pending", "submitting", "retrying")
FINAL_DELIVERY_STATUSES = ("delivered", "refunded", "cancelled")


class GoodsProvider(BaseModel):
    id = BigAutoField()
    name = TextField(unique=True)
    base_url = TextField()
    api_token = SealedField()
    created_at = DateTimeField(default=utcnow)

    class Meta:
        table_name = "goods_providers"


class Goods(BaseModel):
    id = BigAutoField()
    code = TextField(unique=True)
    name = TextField()
    provider = ForeignKeyField(GoodsProvider, backref="goods", column_name="provider_id")
    provider_sku = TextField()
    active = BooleanField(default=True)
    created_at = DateTimeField(default=utcnow)

    class Meta:
        table_name = "goods"


class GoodsPrice(BaseModel):
    id = BigAutoField()
    goods = ForeignKeyField(Goods, backref="prices", column_name="goods_id")
    currency = TextField()
    amount_minor = BigIntegerField()

    class Meta:
        table_name = "goods_prices"
        indexes = ((("goods", "currency"), True),)


class GoodsDelivery(BaseModel):
    id = BigAutoField()
    order = ForeignKeyField(Order, unique=True, backref="+", column_name="order_id")
    goods = ForeignKeyField(Goods, backref="+", column_name="goods_id")
    customer = ForeignKeyField(Customer, backref="+", column_name="customer_id")
    status = TextField(default="pending")
    attempt_count = IntegerField(default=0)  # how often the provider was asked (SPEC 3.2)
    next_attempt_at = DateTimeField(null=True)  # due, or while `submitting` the deadline of the call
    failure_class = TextField(null=True)
    last_error_code = TextField(null=True)
    provider_reference = TextField(null=True)
    resolved_by = TextField(null=True)
    resolution_reason = TextField(null=True)
    created_at = DateTimeField(default=utcnow)
    updated_at = DateTimeField(default=utcnow)
    finished_at = DateTimeField(null=True)

    class Meta:
        table_name = "goods_deliveries"


GOODS_MODELS = [GoodsProvider, Goods, GoodsPrice, GoodsDelivery]
