"""SPEC 14.4, 13.13: My subscriptions shows phase, end, traffic used and link, and a QR code — to its customer only."""

import hashlib

import pytest

from bot import keyboards, qr, services
from bot.updates import APPLIED, REFUSED
from models.commerce import Customer, Subscription
from tests.support import sales
from tests.support.botruns import InProcessBot, row_counts
from tests.support.shop import fulfil, rub_plan

ANN = {"id": 901, "first_name": "Ann", "language_code": "en"}
EVE = {"id": 902, "first_name": "Eve", "language_code": "en"}


@pytest.fixture
def bot(database, telebot, fake_telegram, bot_services):
    bot = InProcessBot(telebot, fake_telegram)
    fake_telegram.send_message(ANN, "/start")
    fake_telegram.send_message(EVE, "/start")
    bot.drain()
    return bot


@pytest.fixture
def subscription(bot):
    buyer = Customer.get(Customer.telegram_id == ANN["id"])
    sales.paid_order(buyer, rub_plan())
    fulfil()
    return Subscription.get(Subscription.customer == buyer.id)


def shown(fake, user=ANN):
    return [message for message in fake.bot_messages(user["id"]) if message.get("reply_markup")][-1]


def test_my_subscriptions_shows_phase_end_traffic_and_the_link_with_a_qr_button(bot, fake_telegram, subscription):
    link = services.remote_user(subscription.remote_user_id).subscription_url
    fake_telegram.press(ANN, keyboards.data(keyboards.SUBSCRIPTIONS))
    assert bot.drain() == [APPLIED]
    message = shown(fake_telegram)
    first, second, third = message["text"].split("\n")
    assert first == "Your subscriptions:"
    assert second.startswith("1. Monthly: active, until ") and second.endswith("UTC; traffic used 0 B")
    assert third == f"   Link: {link}"
    qr_button = message["reply_markup"]["inline_keyboard"][0][0]
    assert qr_button == {"text": "QR code 1", "callback_data": keyboards.data(keyboards.QR_CODE, subscription.id)}

    fake_telegram.press(ANN, qr_button["callback_data"])
    assert bot.drain() == [APPLIED]
    (photo,) = fake_telegram.accepted("sendPhoto")
    assert photo["chat_id"] == ANN["id"] and photo["params"]["caption"].endswith(link)
    assert photo["sha256"] == hashlib.sha256(qr.png(link)).hexdigest()


def test_a_subscription_being_set_up_shows_its_phase_and_no_link_yet(bot, fake_telegram):
    buyer = Customer.get(Customer.telegram_id == ANN["id"])
    sales.paid_order(buyer, rub_plan())  # not fulfilled yet
    fake_telegram.press(ANN, keyboards.data(keyboards.SUBSCRIPTIONS))
    bot.drain()
    text = shown(fake_telegram)["text"]
    assert "1. Monthly: being set up, until " in text and "Link" not in text and "traffic used ?" in text


def test_another_customer_cannot_get_someone_elses_link(bot, fake_telegram, subscription):
    before = row_counts()
    fake_telegram.press(EVE, keyboards.data(keyboards.QR_CODE, subscription.id))
    assert bot.drain() == [REFUSED]
    assert row_counts() == before
    assert fake_telegram.accepted("sendPhoto") == []
    assert all("Link" not in (message["text"] or "") for message in fake_telegram.bot_messages(EVE["id"]))


def test_a_panel_that_does_not_answer_leaves_the_link_out_and_says_so(bot, fake_telegram, subscription, bot_services):
    bot_services.panel.set_faults(fail_rate=1.0)
    fake_telegram.press(ANN, keyboards.data(keyboards.SUBSCRIPTIONS))
    assert bot.drain() == [APPLIED]
    text = shown(fake_telegram)["text"]
    assert "traffic used ?" in text and "Link" not in text
    assert text.endswith("The link can't be shown right now. Please try again in a minute.")


def test_an_answer_that_fails_after_the_commit_is_logged_and_the_update_stays_applied(
    bot, fake_telegram, subscription, monkeypatch, caplog
):
    def broken(remote_user_id):
        raise RuntimeError("a bug")

    monkeypatch.setattr(services, "remote_user", broken)
    fake_telegram.press(ANN, keyboards.data(keyboards.QR_CODE, subscription.id))
    assert bot.drain() == [APPLIED]
    assert fake_telegram.accepted("sendPhoto") == []
    assert "an answer could not be made" in caplog.text
