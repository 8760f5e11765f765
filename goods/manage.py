"""The operator's goods catalogue (SPEC 15.4, 12.3): goods and their prices, on and off sale, and the
providers that sell them — each change with a reason, audited in its transaction (category `payments`).

A provider's API token is sealed at rest (APP_DATA_ENCRYPTION_KEY) and never
shown back: answers and the audit say whether one is set, and its URL only by
its origin. A refusal (ManageRejected) writes nothing.
"""

from peewee import IntegrityError

from commerce.catalogue import is_currency
from goods.catalogue import deliverable
from models.base import db, utcnow
from models.goods import Goods, GoodsPrice, GoodsProvider
from ops import sealing
from ops.blocklists import URL_MAX, SourceRejected, check_token
from ops.outbox import display_url, well_formed_url
from ops.records import record_audit

CATEGORY = "payments"
TEXT_MAX = 200
PRICES_MAX = 20
AMOUNT_MAX = 10**12

INVALID_FIELD = "invalid_goods_field"
INVALID_PRICES = "invalid_prices"
INVALID_URL = "invalid_url"
INVALID_TOKEN = "invalid_token"
GOODS_NOT_FOUND = "goods_not_found"
PROVIDER_NOT_FOUND = "provider_not_found"
CODE_TAKEN = "goods_code_taken"
PROVIDER_NAME_TAKEN = "provider_name_taken"
NO_DATA_KEY = "data_key_missing"


class ManageRejected(ValueError):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


def catalogue():
    """(goods rows as dicts, providers as dicts), goods by name: what the back office lists."""
    prices = {}
    for price in GoodsPrice.select().order_by(GoodsPrice.currency):
        prices.setdefault(price.goods_id, {})[price.currency] = price.amount_minor
    providers = {provider.id: provider for provider in GoodsProvider.select().order_by(GoodsProvider.name)}
    goods = [
        goods_json(row, prices.get(row.id, {}), providers) for row in Goods.select().order_by(Goods.name, Goods.id)
    ]
    return goods, [provider_json(provider) for provider in providers.values()]


def goods_json(row, prices, providers):
    provider = providers.get(row.provider_id)
    return {
        "id": row.id,
        "code": row.code,
        "name": row.name,
        "sku": row.provider_sku,
        "providerId": row.provider_id,
        "provider": None if provider is None else provider.name,
        "prices": prices,
        "active": row.active,
    }


def provider_json(provider):
    """A provider as answers show it: never its token, its URL only by its origin."""
    return {
        "id": provider.id,
        "name": provider.name,
        "url": display_url(provider.base_url),
        "tokenUsable": deliverable(provider.id),
    }


def _text(body, name, required=True):
    value = body.get(name)
    if value is None and not required:
        return None
    if not (isinstance(value, str) and value.strip() and value.isprintable() and len(value) <= TEXT_MAX):
        raise ManageRejected(INVALID_FIELD, f"{name} is printable text of 1 to {TEXT_MAX} characters")
    return value.strip()


def _prices(value):
    if not isinstance(value, dict) or not 0 < len(value) <= PRICES_MAX:
        raise ManageRejected(
            INVALID_PRICES, f"prices is an object of 1 to {PRICES_MAX} currencies: amount in minor units"
        )
    for currency, amount in value.items():
        whole = isinstance(amount, int) and not isinstance(amount, bool) and 0 <= amount <= AMOUNT_MAX
        if not is_currency(currency) or not whole:
            raise ManageRejected(INVALID_PRICES, "a price is a currency (three capital letters) and a whole amount")
    return value


def _provider(provider_id):
    if isinstance(provider_id, bool) or not isinstance(provider_id, int):
        raise ManageRejected(INVALID_FIELD, "providerId is a provider's id")
    if GoodsProvider.get_or_none(GoodsProvider.id == provider_id) is None:
        raise ManageRejected(PROVIDER_NOT_FOUND, f"provider {provider_id} does not exist")
    return provider_id


def _set_prices(goods_id, prices):
    GoodsPrice.delete().where(GoodsPrice.goods == goods_id, GoodsPrice.currency.not_in(list(prices))).execute()
    for currency, amount in prices.items():
        updated = GoodsPrice.update(amount_minor=amount).where(
            GoodsPrice.goods == goods_id, GoodsPrice.currency == currency
        )
        if not updated.execute():
            GoodsPrice.create(goods=goods_id, currency=currency, amount_minor=amount)


