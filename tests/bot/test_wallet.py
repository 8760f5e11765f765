"""SPEC 14.4, 13.3: the bot's Wallet (balances, latest movements, top-ups through the fake providers)
and the auto-renew switch of My subscriptions — to its own customer only."""

import threading

import pytest

from bot import keyboards
from bot.customer_notices import CustomerNoticeLoop
from bot.updates import APPLIED, REFUSED
from commerce import ledger
from commerce.orders import create_order
from commerce.payments import REPLAYED, poll_intent
from commerce.settlement import settle_order
from models.commerce import Customer, Order, Subscription
from models.ledger import LedgerTransaction
from models.payments import PaymentIntent
from ops import maintenance
from tests.support import sales
from tests.support.botruns import InProcessBot, row_counts
from tests.support.processes import wait_for
from tests.support.shop import due_deliveries, fulfil, rub_plan, settle_deliveries

ANN = {"id": 951, "first_name": "Ann", "language_code": "en"}
EVE = {"id": 952, "first_name": "Eve", "language_code": "en"}
RU = {"id": 953, "first_name": "Ира", "language_code": "ru"}


@pytest.fixture
def bot(database, telebot, fake_telegram, bot_services, ledger_invariant):
    bot = InProcessBot(telebot, fake_telegram)
    for user in (ANN, EVE, RU):
        fake_telegram.send_message(user, "/start")
    bot.drain()
    return bot


def customer(user=ANN):
    return Customer.get(Customer.telegram_id == user["id"])


def shown(fake, user=ANN):
    return [message for message in fake.bot_messages(user["id"]) if message.get("reply_markup")][-1]


def buttons(message):
    return [button for row in message["reply_markup"]["inline_keyboard"] for button in row]


def press(bot, fake, data, user=ANN):
    fake.press(user, data)
    return bot.drain()


def topup(method, currency, amount):
    return keyboards.data(keyboards.TOPUP, f"{method}:{currency}:{amount}")


def test_the_main_menu_has_a_wallet_button(bot, fake_telegram):
    assert {"text": "Wallet", "callback_data": "wallet"} in buttons(shown(fake_telegram))


def test_an_empty_wallet_offers_the_top_ups_of_every_provider_the_shop_offers(bot, fake_telegram):
    assert press(bot, fake_telegram, keyboards.data(keyboards.WALLET)) == [APPLIED]
    screen = shown(fake_telegram)
    assert screen["text"].split("\n") == [
        "Your wallet", "Your wallet is empty.", "", "Top it up with one of the buttons below."
    ]  # fmt: skip
    assert [button["text"] for button in buttons(screen)] == [
        "Top up 300.00 RUB (card)", "Top up 500.00 RUB (card)", "Top up 1000.00 RUB (card)",
        "Top up 5.00 USD (CryptoBot)", "Top up 10.00 USD (CryptoBot)", "Top up 20.00 USD (CryptoBot)", "« Back",
    ]  # fmt: skip
    assert buttons(screen)[0]["callback_data"] == topup("yookassa", "RUB", 30000)


def test_the_wallet_shows_each_balance_and_the_latest_movements_signed(bot, fake_telegram):
    sales.topped_up(customer(), 50000, "RUB")
    sales.topped_up(customer(), 700, "USD", provider="cryptobot")
    settle_order(create_order(customer().id, "purchase", "RUB", plan_id=rub_plan().id).id, "wallet")
    press(bot, fake_telegram, keyboards.data(keyboards.WALLET))
    lines = shown(fake_telegram)["text"].split("\n")
    assert lines[:3] == ["Your wallet", "Balance: 301.00 RUB", "Balance: 7.00 USD"]
    assert lines[4] == "Latest movements:"
    movements = lines[5:8]
    assert movements[0].endswith("UTC  −199.00 RUB  purchase")
    assert movements[1].endswith("UTC  +7.00 USD  top-up")
    assert movements[2].endswith("UTC  +500.00 RUB  top-up")


def test_the_wallet_speaks_russian_to_a_russian_customer(bot, fake_telegram):
    press(bot, fake_telegram, keyboards.data(keyboards.WALLET), user=RU)
    screen = shown(fake_telegram, RU)
    assert screen["text"].startswith("Ваш кошелёк\nКошелёк пуст.")
    assert buttons(screen)[0]["text"] == "Пополнить на 300.00 RUB (картой)"


