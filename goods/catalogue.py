"""Goods in the catalogue (SPEC 13.1, 15.4): a product with a price per currency, sold by a goods
provider under its SKU; and the pending order that buys one.

A provider's API token is sealed with APP_DATA_ENCRYPTION_KEY (SPEC 12.3), so
a provider can only be added where the key is set.
"""

from peewee import IntegrityError

from commerce.catalogue import CatalogueError, checked_currency
from commerce.orders import (
    IDEMPOTENCY_KEY_REUSED,
    ORDER_PAYMENT_WINDOW,
    OrderRejected,
    check_provider,
    orderable_customer,
)
from models.base import db, utcnow
from models.commerce import Order
from models.goods import Goods, GoodsPrice, GoodsProvider
from ops import sealing

GOODS_NOT_FOUND = "goods_not_found"
GOODS_INACTIVE = "goods_inactive"
GOODS_NOT_PRICED = "goods_not_priced"
INVALID_PRICE = "invalid_price"
NO_DATA_KEY = "data_key_missing"
GOODS_PROVIDER_NOT_CONFIGURED = "goods_provider_not_configured"


def add_provider(name, base_url, api_token):
    """A goods provider; its token is sealed at rest."""
    if not sealing.available():
        raise CatalogueError(NO_DATA_KEY, "APP_DATA_ENCRYPTION_KEY is not set: a provider's token cannot be sealed")
    return GoodsProvider.create(name=name, base_url=base_url, api_token=api_token, created_at=utcnow())


def add_goods(code, name, provider, sku, prices):
    """A product on sale at `prices` ({currency: amount_minor})."""
    with db.atomic():
        goods = Goods.create(code=code, name=name, provider=provider, provider_sku=sku, created_at=utcnow())
        for currency, amount in prices.items():
            set_goods_price(goods, currency, amount)
    return goods


def set_goods_price(goods, currency, amount_minor):
    if isinstance(amount_minor, bool) or not isinstance(amount_minor, int) or amount_minor < 0:
        raise CatalogueError(INVALID_PRICE, "a price is a whole, non-negative number of minor units")
    checked_currency(currency)
    with db.atomic():
        updated = GoodsPrice.update(amount_minor=amount_minor).where(
            GoodsPrice.goods == goods, GoodsPrice.currency == currency
        )
        if not updated.execute():
            GoodsPrice.create(goods=goods, currency=currency, amount_minor=amount_minor)


def goods_price(goods, currency):
    row = GoodsPrice.get_or_none(GoodsPrice.goods == goods, GoodsPrice.currency == checked_currency(currency))
    if row is None:
        raise CatalogueError(GOODS_NOT_PRICED, f"goods {getattr(goods, 'id', goods)} have no price in {currency}")
    return row.amount_minor


def active_goods(currency):
    query = Goods.select().join(GoodsPrice).where(Goods.active, GoodsPrice.currency == checked_currency(currency))
    return list(query.order_by(GoodsPrice.amount_minor, Goods.id))


def goods_on_sale():
    """[(goods, {currency: amount_minor})] of the active goods with a price and a provider whose token
    opens here, by name: what a customer can buy."""
    prices = {}
    for price in GoodsPrice.select().join(Goods).where(Goods.active):
        prices.setdefault(price.goods_id, {})[price.currency] = price.amount_minor
    on_sale = Goods.select().where(Goods.id.in_(list(prices))).order_by(Goods.name, Goods.id) if prices else []
    usable = {}
    return [
        (goods, prices[goods.id])
        for goods in on_sale
        if usable.setdefault(goods.provider_id, deliverable(goods.provider_id))
    ]


def purchasable_goods(goods_id):
    goods = Goods.get_or_none(Goods.id == goods_id)
    if goods is None:
        raise CatalogueError(GOODS_NOT_FOUND, f"goods {goods_id} do not exist")
    if not goods.active:
        raise CatalogueError(GOODS_INACTIVE, f"goods {goods_id} are not on sale")
    if not deliverable(goods.provider_id):
        raise CatalogueError(
            GOODS_PROVIDER_NOT_CONFIGURED, f"goods {goods_id} cannot be delivered: their provider has no usable token"
        )
    return goods


def deliverable(provider_id):
    """Whether the provider's sealed token opens here: without it a paid order could never be delivered."""
    try:
        token = GoodsProvider.get_by_id(provider_id).api_token
    except sealing.UnsealError:
        return False
    return bool(token)


def create_goods_order(customer_id, goods_id, currency, provider=None, key=None):
    """A pending `goods` order priced from the catalogue; OrderRejected says why not (nothing written).
    With `key` (an idempotency key) the same request finds the order it made; another request is refused."""
    try:
        checked_currency(currency)
        customer = orderable_customer(customer_id)
        check_provider(provider, currency)
        goods = purchasable_goods(goods_id)
        price = goods_price(goods, currency)
    except CatalogueError as error:
        raise OrderRejected(error.code, str(error)) from None
    now = utcnow()
    fields = dict(
        customer=customer.id,
        goods=goods.id,
        operation="goods",
        status="pending",
        amount_minor=price,
        currency=currency,
        provider=provider,
        idempotency_key=key,
        created_at=now,
        expires_at=now + ORDER_PAYMENT_WINDOW,
    )
    if key is None:
        return Order.create(**fields)
    existing = Order.get_or_none(Order.idempotency_key == key)
    if existing is not None:
        return _same_request(existing, fields)
    try:
        with db.atomic():
            return Order.create(**fields)
    except IntegrityError:
        existing = Order.get_or_none(Order.idempotency_key == key)
        if existing is None:
            raise
        return _same_request(existing, fields)  # a concurrent request with the same key won


def _same_request(existing, fields):
    same = (existing.customer_id, existing.operation, existing.goods_id, existing.currency) == (
        fields["customer"],
        "goods",
        fields["goods"],
        fields["currency"],
    )
    if not same:
        raise OrderRejected(IDEMPOTENCY_KEY_REUSED, "the idempotency key was already used for another order")
    return existing
