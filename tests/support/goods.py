"""Goods for tests: a provider row pointing at a fake goods provider, one product, paid orders."""

from commerce.settlement import settle_order
from goods.catalogue import add_goods, add_provider, create_goods_order
from models.commerce import Customer

TOKEN = "goods-test-token-0123456789"


def product(base_url, sku="voucher-10", code="voucher", prices=None):
    provider = add_provider(f"fake-{code}", base_url, TOKEN)
    return add_goods(code, "Voucher 10", provider, sku, prices or {"RUB": 1000})


def paid_orders(goods, count, telegram_from=None):
    """`count` goods orders paid at YooKassa (provider clearing → revenue); their ids."""
    ids = []
    for index in range(count):
        telegram_id = None if telegram_from is None else telegram_from + index
        customer = Customer.create(display_name=f"buyer-{index}", telegram_id=telegram_id)
        order = create_goods_order(customer.id, goods.id, "RUB", provider="yookassa")
        settle_order(order.id, "provider_webhook")
        ids.append(order.id)
    return ids
