"""SPEC 3, 13.4, 15.4: POST /v1/checkout sells digital goods at their catalogue price, with every way of
paying; a paid goods order is delivered once; a goods purchase the shop cannot honour is refused with a
code and writes nothing."""

import pytest

from bot.customer_notices import render
from commerce import ledger
from fakes.goods import FakeGoodsProvider
from goods import delivery
from goods.delivery import goods_delivery
from models.commerce import Customer, Order
from models.goods import GoodsDelivery, GoodsPrice
from models.jobs import Job
from models.ledger import LedgerTransaction
from models.ops import CustomerNotice
from models.payments import PaymentIntent
from ops import sealing
from tests.support import commerce
from tests.support.goods import TOKEN, product
from tests.web.test_checkout import topped_up

pytestmark = pytest.mark.usefixtures("ledger_invariant")


@pytest.fixture(scope="module")
def goods_provider():
    fake = FakeGoodsProvider(token=TOKEN, seed=5).start()
    yield fake
    fake.stop()


@pytest.fixture
def voucher(database, data_key, goods_provider):
    goods_provider.reset()
    return product(goods_provider.base_url, prices={"RUB": 1000, "XTR": 50, "USD": 200})


def buy(shop, customer, goods_id, provider, currency="RUB", request_id="goods-1", **extra):
    return shop.checkout(
        customerId=customer.id,
        kind="goods",
        goodsId=goods_id,
        provider=provider,
        currency=currency,
        requestId=request_id,
        **extra,
    )


def written():
    return tuple(model.select().count() for model in (Order, PaymentIntent, LedgerTransaction, GoodsDelivery, Job))


def test_goods_bought_from_the_wallet_at_checkout_are_delivered_once_and_the_customer_gets_the_code(
    shop, voucher, goods_provider
):
    customer = Customer.create(display_name="Buyer", telegram_id=7100)
    topped_up(shop, customer, 1500)
    answer = buy(shop, customer, voucher.id, "wallet")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert (body["orderStatus"], body["amountMinor"], body["currency"]) == ("paid", 1000, "RUB")
    assert buy(shop, customer, voucher.id, "wallet").json() == body  # the same request: the same order, paid once
    assert ledger.balance(customer.id, "RUB") == 500
    (row,) = GoodsDelivery.select().where(GoodsDelivery.order == body["orderId"])
    assert goods_delivery(body["orderId"]) == "delivered"
    assert goods_provider.stats()["submissions"][delivery.reference(body["orderId"])] == 1
    (bought,) = goods_provider.orders()
    (notice,) = CustomerNotice.select().where(
        CustomerNotice.kind == delivery.NOTICE_CUSTOMER_DELIVERED, CustomerNotice.customer == customer.id
    )
    assert bought["payload"]["code"] in render(notice).text
    assert Order.get_by_id(body["orderId"]).status == "fulfilled"


def test_goods_checkout_with_stars_answers_an_invoice_and_goods_paid_at_a_hosted_provider_get_their_delivery(
    shop, voucher
):
    from tests.support.shop import settle_deliveries

    answer = buy(shop, commerce.customer(), voucher.id, "stars", currency="XTR", request_id="stars")
    assert answer.status_code == 200, answer.text
    invoice = answer.json()["invoice"]
    assert (invoice["amount"], invoice["currency"], invoice["title"]) == (50, "XTR", "Voucher 10")
    assert GoodsDelivery.select().count() == 0  # nothing is owed before it is paid

    answer = buy(shop, commerce.customer(), voucher.id, "cryptobot", currency="USD")
    assert answer.status_code == 200, answer.text
    assert answer.json()["confirmationUrl"] and answer.json()["amountMinor"] == 200
    intent = PaymentIntent.get(PaymentIntent.order == answer.json()["orderId"])
    shop.cryptobot.pay(intent.provider_payment_id)
    assert settle_deliveries() == ["settled"]
    (row,) = GoodsDelivery.select()
    assert (row.order_id, row.status) == (answer.json()["orderId"], "pending")


def _inactive(goods):
    goods.active = False
    goods.save()


def _unpriced_in_rub(goods):
    GoodsPrice.delete().where(GoodsPrice.goods == goods, GoodsPrice.currency == "RUB").execute()


def _blocked(customer):
    Customer.update(blocked=True).where(Customer.id == customer.id).execute()


REFUSALS = [  # (what is wrong, the request's difference, status, code), in an order where each stays the cause
    (None, {"goodsId": 999999}, 404, "goods_not_found"),
    (None, {"goodsId": None}, 400, "goods_required"),
    (None, {"planId": 1}, 400, "unexpected_field"),
    (None, {"provider": "wallet"}, 422, "insufficient_funds"),
    (_unpriced_in_rub, {}, 422, "goods_not_priced"),
    (_inactive, {}, 422, "goods_inactive"),
    (_blocked, {}, 403, "customer_blocked"),
]


def test_a_goods_purchase_the_shop_cannot_honour_is_refused_with_a_code_and_writes_nothing(shop, voucher):
    customer = commerce.customer()
    before = written()
    for change, difference, status, code in REFUSALS:
        if change is _blocked:
            change(customer)
        elif change is not None:
            change(voucher)
        request = {"goodsId": voucher.id, "provider": "yookassa", "currency": "RUB", **difference}
        answer = shop.checkout(customerId=customer.id, kind="goods", requestId=code, **request)
        assert (answer.status_code, answer.json()["code"]) == (status, code), answer.text
        assert written() == before


def test_goods_whose_provider_token_cannot_be_unsealed_here_are_not_sold(shop, voucher):
    sealing.use_keys(None)  # the token was sealed with a key this shop does not hold
    before = written()
    answer = buy(shop, commerce.customer(), voucher.id, "yookassa")
    assert (answer.status_code, answer.json()["code"]) == (422, "goods_provider_not_configured"), answer.text
    assert written() == before
