"""SPEC 14.4, 14.5, 13.12 in the test process: Buy → plan → Stars, wallet, YooKassa, CryptoBot; pre-checkout; paying."""

import datetime
import threading

import pytest

from bot import keyboards
from bot.updates import APPLIED, DUPLICATE, REFUSED
from models.base import utcnow
from models.bot import BotCheckoutSession
from models.commerce import Customer, Order
from models.payments import PaymentIntent
from ops import maintenance
from tests.support import sales
from tests.support.botruns import InProcessBot, row_counts
from tests.support.processes import wait_for
from tests.support.shop import rub_plan

ANN = {"id": 601, "first_name": "Ann", "language_code": "en"}


@pytest.fixture
def bot(database, telebot, fake_telegram, bot_services, ledger_invariant):
    bot = InProcessBot(telebot, fake_telegram)
    fake_telegram.send_message(ANN, "/start")
    bot.drain()
    return bot


@pytest.fixture
def plan(database):
    return rub_plan()


def buttons(message):
    return [button for row in message["reply_markup"]["inline_keyboard"] for button in row]


def last(fake):
    return fake.bot_messages(ANN["id"])[-1]


def menu(fake):
    """The message with buttons the customer presses (edited in place as they go)."""
    return [message for message in fake.bot_messages(ANN["id"]) if message.get("reply_markup")][-1]


def customer():
    return Customer.get(Customer.telegram_id == ANN["id"])


def receipts(fake):
    said = [message["text"] or "" for message in fake.bot_messages(ANN["id"])]
    return [text for text in said if text.startswith(("Payment received", "Paid "))]


def deliver_notices(bot):
    """Two ticks of the customer-notice loop: what it sends, it sends once."""
    from bot.customer_notices import CustomerNoticeLoop

    loop = CustomerNoticeLoop(bot.telebot, threading.Event())
    loop.tick()
    loop.tick()


def choose(bot, fake, *presses):
    for data in presses:
        fake.press(ANN, data)
    return bot.drain()


def pay(plan, method, currency):
    return keyboards.data(keyboards.PAY, f"{plan.id}:{method}:{currency}")


def gift(plan, method, currency):
    return keyboards.data(keyboards.GIFT_PAY, f"{plan.id}:{method}:{currency}")


def test_buy_lists_the_plans_on_sale_with_their_prices_and_a_plan_its_ways_to_pay(bot, fake_telegram, plan, data_key):
    assert choose(bot, fake_telegram, keyboards.data(keyboards.BUY)) == [APPLIED]
    shown = menu(fake_telegram)
    assert shown["text"] == "Plans on sale. Choose one:"
    assert buttons(shown)[0] == {
        "text": "Monthly, 30 days: 199.00 RUB · 5.00 USD · 250 ⭐",
        "callback_data": keyboards.data(keyboards.PLAN, str(plan.id)),
    }
    assert choose(bot, fake_telegram, keyboards.data(keyboards.PLAN, str(plan.id))) == [APPLIED]
    shown = menu(fake_telegram)
    assert shown["text"] == "Monthly: how would you like to pay?"
    assert [button["callback_data"] for button in buttons(shown)] == [
        pay(plan, "stars", "XTR"),
        pay(plan, "wallet", "RUB"),
        pay(plan, "yookassa", "RUB"),
        pay(plan, "cryptobot", "USD"),
        keyboards.data(keyboards.GIFT, str(plan.id)),
        keyboards.data(keyboards.BUY),
    ]
    assert Order.select().count() == 0  # looking orders nothing


def test_a_plans_screen_opens_a_cart_that_its_pay_press_turns_into_the_order_or_retention_sweeps(
    bot, fake_telegram, plan
):
    from ops.retention import sweep_table

    fake_telegram.press(ANN, keyboards.data(keyboards.PLAN, str(plan.id)))
    fake_telegram.press(ANN, keyboards.data(keyboards.PLAN, str(plan.id)))
    bot.drain()
    assert [session.order_id for session in BotCheckoutSession.select()] == [None, None]
    assert choose(bot, fake_telegram, pay(plan, "stars", "XTR")) == [APPLIED]
    walked_away, paid = BotCheckoutSession.select().order_by(BotCheckoutSession.id)
    assert walked_away.order_id is None and paid.order_id == Order.get().id  # the newest cart became the order
    BotCheckoutSession.update(expires_at=utcnow() - datetime.timedelta(minutes=1)).execute()
    sweep_table("bot_checkout_sessions")
    assert [session.id for session in BotCheckoutSession.select()] == [paid.id]


