"""SPEC 13.11, 14.4: a gift card, an access code and the trial activated from the bot — each a free order settled
once; a refused one gets a plain answer and nothing is written."""

import datetime

import pytest

from bot import keyboards
from bot.updates import APPLIED, REFUSED
from commerce import codes
from models.base import utcnow
from models.catalogue import AccessCode, GiftCard, TrialActivation
from models.commerce import Customer, Order, Plan
from models.fulfillment import Entitlement, FulfillmentOperation
from tests.support import commerce as samples
from tests.support.botruns import InProcessBot, row_counts
from tests.support.shop import rub_plan

ANN = {"id": 621, "first_name": "Ann", "language_code": "en"}
BOB = {"id": 622, "first_name": "Bob", "language_code": "en"}
DAYS = datetime.timedelta(days=1)


@pytest.fixture(autouse=True)
def no_wrong_codes(monkeypatch):
    from bot.handlers import codes as handler

    monkeypatch.setattr(handler, "wrong_codes", handler.WrongCodes())
    return handler


@pytest.fixture
def bot(database, telebot, fake_telegram, ledger_invariant):
    bot = InProcessBot(telebot, fake_telegram)
    for user in (ANN, BOB):
        fake_telegram.send_message(user, "/start")
    bot.drain()
    return bot


@pytest.fixture
def plan(database):
    return rub_plan()


def said(fake, user=ANN):
    return fake.bot_messages(user["id"])[-1]["text"]


def orders_of(user, operation):
    customer = Customer.get(Customer.telegram_id == user["id"])
    return list(Order.select().where(Order.customer == customer.id, Order.operation == operation))


def test_a_gift_card_is_redeemed_once_into_a_period_being_set_up(bot, fake_telegram, plan):
    card, code = codes.issue_gift_card(plan, utcnow() + 30 * DAYS)
    fake_telegram.send_message(ANN, f"/code {code.lower()}")
    assert bot.drain() == [APPLIED]
    [order] = orders_of(ANN, "gift")
    assert (order.status, order.amount_minor, order.settled_by) == ("paid", 0, "gift")
    entitlement = Entitlement.get(Entitlement.order == order.id)
    ends = f"{entitlement.ends_at:%Y-%m-%d %H:%M}"
    assert said(fake_telegram).startswith(f"Code accepted: {plan.name}, until {ends} UTC.")
    assert FulfillmentOperation.get(FulfillmentOperation.entitlement == entitlement.id).idempotency_key == (
        f"gift:{order.id}:fulfill"
    )
    card = GiftCard.get_by_id(card.id)
    assert (card.status, card.redemption_order_id) == ("redeemed", order.id)

    before = row_counts()
    fake_telegram.send_message(BOB, f"/code {code}")
    assert bot.drain() == [REFUSED]
    assert said(fake_telegram, BOB) == "That code has been used up."
    assert row_counts() == before


def test_an_access_code_activates_once_per_customer_and_never_past_its_limit(bot, fake_telegram, plan):
    row, code = codes.issue_access_code(plan, max_activations=1)
    fake_telegram.send_message(ANN, f"/code {code}")
    assert bot.drain() == [APPLIED]
    assert len(orders_of(ANN, "code")) == 1
    before = row_counts()
    fake_telegram.send_message(ANN, f"/code {code}")
    fake_telegram.send_message(BOB, f"/code {code}")
    assert bot.drain() == [REFUSED, REFUSED]
    assert said(fake_telegram) == "You have activated this code already."
    assert said(fake_telegram, BOB) == "That code has been used up."
    assert row_counts() == before
    assert AccessCode.get_by_id(row.id).activation_count == 1


def test_the_menu_waits_for_a_code_a_wrong_one_is_refused_and_the_right_one_taken(bot, fake_telegram, plan):
    _, code = codes.issue_access_code(plan, max_activations=5)
    fake_telegram.press(ANN, keyboards.data(keyboards.CODE))
    assert bot.drain() == [APPLIED]
    assert said(fake_telegram).startswith("Send the code of your gift card")
    before = row_counts()
    fake_telegram.send_message(ANN, "NOPE-NOPE-NOPE")
    assert bot.drain() == [REFUSED]
    assert said(fake_telegram) == "That code is not valid. Check it and send it again, or /cancel."
    assert "NOPE" not in said(fake_telegram)
    assert row_counts() == before
    fake_telegram.send_message(ANN, code)
    assert bot.drain() == [APPLIED]
    assert len(orders_of(ANN, "code")) == 1
    fake_telegram.send_message(ANN, "anything")  # no longer waiting for a code
    assert bot.drain() == [REFUSED]
    assert len(orders_of(ANN, "code")) == 1