def test_a_top_up_makes_a_payment_at_the_provider_whose_success_credits_the_wallet_once(bot, fake_telegram, shop):
    assert press(bot, fake_telegram, topup("yookassa", "RUB", 50000)) == [APPLIED]
    order = Order.get(Order.operation == "topup")
    assert (order.status, order.provider, order.amount_minor, order.currency) == ("pending", "yookassa", 50000, "RUB")
    (intent,) = PaymentIntent.select()
    link = fake_telegram.bot_messages(ANN["id"])[-1]
    assert link["text"] == f"Top-up {order.id}: 500.00 RUB. Pay on the page the button opens; " \
        "we will message you as soon as the money arrives."  # fmt: skip
    assert buttons(link)[0]["url"] == intent.confirmation_url

    shop.yookassa.succeed(intent.provider_payment_id)  # the fake notifies the shop's web process
    wait_for(lambda: due_deliveries().exists(), 15, message="the webhook stored with its job")
    assert settle_deliveries() == ["settled"]
    assert Order.get_by_id(order.id).settled_by == "provider_webhook"
    assert poll_intent(PaymentIntent.get_by_id(intent.id), shop.providers).outcome == REPLAYED  # nothing more
    assert ledger.balance(customer().id, "RUB") == 50000
    assert LedgerTransaction.select().where(LedgerTransaction.kind == "topup").count() == 1

    # The bot said it would tell them when the money arrived: the settlement's notice, delivered once.
    loop = CustomerNoticeLoop(bot.telebot, threading.Event())
    loop.tick()
    loop.tick()
    told = [m["text"] for m in fake_telegram.bot_messages(ANN["id"]) if m["text"].startswith("Your wallet was topped")]
    assert told == ["Your wallet was topped up with 500.00 RUB. Balance: 500.00 RUB."]


@pytest.mark.parametrize(
    "data",
    [
        topup("yookassa", "RUB", 12345),  # an amount not offered
        topup("yookassa", "USD", 500),  # a currency the method's button never names
        topup("cryptobot", "RUB", 30000),
        "topup:paypal:USD:500",
        "topup:yookassa:RUB:0",
        "wallet:x",
    ],
)
def test_a_forged_top_up_button_is_refused_and_nothing_written(bot, fake_telegram, data):
    before = row_counts()
    assert press(bot, fake_telegram, data) == [REFUSED]
    assert row_counts() == before


def test_a_top_up_is_refused_with_a_plain_message_in_maintenance(bot, fake_telegram):
    maintenance.set_mode(True, "upgrade", "test")
    before = row_counts()
    assert press(bot, fake_telegram, topup("cryptobot", "USD", 1000)) == [REFUSED]
    assert row_counts() == before
    assert fake_telegram.bot_messages(ANN["id"])[-1]["text"].startswith("The shop is closed for maintenance.")


@pytest.fixture
def subscription(bot):
    sales.paid_order(customer(), rub_plan())
    fulfil()
    return Subscription.get(Subscription.customer == customer().id)


def test_my_subscriptions_switches_auto_renew_on_and_off(bot, fake_telegram, subscription):
    press(bot, fake_telegram, keyboards.data(keyboards.SUBSCRIPTIONS))
    switch = buttons(shown(fake_telegram))[1]
    assert switch == {"text": "Auto-renew 1: off (turn on)", "callback_data": f"renew:{subscription.id}:on"}

    assert press(bot, fake_telegram, switch["callback_data"]) == [APPLIED]
    assert Subscription.get_by_id(subscription.id).auto_renew is True
    screen = shown(fake_telegram)
    assert screen["text"].startswith("Auto-renew is on for Monthly: the wallet pays for the next period")
    assert buttons(screen)[1] == {
        "text": "Auto-renew 1: on (turn off)", "callback_data": f"renew:{subscription.id}:off"
    }  # fmt: skip

    assert press(bot, fake_telegram, f"renew:{subscription.id}:off") == [APPLIED]
    assert Subscription.get_by_id(subscription.id).auto_renew is False
    assert shown(fake_telegram)["text"].startswith("Auto-renew is off for Monthly.")


def test_another_customer_cannot_switch_someone_elses_auto_renew(bot, fake_telegram, subscription):
    before = row_counts()
    assert press(bot, fake_telegram, f"renew:{subscription.id}:on", user=EVE) == [REFUSED]
    assert row_counts() == before
    assert Subscription.get_by_id(subscription.id).auto_renew is False