def test_stars_sends_an_xtr_invoice_and_its_payment_settles_the_order_once(bot, fake_telegram, plan):
    assert choose(bot, fake_telegram, pay(plan, "stars", "XTR")) == [APPLIED]
    invoice = last(fake_telegram)
    assert invoice["kind"] == "invoice" and invoice["invoice"] == {
        "title": "Monthly", "description": f"Monthly, order {Order.get().id}", "start_parameter": "",
        "currency": "XTR", "total_amount": 250,
    }  # fmt: skip
    order = Order.get()
    assert (order.status, order.provider, order.amount_minor, order.currency) == ("pending", "stars", 250, "XTR")
    assert BotCheckoutSession.get().order_id == order.id

    query = fake_telegram.pay_invoice(ANN, invoice["message_id"])
    # One batch: the pre-checkout answer makes Telegram send the payment, which must wait
    # until its two replays are queued behind it.
    assert bot.apply_one_batch() == [APPLIED]
    assert fake_telegram.pre_checkout_answers()[query["pre_checkout_query"]["id"]]["ok"] is True
    wait_for(lambda: fake_telegram.waiting(bot.offset), 10, message="the successful payment")
    payment = fake_telegram._updates[-1]  # the service message Telegram sent after the charge
    fake_telegram.inject(payment)
    fake_telegram.inject(payment)
    assert bot.drain() == [APPLIED, DUPLICATE, DUPLICATE]
    order = Order.get_by_id(order.id)
    assert (order.status, order.settled_by) == ("paid", "stars")
    (intent,) = PaymentIntent.select()
    assert (intent.provider, intent.status, intent.amount_minor) == ("stars", "succeeded", 250)
    assert receipts(fake_telegram) == []  # not an answer sent after the commit: a notice written with it
    deliver_notices(bot)
    (receipt,) = receipts(fake_telegram)
    assert receipt.startswith("Payment received: 250 ⭐. Your access is being set up")


def test_the_same_charge_in_a_second_update_pays_nothing_twice(bot, fake_telegram, plan):
    choose(bot, fake_telegram, pay(plan, "stars", "XTR"))
    order = Order.get()
    for _ in range(2):
        fake_telegram.successful_payment(ANN, "XTR", 250, f"order:{order.id}", charge_id="stx-same-charge")
    assert bot.drain() == [APPLIED, APPLIED]
    assert PaymentIntent.select().count() == 1
    assert Order.get_by_id(order.id).status == "paid"
    deliver_notices(bot)
    assert len(receipts(fake_telegram)) == 1


@pytest.mark.parametrize(
    "why",
    ["changed_price", "wrong_currency", "wrong_currency_ru", "expired_order", "maintenance", "someone_elses_order"],
)
def test_pre_checkout_is_refused_with_a_reason_and_nothing_written(bot, fake_telegram, plan, why):
    choose(bot, fake_telegram, pay(plan, "stars", "XTR"))
    order = Order.get()
    amount, currency, user, expected = 250, "XTR", ANN, None
    if why == "changed_price":
        amount, expected = 200, "The price has changed."
    elif why == "wrong_currency":
        currency, expected = "USD", "This order is paid in Telegram Stars (XTR) only, not in USD."
    elif why == "wrong_currency_ru":
        Customer.update(language_code="ru").where(Customer.telegram_id == ANN["id"]).execute()
        currency, expected = "EUR", "Этот заказ оплачивается только в Telegram Stars (XTR), а не в EUR."
    elif why == "expired_order":
        Order.update(expires_at=utcnow() - datetime.timedelta(seconds=1)).where(Order.id == order.id).execute()
        expected = "This order has expired or was already paid."
    elif why == "maintenance":
        maintenance.set_mode(True, "upgrade", "test")
        expected = "The shop is closed for maintenance."
    else:
        user = {"id": 602, "first_name": "Eve", "language_code": "en"}
        fake_telegram.send_message(user, "/start")
        bot.drain()
        expected = "This payment can't be accepted."
    before = row_counts()
    query = fake_telegram.pre_checkout(user, currency, amount, f"order:{order.id}")
    assert bot.drain() == [REFUSED]
    assert row_counts() == before
    answer = fake_telegram.pre_checkout_answers()[query["pre_checkout_query"]["id"]]
    assert answer["ok"] is False and answer["error_message"].startswith(expected)