@pytest.mark.parametrize("language", ["en", "ru"])
def test_the_trial_says_when_it_ends_not_a_length_its_name_may_already_say(bot, fake_telegram, language):
    """A plan named "Trial, 3 days" is announced with its end, never as "Trial, 3 days, 3 days"."""
    trial = samples.priced_plan("trial", prices={"RUB": 0}, trial=True, days=3)
    Plan.update(name="Trial, 3 days").where(Plan.id == trial.id).execute()
    Customer.update(language_code=language).where(Customer.telegram_id == ANN["id"]).execute()
    fake_telegram.press(ANN, keyboards.data(keyboards.TRIAL))
    assert bot.drain() == [APPLIED]
    ends = f"{Entitlement.get().ends_at:%Y-%m-%d %H:%M}"
    expected = {"en": f"Your free trial is on: Trial, 3 days, until {ends} UTC. Your access is being set up",
                "ru": f"Пробный период включён: «Trial, 3 days», до {ends} UTC. Доступ подключается"}  # fmt: skip
    assert said(fake_telegram).startswith(expected[language])
    assert "3 days, 3" not in said(fake_telegram) and "3 дня" not in said(fake_telegram)


def test_an_expired_gift_card_is_refused(bot, fake_telegram, plan):
    _, code = codes.issue_gift_card(plan, utcnow() - DAYS)
    before = row_counts()
    fake_telegram.send_message(ANN, f"/code {code}")
    assert bot.drain() == [REFUSED]
    assert said(fake_telegram) == "That code has expired."
    assert row_counts() == before


def test_the_trial_is_taken_once_per_customer(bot, fake_telegram):
    samples.priced_plan("trial", prices={"RUB": 0}, trial=True, days=3)
    fake_telegram.press(ANN, keyboards.data(keyboards.TRIAL))
    assert bot.drain() == [APPLIED]
    [order] = orders_of(ANN, "trial")
    assert (order.status, order.amount_minor, order.settled_by) == ("paid", 0, "trial")
    assert TrialActivation.select().count() == 1
    before = row_counts()
    fake_telegram.press(ANN, keyboards.data(keyboards.TRIAL))
    assert bot.drain() == [REFUSED]
    assert fake_telegram.callback_answers()
    assert row_counts() == before


def test_without_a_trial_plan_the_trial_is_refused_plainly(bot, fake_telegram, plan):
    before = row_counts()
    fake_telegram.press(ANN, keyboards.data(keyboards.TRIAL))
    assert bot.drain() == [REFUSED]
    assert "There is no free trial at the moment." in [a["text"] for a in fake_telegram.callback_answers().values()]
    assert row_counts() == before


@pytest.mark.parametrize("data", ["code:1", "trial:x", "code:" + "A" * 59])
def test_a_forged_code_or_trial_press_is_refused_and_nothing_is_written(bot, fake_telegram, data):
    before = row_counts()
    fake_telegram.press(ANN, data)
    assert bot.drain() == [REFUSED]
    assert row_counts() == before


def test_five_wrong_codes_and_even_the_right_one_is_refused_for_ten_minutes(bot, fake_telegram, plan, no_wrong_codes):
    now = [1000.0]
    no_wrong_codes.wrong_codes.clock = lambda: now[0]
    _, code = codes.issue_access_code(plan, max_activations=5)
    for attempt in range(5):
        fake_telegram.send_message(ANN, f"/code WRONG-{attempt}-CODE")
    assert bot.drain() == [REFUSED] * 5
    fake_telegram.send_message(ANN, f"/code {code}")
    assert bot.drain() == [REFUSED]
    assert said(fake_telegram) == "Too many wrong codes. Please try again in ten minutes."
    assert orders_of(ANN, "code") == []
    fake_telegram.send_message(BOB, f"/code {code}")  # someone else is not held up
    assert bot.drain() == [APPLIED]
    now[0] += no_wrong_codes.WRONG_CODE_WINDOW_S + 1
    fake_telegram.send_message(ANN, f"/code {code}")
    assert bot.drain() == [APPLIED]
    assert len(orders_of(ANN, "code")) == 1
