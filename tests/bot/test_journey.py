"""SPEC 14.4, 14.5 end to end with real processes: the bot (`python omniflow.py bot`) and the worker
(`huey_consumer omniflow.huey`) against the fake Bot API, the fake panel and the fake providers over HTTP.

A customer sends /start, presses Buy, a plan and a way to pay; the payment settles; the worker makes
the user on the panel; the bot sends the link and its QR code. And a Stars payment delivered three
times with the bot SIGKILLed right after applying it is settled once, by a bot that neither applies
it again nor skips what came after.
"""

import hashlib

import pytest

from bot import keyboards, qr
from integrations.remnawave import RemnawaveClient
from models.bot import BotUpdate
from models.commerce import Customer, Order, Subscription
from models.ledger import LedgerTransaction
from models.ops import CustomerNotice
from models.payments import PaymentIntent
from tests.support import sales
from tests.support.bots import TEST_LEASE_TTL_S
from tests.support.processes import wait_for
from tests.support.shop import PANEL_TOKEN, environ, rub_plan

pytestmark = pytest.mark.processes

ANN = {"id": 1101, "first_name": "Ann", "language_code": "en"}


def shop_env(shop):
    return {**environ(shop.yookassa, shop.cryptobot), "APP_REMNAWAVE_URL": shop.panel.base_url,
            "APP_REMNAWAVE_TOKEN": PANEL_TOKEN}  # fmt: skip


@pytest.fixture
def stack(database, shop, workers, bots, fake_telegram, ledger_invariant):
    """The bot and a worker, both on the shop's fakes; Ann has sent /start."""
    workers.start_huey_consumer(env=shop_env(shop))
    bot = bots.start(env=shop_env(shop))
    bots.wait_polling(bot)
    fake_telegram.send_message(ANN, "/start")
    wait_for(lambda: fake_telegram.bot_messages(ANN["id"]), 20, message="the welcome")
    return bot


def menu(fake):
    return [message for message in fake.bot_messages(ANN["id"]) if message.get("reply_markup")][-1]


def press(fake, data, shows):
    """Press a button of the menu message and wait until the chat shows `shows` (a predicate on the transcript)."""
    fake.press(ANN, data)
    return wait_for(lambda: shows(fake.bot_messages(ANN["id"])), 20, message=f"the answer to {data}")


def said(beginning):
    """A predicate on the transcript: some message begins with `beginning`."""
    return lambda shown: any((message["text"] or "").startswith(beginning) for message in shown)


def choose_plan(fake, plan):
    press(fake, keyboards.data(keyboards.BUY), lambda shown: menu(fake)["text"].startswith("Plans on sale"))
    press(fake, keyboards.data(keyboards.PLAN, str(plan.id)), lambda shown: "how would you like" in menu(fake)["text"])


def pay(plan, method, currency):
    return keyboards.data(keyboards.PAY, f"{plan.id}:{method}:{currency}")


def the_link(shop):
    subscription = Subscription.get(Subscription.customer == Customer.get(Customer.telegram_id == ANN["id"]).id)
    remote = RemnawaveClient(shop.panel.base_url, PANEL_TOKEN).get_user(int(subscription.remote_user_id))
    return remote.subscription_url


def assert_access_ready_sent_once(fake, shop):
    photo = wait_for(lambda: fake.accepted("sendPhoto"), 60, message="the access-ready message")[0]
    link = the_link(shop)
    assert photo["chat_id"] == ANN["id"]
    assert photo["params"]["caption"].startswith("Your access is ready: Monthly until ")
    assert photo["params"]["caption"].endswith(link)
    assert photo["sha256"] == hashlib.sha256(qr.png(link)).hexdigest()
    assert len(shop.panel.stats()["creates_applied"]) == 1
    wait_for(lambda: Order.get(Order.operation == "purchase").status == "fulfilled", 10, message="fulfilled")
    assert len(fake.accepted("sendPhoto")) == 1


def test_a_customer_buys_with_stars_and_gets_the_link_and_qr_code(stack, fake_telegram, shop):
    plan = rub_plan()
    choose_plan(fake_telegram, plan)
    press(fake_telegram, pay(plan, "stars", "XTR"), lambda shown: shown[-1]["kind"] == "invoice")
    invoice = fake_telegram.bot_messages(ANN["id"])[-1]
    query = fake_telegram.pay_invoice(ANN, invoice["message_id"])  # pre-checkout, then the payment if ok
    wait_for(lambda: fake_telegram.pre_checkout_answers().get(query["pre_checkout_query"]["id"]), 10,
             message="the pre-checkout answer")  # fmt: skip
    assert fake_telegram.pre_checkout_answers()[query["pre_checkout_query"]["id"]]["ok"] is True
    assert_access_ready_sent_once(fake_telegram, shop)
    order = Order.get(Order.operation == "purchase")
    assert (order.settled_by, order.amount_minor, order.currency) == ("stars", 250, "XTR")
    assert any(message["text"].startswith("Payment received: 250 ⭐") for message in
               fake_telegram.bot_messages(ANN["id"]) if message["text"])  # fmt: skip