def add_goods(body, actor, reason):
    """New goods on sale: {code, name, providerId, sku, prices: {currency: minor}}."""
    unexpected = set(body) - {"code", "name", "providerId", "sku", "prices"}
    if unexpected:
        raise ManageRejected(INVALID_FIELD, f"unexpected fields: {', '.join(sorted(unexpected))[:200]}")
    code, name, sku = _text(body, "code"), _text(body, "name"), _text(body, "sku")
    prices = _prices(body.get("prices"))
    provider_id = _provider(body.get("providerId"))
    try:
        with db.atomic():
            goods = Goods.create(code=code, name=name, provider=provider_id, provider_sku=sku, created_at=utcnow())
            _set_prices(goods.id, prices)
            details = {"code": code, "name": name, "sku": sku, "providerId": provider_id, "prices": prices}
            record_audit(CATEGORY, "panel.goods.added", actor, reason, "goods", goods.id, details=details)
    except IntegrityError:
        raise ManageRejected(CODE_TAKEN, f"goods with code {code!r} exist already") from None
    return goods.id


def change_goods(goods_id, body, actor, reason):
    """Change goods: any of {name, providerId, sku, prices (the whole set), active}."""
    unexpected = set(body) - {"name", "providerId", "sku", "prices", "active"}
    if unexpected or not body:
        raise ManageRejected(INVALID_FIELD, "change one or more of name, providerId, sku, prices, active")
    changes = {}
    if "name" in body:
        changes["name"] = _text(body, "name")
    if "sku" in body:
        changes["provider_sku"] = _text(body, "sku")
    if "providerId" in body:
        changes["provider"] = _provider(body["providerId"])
    if "active" in body:
        if not isinstance(body["active"], bool):
            raise ManageRejected(INVALID_FIELD, "active is true or false")
        changes["active"] = body["active"]
    prices = _prices(body["prices"]) if "prices" in body else None
    with db.atomic():
        if Goods.get_or_none(Goods.id == goods_id) is None:
            raise ManageRejected(GOODS_NOT_FOUND, f"goods {goods_id} do not exist")
        if changes:
            Goods.update(**changes).where(Goods.id == goods_id).execute()
        if prices is not None:
            _set_prices(goods_id, prices)
        action = "panel.goods.changed"
        if set(body) == {"active"}:
            action = "panel.goods.activated" if body["active"] else "panel.goods.deactivated"
        record_audit(CATEGORY, action, actor, reason, "goods", goods_id, details=dict(body))
    return goods_id


def add_provider(body, actor, reason):
    """A provider: {name, url, token}; the token sealed, never shown back."""
    unexpected = set(body) - {"name", "url", "token"}
    if unexpected:
        raise ManageRejected(INVALID_FIELD, f"unexpected fields: {', '.join(sorted(unexpected))[:200]}")
    name, url, token = _text(body, "name"), body.get("url"), body.get("token")
    if not well_formed_url(url, URL_MAX):
        raise ManageRejected(INVALID_URL, f"the URL must be http:// or https:// with a host, at most {URL_MAX}")
    try:
        if check_token(token) is None:
            raise ManageRejected(INVALID_TOKEN, "a provider's API token is required")
    except SourceRejected as rejected:
        raise ManageRejected(INVALID_TOKEN, str(rejected)) from None
    if not sealing.available():
        raise ManageRejected(NO_DATA_KEY, "APP_DATA_ENCRYPTION_KEY is not set: a provider's token cannot be sealed")
    try:
        with db.atomic():
            provider = GoodsProvider.create(name=name, base_url=url.rstrip("/"), api_token=token, created_at=utcnow())
            record_audit(CATEGORY, "panel.goods_provider.added", actor, reason, "goods_provider", provider.id,
                         details={"name": name, "url": display_url(url), "token": True})  # fmt: skip
    except IntegrityError:
        raise ManageRejected(PROVIDER_NAME_TAKEN, f"a provider named {name!r} exists already") from None
    return provider
