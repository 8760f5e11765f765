"""SPEC 3, 14.4, 15.4 in the test process: Shop → goods → the wallet or Stars; the paid goods are delivered
once by the fake goods provider and the customer gets the code in the chat; and the Shop on the fake Telegram
chat page, against a real bot process (a screenshot goes to tests/artifacts/)."""

import pytest

from bot import keyboards
from bot.updates import APPLIED, REFUSED
from fakes.goods import FakeGoodsProvider
from goods import delivery
from goods.delivery import goods_delivery
from models.commerce import Order
from models.goods import GoodsDelivery
from tests.bot.test_buy import ANN, buttons, choose, customer, deliver_notices, last, menu
from tests.support import sales
from tests.support.botruns import InProcessBot, row_counts
from tests.support.goods import TOKEN, product
from tests.web.test_browser import ARTIFACTS, browser  # noqa: F401  (the Chromium fixture)


@pytest.fixture
def bot(database, telebot, fake_telegram, bot_services, ledger_invariant, data_key):
    bot = InProcessBot(telebot, fake_telegram)
    fake_telegram.send_message(ANN, "/start")
    bot.drain()
    return bot


@pytest.fixture(scope="module")
def goods_provider():
    fake = FakeGoodsProvider(token=TOKEN, seed=9).start()
    yield fake
    fake.stop()


@pytest.fixture
def voucher(bot, goods_provider):
    goods_provider.reset()
    return product(goods_provider.base_url, prices={"RUB": 1000, "XTR": 50})


def goods_pay(goods, method, currency):
    return keyboards.data(keyboards.GOODS_PAY, f"{goods.id}:{method}:{currency}")


def test_the_shop_lists_goods_on_sale_with_their_prices_and_their_ways_to_pay(bot, fake_telegram, voucher):
    assert keyboards.data(keyboards.SHOP) in [button["callback_data"] for button in buttons(menu(fake_telegram))]
    assert choose(bot, fake_telegram, keyboards.data(keyboards.SHOP)) == [APPLIED]
    shown = menu(fake_telegram)
    assert shown["text"] == "Digital goods on sale. Choose one:"
    assert buttons(shown)[0] == {
        "text": "Voucher 10: 10.00 RUB · 50 ⭐",
        "callback_data": keyboards.data(keyboards.GOODS, str(voucher.id)),
    }
    assert choose(bot, fake_telegram, keyboards.data(keyboards.GOODS, str(voucher.id))) == [APPLIED]
    assert [button["callback_data"] for button in buttons(menu(fake_telegram))] == [
        goods_pay(voucher, "stars", "XTR"),
        goods_pay(voucher, "wallet", "RUB"),
        keyboards.data(keyboards.SHOP),
    ]
    voucher.active = False
    voucher.save()
    assert choose(bot, fake_telegram, keyboards.data(keyboards.SHOP)) == [APPLIED]
    assert menu(fake_telegram)["text"] == "No goods are on sale right now. Please look again later."
    assert Order.select().count() == 0


def test_goods_bought_from_the_wallet_in_the_bot_are_delivered_once_and_the_code_reaches_the_chat(
    bot, fake_telegram, voucher, goods_provider
):
    before = row_counts()
    assert choose(bot, fake_telegram, goods_pay(voucher, "wallet", "RUB")) == [REFUSED]  # an empty wallet
    assert row_counts() == before
    assert last(fake_telegram)["text"] == "Your wallet balance is not enough for this purchase."

    sales.topped_up(customer(), 1500, "RUB")
    assert choose(bot, fake_telegram, goods_pay(voucher, "wallet", "RUB")) == [APPLIED]
    order = Order.get(Order.operation == "goods")
    assert (order.status, order.settled_by, order.amount_minor) == ("paid", "wallet", 1000)
    assert GoodsDelivery.select().where(GoodsDelivery.order == order.id).count() == 1
    assert goods_delivery(order.id) == "delivered"
    assert goods_provider.stats()["submissions"] == {delivery.reference(order.id): 1}
    deliver_notices(bot)
    (bought,) = goods_provider.orders()
    receipt, sent = [message["text"] for message in fake_telegram.bot_messages(ANN["id"])][-2:]
    assert receipt == "Paid 10.00 RUB from your wallet for Voucher 10. Its code follows in a moment."
    assert bought["payload"]["code"] in sent


def test_goods_bought_with_stars_get_an_invoice_in_stars_naming_them(bot, fake_telegram, voucher):
    assert choose(bot, fake_telegram, goods_pay(voucher, "stars", "XTR")) == [APPLIED]
    invoice = last(fake_telegram)
    assert invoice["kind"] == "invoice"
    assert (invoice["invoice"]["title"], invoice["invoice"]["total_amount"]) == ("Voucher 10", 50)
    order = Order.get()
    fake_telegram.successful_payment(ANN, "XTR", 50, f"order:{order.id}", charge_id="stx-goods")
    assert bot.drain() == [APPLIED]
    assert (Order.get_by_id(order.id).status, GoodsDelivery.get().order_id) == ("paid", order.id)


@pytest.mark.processes
@pytest.mark.parametrize("backend", ["sqlite"])  # the page and the bot, not the database, are under test here
def test_a_person_sees_the_goods_on_sale_in_the_shop_on_the_chat_page(
    bots,
    fake_telegram,
    browser,  # noqa: F811  (the Chromium fixture imported above)
    database,
    data_key,
    goods_provider,
):
    product(goods_provider.base_url, prices={"RUB": 1000, "XTR": 50})
    bot = bots.start(env={"APP_DATA_ENCRYPTION_KEY": data_key})  # the provider's token opens in the bot
    bots.wait_polling(bot)
    page = browser.new_page(viewport={"width": 800, "height": 700})
    page.goto(fake_telegram.chat_url)
    page.fill("#user-id", "3005")
    page.select_option("#user-lang", "en")
    page.fill("#user-name", "Ann")
    page.fill("#text", "/start")
    page.click("button[type=submit]")
    page.click("text=🛍 Shop", timeout=20000)
    page.wait_for_selector("text=Voucher 10: 10.00 RUB · 50 ⭐", timeout=10000)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "goodsbuy-bot-shop.png"), full_page=True)
    page.click("text=Voucher 10: 10.00 RUB · 50 ⭐")
    page.wait_for_selector("text=Telegram Stars: 50 ⭐", timeout=10000)
