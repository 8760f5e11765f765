"""SPEC 6, 14.6: with APP_TELEGRAM_REQUIRED_CHANNEL set, only the channel's members may buy (getChatMember, a member
remembered 10 minutes, a refusal never); unset, nothing is checked."""

import dataclasses

import pytest

from bot import keyboards, membership
from bot.updates import APPLIED, REFUSED
from config.settings import load_settings
from tests.support.botruns import InProcessBot, row_counts
from tests.support.shop import rub_plan

ANN = {"id": 611, "first_name": "Ann", "language_code": "en"}
CHANNEL = "@omniflow_news"


def bot_with(telebot, fake, channel):
    settings = dataclasses.replace(load_settings(environ={}), telegram_required_channel=channel)
    bot = InProcessBot(telebot, fake, settings=settings)
    fake.send_message(ANN, "/start")
    bot.drain()
    return bot


@pytest.fixture
def plan(database):
    return rub_plan()


def press_buy(bot, fake):
    fake.press(ANN, keyboards.data(keyboards.BUY))
    return bot.drain()


def checks(fake):
    return fake.stats()["calls"].get("getChatMember", 0)


def test_someone_not_in_the_channel_is_refused_plainly_and_nothing_is_written(
    database, telebot, fake_telegram, bot_services, plan
):
    bot = bot_with(telebot, fake_telegram, CHANNEL)
    before = row_counts()
    assert press_buy(bot, fake_telegram) == [REFUSED]
    assert fake_telegram.bot_messages(ANN["id"])[-1]["text"] == (
        "Purchases are open to members of our channel @omniflow_news. Join it, then press Buy again."
    )
    assert row_counts() == before

    fake_telegram.set_member(CHANNEL, ANN["id"], "member")  # joined: may buy at once, no refusal remembered
    assert press_buy(bot, fake_telegram) == [APPLIED]
    assert "Plans on sale. Choose one:" in [message["text"] for message in fake_telegram.bot_messages(ANN["id"])]


def test_a_member_is_checked_once_per_10_minutes(database, telebot, fake_telegram, bot_services, plan, monkeypatch):
    bot = bot_with(telebot, fake_telegram, CHANNEL)
    fake_telegram.set_member(CHANNEL, ANN["id"], "administrator")
    now = [1000.0]
    monkeypatch.setattr(membership.current(), "clock", lambda: now[0])
    assert press_buy(bot, fake_telegram) == [APPLIED]
    assert press_buy(bot, fake_telegram) == [APPLIED]
    assert checks(fake_telegram) == 1
    fake_telegram.set_member(CHANNEL, ANN["id"], "left")
    now[0] += membership.RECHECK_S + 1
    assert press_buy(bot, fake_telegram) == [REFUSED]
    assert checks(fake_telegram) == 2


def test_a_check_telegram_cannot_answer_lets_the_purchase_through(database, telebot, fake_telegram, bot_services, plan):
    bot = bot_with(telebot, fake_telegram, CHANNEL)
    fake_telegram.set_fault("getChatMember", "5xx", count=1)
    assert press_buy(bot, fake_telegram) == [APPLIED]


def test_without_a_required_channel_nothing_is_checked(database, telebot, fake_telegram, bot_services, plan):
    bot = bot_with(telebot, fake_telegram, "")
    assert press_buy(bot, fake_telegram) == [APPLIED]
    assert checks(fake_telegram) == 0