def test_a_customer_buys_from_the_wallet_and_gets_the_link_and_qr_code(stack, fake_telegram, shop):
    plan = rub_plan()
    sales.topped_up(Customer.get(Customer.telegram_id == ANN["id"]), 50000, "RUB")
    choose_plan(fake_telegram, plan)
    press(fake_telegram, pay(plan, "wallet", "RUB"), said("Paid 199.00"))  # the receipt: the settlement's notice
    assert_access_ready_sent_once(fake_telegram, shop)
    assert Order.get(Order.operation == "purchase").settled_by == "wallet"


def test_a_customer_pays_on_the_yookassa_page_and_gets_the_link_and_qr_code(stack, fake_telegram, shop):
    plan = rub_plan()
    choose_plan(fake_telegram, plan)
    press(fake_telegram, pay(plan, "yookassa", "RUB"), lambda shown: (shown[-1]["text"] or "").startswith("Order "))
    link_button = fake_telegram.bot_messages(ANN["id"])[-1]["reply_markup"]["inline_keyboard"][0][0]
    intent = PaymentIntent.get()
    assert link_button["url"] == intent.confirmation_url
    shop.yookassa.succeed(intent.provider_payment_id)  # the payer paid; YooKassa's webhook reaches web
    assert_access_ready_sent_once(fake_telegram, shop)
    assert Order.get(Order.operation == "purchase").settled_by == "provider_webhook"


def test_a_stars_payment_delivered_three_times_with_the_bot_killed_after_applying_it_settles_once(
    database, shop, workers, bots, fake_telegram, ledger_invariant
):
    from commerce.checkout import checkout

    plan = rub_plan()
    ann = Customer.create(display_name="Ann", telegram_id=ANN["id"], language_code="en")
    order = Order.get_by_id(checkout({}, "", ann.id, "purchase", "stars", "XTR", plan_id=plan.id).order_id)
    # The three copies come in the bot's first poll; every later poll fails, so the offset never
    # moves past them: the bot dies after its commit and before the payment is confirmed.
    payment = fake_telegram.successful_payment(ANN, "XTR", 250, f"order:{order.id}", charge_id="stx-journey-1")
    fake_telegram.inject(payment)
    fake_telegram.inject(payment)
    fake_telegram.set_fault("getUpdates", "5xx", after=1)
    first = bots.start(env=shop_env(shop))
    bots.wait_polling(first)
    # Killed once the receipt is marked sent: a kill between Telegram's acceptance and that mark
    # sends the receipt again (customer notices are at least once, bot/customer_notices.py).
    wait_for(lambda: BotUpdate.get_or_none(BotUpdate.update_id == payment["update_id"]) and receipt_marked_sent(),
             20, message="applied and its receipt sent")  # fmt: skip
    first.kill()
    first.wait()
    fake_telegram.clear_faults()
    assert Order.get_by_id(order.id).status == "paid"
    assert fake_telegram.waiting() == 3  # never confirmed: Telegram delivers it again

    workers.start_huey_consumer(env=shop_env(shop))
    restarted = bots.start(env=shop_env(shop))
    bots.wait_polling(restarted, timeout=TEST_LEASE_TTL_S + 20)
    later = fake_telegram.send_message(ANN, "/start")
    wait_for(lambda: BotUpdate.get_or_none(BotUpdate.update_id == later["update_id"]), 20, message="the next update")
    assert_access_ready_sent_once(fake_telegram, shop)
    assert PaymentIntent.select().count() == 1
    assert LedgerTransaction.select().count() == 1  # one sale booked
    assert len(received(fake_telegram)) == 1  # the replays were never applied, so never answered
    assert fake_telegram.delivered(payment["update_id"]) >= 2 * 3  # both bots were given all three copies


def receipt_marked_sent():
    sent = CustomerNotice.select().where(CustomerNotice.kind == "payment_received", CustomerNotice.status == "sent")
    return sent.exists()


def received(fake):
    return [m for m in fake.bot_messages(ANN["id"]) if (m["text"] or "").startswith("Payment received")]