def test_the_wallet_refuses_a_balance_too_small_and_pays_from_one_that_covers_it(bot, fake_telegram, plan):
    before = row_counts()
    assert choose(bot, fake_telegram, pay(plan, "wallet", "RUB")) == [REFUSED]
    assert row_counts() == before
    assert last(fake_telegram)["text"] == "Your wallet balance is not enough for this purchase."
    assert [button["callback_data"] for button in buttons(last(fake_telegram))] == ["wallet", "menu"]  # a way on

    sales.topped_up(customer(), 50000, "RUB")
    fake_telegram.press(ANN, keyboards.data(keyboards.PLAN, str(plan.id)))
    bot.drain()
    assert buttons(menu(fake_telegram))[1]["text"] == "Wallet: 199.00 RUB (balance 500.00 RUB)"
    assert choose(bot, fake_telegram, pay(plan, "wallet", "RUB")) == [APPLIED]
    order = Order.get(Order.operation == "purchase")
    assert (order.status, order.settled_by, order.amount_minor) == ("paid", "wallet", 19900)
    assert receipts(fake_telegram) == []
    deliver_notices(bot)
    (receipt,) = receipts(fake_telegram)
    assert receipt.startswith("Paid 199.00 RUB from your wallet for Monthly.")


@pytest.mark.parametrize("method, currency", [("yookassa", "RUB"), ("cryptobot", "USD")])
def test_a_hosted_provider_gives_a_link_button_to_its_payment_page(bot, fake_telegram, plan, method, currency):
    assert choose(bot, fake_telegram, pay(plan, method, currency)) == [APPLIED]
    order = Order.get()
    (intent,) = PaymentIntent.select()
    assert (order.status, order.provider, intent.provider, intent.status) == ("pending", method, method, "pending")
    shown = last(fake_telegram)
    assert shown["text"].startswith(f"Order {order.id}: Monthly, ")
    assert buttons(shown)[0]["url"] == intent.confirmation_url and intent.confirmation_url.startswith("http")
    assert BotCheckoutSession.get().order_id == order.id


def test_every_purchase_step_is_refused_with_a_plain_message_in_maintenance(bot, fake_telegram, plan):
    sales.topped_up(customer(), 50000, "RUB")
    maintenance.set_mode(True, "upgrade", "test")
    before = row_counts()
    presses = [keyboards.data(keyboards.BUY), keyboards.data(keyboards.PLAN, str(plan.id))]
    presses += [pay(plan, method, currency) for method, currency in
                (("stars", "XTR"), ("wallet", "RUB"), ("yookassa", "RUB"), ("cryptobot", "USD"))]  # fmt: skip
    presses += [keyboards.data(keyboards.GIFT, str(plan.id)), gift(plan, "wallet", "RUB"), gift(plan, "stars", "XTR")]
    assert choose(bot, fake_telegram, *presses) == [REFUSED] * len(presses)
    assert row_counts() == before
    said = [message["text"] for message in fake_telegram.bot_messages(ANN["id"])[-len(presses) :]]
    assert said == ["The shop is closed for maintenance. Nothing can be bought right now; please try again later."] * 9


def test_a_blocked_customer_cannot_buy(bot, fake_telegram, plan):
    Customer.update(blocked=True).where(Customer.telegram_id == ANN["id"]).execute()
    before = row_counts()
    assert choose(bot, fake_telegram, keyboards.data(keyboards.BUY), pay(plan, "stars", "XTR")) == [REFUSED] * 2
    assert row_counts() == before


@pytest.mark.parametrize(
    "data",
    ["pay:999:stars:XTR", "pay:1:paypal:USD", "pay:1:stars:xtr", "plan:0", "qr:999", "gift:0", "gpay:1:gold:RUB",
     "gpay:999:wallet:RUB", "gift:1:x"],
)  # fmt: skip
def test_a_forged_purchase_button_is_refused_and_nothing_written(bot, fake_telegram, plan, data):
    before = row_counts()
    assert choose(bot, fake_telegram, data) == [REFUSED]
    assert row_counts() == before


# -- a gift card (SPEC 13.11) ------------------------------------------------------------------------


def test_a_plans_gift_screen_offers_its_ways_to_pay_for_a_card_and_leads_back_to_the_plan(
    bot, fake_telegram, plan, data_key
):
    assert choose(bot, fake_telegram, keyboards.data(keyboards.GIFT, str(plan.id))) == [APPLIED]
    shown = menu(fake_telegram)
    assert shown["text"].startswith("A gift card for Monthly: you get a code to pass on")
    assert [button["callback_data"] for button in buttons(shown)] == [
        gift(plan, "stars", "XTR"),
        gift(plan, "wallet", "RUB"),
        gift(plan, "yookassa", "RUB"),
        gift(plan, "cryptobot", "USD"),
        keyboards.data(keyboards.PLAN, str(plan.id)),
    ]
    assert Order.select().count() == 0


def test_a_gift_paid_from_the_wallet_sends_its_code_once_and_a_friend_activates_it(bot, fake_telegram, plan, data_key):
    from commerce.activations import activate_gift_card
    from models.catalogue import GiftCard
    from models.fulfillment import Entitlement
    from models.ops import CustomerNotice

    sales.topped_up(customer(), 50000, "RUB")
    assert choose(bot, fake_telegram, gift(plan, "wallet", "RUB")) == [APPLIED]
    order = Order.get(Order.operation == "gift")
    assert (order.status, order.settled_by, order.amount_minor) == ("fulfilled", "wallet", 19900)
    assert Entitlement.select().count() == 0  # the buyer gets the code, not the plan

    deliver_notices(bot)
    receipt, sent = fake_telegram.bot_messages(ANN["id"])[-2:]  # the receipt first, then the code
    assert receipt["text"] == "Paid 199.00 RUB from your wallet for a Monthly gift card. Its code follows in a moment."
    assert "gift card for Monthly:" in sent["text"]
    code = sent["text"].split(": ", 1)[1].split("\n", 1)[0]
    assert GiftCard.get().purchase_order_id == order.id and CustomerNotice.get().secret is None

    friend = sales.customer("Bob", "bob")
    assert Entitlement.get_by_id(activate_gift_card(friend.id, code).entitlement_id).plan_id == plan.id


def test_a_gift_paid_with_stars_says_its_code_follows(bot, fake_telegram, plan, data_key):
    from models.catalogue import GiftCard

    assert choose(bot, fake_telegram, gift(plan, "stars", "XTR")) == [APPLIED]
    order = Order.get()
    assert (order.operation, order.provider, order.amount_minor) == ("gift", "stars", 250)
    fake_telegram.successful_payment(ANN, "XTR", 250, f"order:{order.id}", charge_id="stx-gift-charge")
    assert bot.drain() == [APPLIED]
    deliver_notices(bot)
    assert receipts(fake_telegram) == ["Payment received: 250 ⭐. The code of your gift card follows in a moment."]
    assert Order.get_by_id(order.id).status == "fulfilled" and GiftCard.get().purchase_order_id == order.id


def test_a_gift_at_yookassa_gives_the_payment_page_of_a_gift_order(bot, fake_telegram, plan, data_key):
    assert choose(bot, fake_telegram, gift(plan, "yookassa", "RUB")) == [APPLIED]
    order = Order.get()
    (intent,) = PaymentIntent.select()
    assert (order.operation, order.status, intent.provider) == ("gift", "pending", "yookassa")
    assert buttons(last(fake_telegram))[0]["url"] == intent.confirmation_url


def test_without_a_data_key_no_gift_card_is_offered_or_sold(bot, fake_telegram, plan):
    """A bought card's code reaches its buyer sealed: a bot that cannot seal sells no card it could not deliver."""
    choose(bot, fake_telegram, keyboards.data(keyboards.PLAN, str(plan.id)))
    offered = [button["callback_data"] for button in buttons(menu(fake_telegram))]
    assert keyboards.data(keyboards.GIFT, str(plan.id)) not in offered
    before = row_counts()
    presses = [keyboards.data(keyboards.GIFT, str(plan.id)), gift(plan, "stars", "XTR"), gift(plan, "yookassa", "RUB")]
    assert choose(bot, fake_telegram, *presses) == [REFUSED] * 3
    assert row_counts() == before
    assert last(fake_telegram)["text"] == "Gift cards can't be bought right now. Please try again later."


# -- a plan the customer holds already: extend it, or a second subscription only when asked for --------------


def extend(plan, slot, method, currency):
    return keyboards.data(keyboards.EXTEND_PAY, f"{plan.id}:{slot}:{method}:{currency}")


def test_a_plan_the_customer_holds_is_extended_on_the_same_link_unless_a_new_subscription_is_asked_for(
    bot, fake_telegram, plan, bot_services
):
    from models.commerce import Subscription
    from models.fulfillment import Entitlement, FulfillmentOperation
    from tests.support.shop import fulfil

    sales.topped_up(customer(), 100000, "RUB")
    assert choose(bot, fake_telegram, pay(plan, "wallet", "RUB")) == [APPLIED]  # no subscription yet: no choice
    fulfil()
    (subscription,) = Subscription.select()
    (first,) = Entitlement.select()
    (user,) = bot_services.panel.users()

    assert choose(bot, fake_telegram, keyboards.data(keyboards.PLAN, str(plan.id))) == [APPLIED]
    shown = menu(fake_telegram)
    assert shown["text"] == (
        "You already have Monthly. Extend your subscription by 30 days (the same link, a later end), "
        "or buy a new subscription with a link of its own?"
    )
    assert [(button["text"], button["callback_data"]) for button in buttons(shown)] == [
        ("Extend my subscription", keyboards.data(keyboards.EXTEND, f"{plan.id}:{subscription.slot}")),
        ("New subscription", keyboards.data(keyboards.NEW, str(plan.id))),
        ("« Back", keyboards.data(keyboards.BUY)),
    ]
    assert choose(bot, fake_telegram, keyboards.data(keyboards.EXTEND, f"{plan.id}:{subscription.slot}")) == [APPLIED]
    shown = menu(fake_telegram)
    assert shown["text"].startswith("Monthly: 30 days more after ")
    assert buttons(shown)[1]["callback_data"] == extend(plan, subscription.slot, "wallet", "RUB")

    assert choose(bot, fake_telegram, extend(plan, subscription.slot, "wallet", "RUB")) == [APPLIED]
    extension = Order.get(Order.operation == "extension")
    assert (extension.status, extension.subscription_id, extension.amount_minor) == ("paid", subscription.id, 19900)
    (operation,) = FulfillmentOperation.select().where(FulfillmentOperation.correlation_id == f"order:{extension.id}")
    fulfil()
    assert Subscription.select().count() == 1  # no second subscription, so no second link
    extended = Entitlement.get_by_id(operation.entitlement_id)
    assert extended.subscription_id == subscription.id
    assert extended.ends_at == first.ends_at + datetime.timedelta(days=30)
    (after,) = bot_services.panel.users()
    assert (after["id"], after["subscriptionUrl"]) == (user["id"], user["subscriptionUrl"])
    assert after["expireAt"].startswith(extended.ends_at.isoformat(timespec="seconds"))
    assert Subscription.get_by_id(subscription.id).remote_user_id == subscription.remote_user_id

    assert choose(bot, fake_telegram, keyboards.data(keyboards.NEW, str(plan.id))) == [APPLIED]
    assert menu(fake_telegram)["text"] == "Monthly: how would you like to pay?"
    assert choose(bot, fake_telegram, pay(plan, "wallet", "RUB")) == [APPLIED]  # asked for: a second one
    assert Subscription.select().count() == 2


def test_an_extension_of_a_subscription_not_holding_the_plan_is_refused_and_nothing_written(bot, fake_telegram, plan):
    sales.topped_up(customer(), 100000, "RUB")
    before = row_counts()
    assert choose(bot, fake_telegram, keyboards.data(keyboards.EXTEND, f"{plan.id}:1")) == [REFUSED]
    assert choose(bot, fake_telegram, extend(plan, 1, "wallet", "RUB")) == [REFUSED]
    assert row_counts() == before


def test_an_extension_at_a_hosted_provider_gives_the_payment_page_of_an_extension_order(bot, fake_telegram, plan):
    from models.commerce import Subscription
    from tests.support.shop import fulfil

    sales.topped_up(customer(), 100000, "RUB")
    choose(bot, fake_telegram, pay(plan, "wallet", "RUB"))
    fulfil()
    (subscription,) = Subscription.select()
    assert choose(bot, fake_telegram, extend(plan, subscription.slot, "yookassa", "RUB")) == [APPLIED]
    order = Order.get(Order.operation == "extension")
    (intent,) = PaymentIntent.select()
    assert (order.status, order.subscription_id, intent.order_id) == ("pending", subscription.id, order.id)
    assert buttons(last(fake_telegram))[0]["url"] == intent.confirmation_url
