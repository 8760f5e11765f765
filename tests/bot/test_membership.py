"""SPEC 6, 14.6: with APP_TELEGRAM_REQUIRED_CHANNEL set, only the channel's members may buy (getChatMember, a member
stored 10 minutes, a refusal never); the 10-minute loop re-verifies stored members in batches of 100; unset,
nothing is checked. Against the fake Bot API over HTTP, on both databases."""

import dataclasses
import datetime
import threading
import time

import pytest

from bot import keyboards, membership
from bot.lease import LEASE_NAME
from bot.updates import APPLIED, REFUSED
from config.settings import load_settings
from models.base import db, utcnow
from models.bot import BotChannelMember
from models.commerce import Customer
from tests.support.botruns import InProcessBot, row_counts
from tests.support.processes import wait_for
from tests.support.shop import rub_plan

ANN = {"id": 611, "first_name": "Ann", "language_code": "en"}
BOB = {"id": 612, "first_name": "Bob", "language_code": "en"}
EVE = {"id": 613, "first_name": "Eve", "language_code": "en"}
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


def age(customer_ids, seconds):
    """Move the stored last checks back in time, as if `seconds` had passed."""
    for row in BotChannelMember.select().where(BotChannelMember.customer.in_(customer_ids)):
        moved = row.checked_at - datetime.timedelta(seconds=seconds)
        BotChannelMember.update(checked_at=moved).where(BotChannelMember.customer == row.customer_id).execute()


def ann_customer():
    return Customer.get(Customer.telegram_id == ANN["id"])


def test_a_member_is_checked_once_per_10_minutes_and_the_answer_is_stored(
    database, telebot, fake_telegram, bot_services, plan
):
    bot = bot_with(telebot, fake_telegram, CHANNEL)
    fake_telegram.set_member(CHANNEL, ANN["id"], "administrator")
    assert press_buy(bot, fake_telegram) == [APPLIED]
    assert press_buy(bot, fake_telegram) == [APPLIED]
    assert checks(fake_telegram) == 1
    stored = BotChannelMember.get(BotChannelMember.customer == ann_customer().id)
    assert (stored.channel, stored.member, stored.left_at) == (CHANNEL, True, None)
    fake_telegram.set_member(CHANNEL, ANN["id"], "left")
    age([stored.customer_id], membership.RECHECK_S + 1)
    assert press_buy(bot, fake_telegram) == [REFUSED]
    assert checks(fake_telegram) == 2


def test_a_member_stored_for_another_channel_is_asked_again(database, telebot, fake_telegram, bot_services, plan):
    bot = bot_with(telebot, fake_telegram, CHANNEL)
    BotChannelMember.create(customer=ann_customer().id, channel="@old_channel", member=True, checked_at=utcnow())
    assert press_buy(bot, fake_telegram) == [REFUSED]  # not a member of the channel required now
    assert checks(fake_telegram) == 1


def members(count, first_id=900_000):
    """`count` customers stored as members checked 11 minutes ago; their ids, in customer id order."""
    checked = utcnow() - datetime.timedelta(seconds=membership.RECHECK_S + 60)
    ids = []
    for index in range(count):
        customer = Customer.create(telegram_id=first_id + index, display_name=f"member {index}")
        BotChannelMember.create(customer=customer.id, channel=CHANNEL, member=True, checked_at=checked)
        ids.append(customer.id)
    return sorted(ids)


def recheck(telebot, stop=None):
    return membership.MembershipRecheck(telebot, CHANNEL, stop or threading.Event())


def test_the_loop_re_verifies_due_members_in_batches_of_100_and_stores_who_left(database, telebot, fake_telegram):
    ids = members(230)
    telegram_of = dict(Customer.select(Customer.id, Customer.telegram_id).tuples())
    leavers = set(ids[::10])  # 23 left the channel; the rest stayed, some as admins or restricted members
    for index, customer_id in enumerate(ids):
        if customer_id in leavers:
            status = "left" if index % 20 else "kicked"
        else:
            status = ("member", "administrator", "creator")[index % 3]
        fake_telegram.set_member(CHANNEL, telegram_of[customer_id], status)
    fresh = members(5, first_id=950_000)
    age(fresh, -(membership.RECHECK_S + 60))  # checked just now: not due

    assert recheck(telebot).run_once() == (207, 23, 0)
    assert checks(fake_telegram) == 230  # the fresh five were not asked
    rows = {row.customer_id: row for row in BotChannelMember.select()}
    assert {customer_id for customer_id, row in rows.items() if not row.member} == leavers
    assert all(rows[customer_id].left_at is not None for customer_id in leavers)
    assert all(row.checked_at > utcnow() - datetime.timedelta(minutes=1) for row in rows.values())

    assert recheck(telebot).run_once() == (0, 0, 0)  # everyone was just checked: nobody is due
    assert checks(fake_telegram) == 230


def test_a_member_found_gone_is_refused_at_the_next_purchase_and_may_buy_again_after_rejoining(
    database, telebot, fake_telegram, bot_services, plan
):
    bot = bot_with(telebot, fake_telegram, CHANNEL)
    fake_telegram.set_member(CHANNEL, ANN["id"], "member")
    assert press_buy(bot, fake_telegram) == [APPLIED]
    customer_id = ann_customer().id
    fake_telegram.set_member(CHANNEL, ANN["id"], "left")
    age([customer_id], membership.RECHECK_S + 1)
    assert recheck(bot.telebot).run_once() == (0, 1, 0)
    assert press_buy(bot, fake_telegram) == [REFUSED]
    assert BotChannelMember.get(BotChannelMember.customer == customer_id).member is False
    fake_telegram.set_member(CHANNEL, ANN["id"], "member")
    assert press_buy(bot, fake_telegram) == [APPLIED]
    stored = BotChannelMember.get(BotChannelMember.customer == customer_id)
    assert stored.member is True and stored.left_at is None


def test_when_telegram_cannot_answer_the_loop_keeps_the_state_and_asks_next_run(database, telebot, fake_telegram):
    ids = members(150)
    for customer_id, telegram_id in Customer.select(Customer.id, Customer.telegram_id).tuples():
        fake_telegram.set_member(CHANNEL, telegram_id, "member")
    before = {row.customer_id: row.checked_at for row in BotChannelMember.select()}
    fake_telegram.set_fault("getChatMember", "5xx")
    assert recheck(telebot).run_once() == (0, 0, 100)  # the first batch failed whole: the run ends
    assert checks(fake_telegram) == 1  # the rest of the batch was not asked
    assert {row.customer_id: row.checked_at for row in BotChannelMember.select()} == before
    fake_telegram.clear_faults()
    assert recheck(telebot).run_once() == (150, 0, 0)
    assert len(ids) == 150


def test_a_429_waits_its_retry_after_and_the_run_goes_on(database, telebot, fake_telegram):
    members(3)
    for _, telegram_id in Customer.select(Customer.id, Customer.telegram_id).tuples():
        fake_telegram.set_member(CHANNEL, telegram_id, "member")
    fake_telegram.set_fault("getChatMember", "429", count=1, retry_after=1)
    started = datetime.datetime.now()
    assert recheck(telebot).run_once() == (2, 0, 1)  # the member refused with 429 is asked next run
    assert (datetime.datetime.now() - started).total_seconds() >= 1


def test_a_check_telegram_cannot_answer_lets_the_purchase_through(database, telebot, fake_telegram, bot_services, plan):
    bot = bot_with(telebot, fake_telegram, CHANNEL)
    fake_telegram.set_fault("getChatMember", "5xx", count=1)
    assert press_buy(bot, fake_telegram) == [APPLIED]


def test_without_a_required_channel_nothing_is_checked(database, telebot, fake_telegram, bot_services, plan):
    bot = bot_with(telebot, fake_telegram, "")
    assert press_buy(bot, fake_telegram) == [APPLIED]
    assert checks(fake_telegram) == 0


def asked(calls):
    """Whether a transaction was open at each getChatMember this process made."""
    return [in_transaction for method, in_transaction in calls if method == "getChatMember"]


def test_getchatmember_is_asked_before_the_update_transaction_opens_never_inside_it(
    database, telebot, fake_telegram, bot_services, plan, bot_api_calls
):
    bot = bot_with(telebot, fake_telegram, CHANNEL)
    fake_telegram.set_member(CHANNEL, ANN["id"], "member")
    assert press_buy(bot, fake_telegram) == [APPLIED]
    assert asked(bot_api_calls) == [False]
    assert BotChannelMember.get(BotChannelMember.customer == ann_customer().id).member is True

    # A new customer's /start and two presses in one batch: asked once, before the batch's transaction.
    fake_telegram.set_member(CHANNEL, BOB["id"], "member")
    fake_telegram.send_message(BOB, "/start")
    fake_telegram.press(BOB, keyboards.data(keyboards.BUY), message_id=1)
    fake_telegram.press(BOB, keyboards.data(keyboards.BUY), message_id=1)
    # Someone who never sent /start is refused unread: not asked.
    fake_telegram.press(EVE, keyboards.data(keyboards.BUY))
    assert bot.drain() == [APPLIED, APPLIED, APPLIED, REFUSED]
    assert asked(bot_api_calls) == [False, False]
    assert checks(fake_telegram) == 2
    bob = Customer.get(Customer.telegram_id == BOB["id"])
    assert BotChannelMember.get(BotChannelMember.customer == bob.id).member is True
    assert not any(in_transaction for _, in_transaction in bot_api_calls)  # the answers too, after the commit

    # A blocked customer's press is refused unread: not asked either, whatever their stored state.
    Customer.update(blocked=True).where(Customer.id == bob.id).execute()
    age([bob.id], membership.RECHECK_S + 1)
    fake_telegram.press(BOB, keyboards.data(keyboards.BUY), message_id=1)
    assert bot.drain() == [REFUSED]
    assert checks(fake_telegram) == 2


def test_a_top_up_asks_getchatmember_before_the_transaction_and_a_non_member_is_refused(
    database, telebot, fake_telegram, bot_services, plan, bot_api_calls
):
    bot = bot_with(telebot, fake_telegram, CHANNEL)
    before = row_counts()
    fake_telegram.press(ANN, keyboards.data(keyboards.TOPUP, "yookassa:RUB:50000"))
    assert bot.drain() == [REFUSED]
    assert fake_telegram.bot_messages(ANN["id"])[-1]["text"].startswith("Purchases are open to members")
    assert row_counts() == before
    fake_telegram.set_member(CHANNEL, ANN["id"], "member")
    fake_telegram.press(ANN, keyboards.data(keyboards.TOPUP, "yookassa:RUB:50000"))
    assert bot.drain() == [APPLIED]
    assert asked(bot_api_calls) == [False, False]
    # The member's answer is stored with the top-up: the next press within 10 minutes asks nothing.
    assert BotChannelMember.get(BotChannelMember.customer == ann_customer().id).member is True
    press_buy(bot, fake_telegram)
    assert checks(fake_telegram) == 2


def test_while_getchatmember_is_in_flight_another_writer_is_not_held_back(
    database, telebot, fake_telegram, bot_services, plan
):
    """The lease row is what the batch's transaction locks (FOR SHARE on PostgreSQL; SQLite's one write
    lock covers every table): a write to it during a slow getChatMember commits at once."""
    bot = bot_with(telebot, fake_telegram, CHANNEL)
    fake_telegram.set_member(CHANNEL, ANN["id"], "member")
    fake_telegram.set_fault("getChatMember", "slow", count=1, delay=2.0)
    waited = []

    def write_while_asked():
        wait_for(lambda: checks(fake_telegram) == 1, timeout=10, interval=0.01, message="getChatMember in flight")
        started = time.monotonic()
        with db.atomic():
            mark = db.obj.param
            db.execute_sql(f"UPDATE job_leader SET expires_at = expires_at WHERE name = {mark}", [LEASE_NAME])
        waited.append(time.monotonic() - started)
        db.close()

    writer = threading.Thread(target=write_while_asked)
    writer.start()
    began = time.monotonic()
    assert press_buy(bot, fake_telegram) == [APPLIED]
    took = time.monotonic() - began
    writer.join(15)
    assert took >= 2.0  # the call was slow indeed
    assert waited and waited[0] < 1.0  # and the write did not wait for it


def test_in_a_transaction_without_a_prepared_answer_nothing_is_asked(database, telebot, fake_telegram):
    """The stored state aged (or the loop changed it) between the batch's preparation and its transaction:
    the stored answer stands, a customer with none is let through as when Telegram cannot answer."""
    checker = membership.ChannelMembership(telebot, CHANNEL)
    fake_telegram.set_member(CHANNEL, 700, "member")
    stale, gone, unknown = (Customer.create(telegram_id=700 + index, display_name=f"c{index}") for index in range(3))
    long_ago = utcnow() - datetime.timedelta(seconds=membership.RECHECK_S + 5)
    BotChannelMember.create(customer=stale.id, channel=CHANNEL, member=True, checked_at=long_ago)
    BotChannelMember.create(customer=gone.id, channel=CHANNEL, member=False, checked_at=long_ago, left_at=long_ago)
    with db.atomic():
        assert checker.allowed(700, stale) is True
        assert checker.allowed(701, gone) is False
        assert checker.allowed(702, unknown) is True
    assert checks(fake_telegram) == 0
    # A prepared answer is used, and a member's stored, in the transaction.
    with db.atomic():
        assert checker.allowed(702, unknown, (CHANNEL, 702, True)) is True
        assert checker.allowed(701, gone, (CHANNEL, 999, True)) is False  # another user's answer is not theirs
    assert BotChannelMember.get(BotChannelMember.customer == unknown.id).member is True
    # Outside any transaction (no lock to hold) it asks.
    assert checker.allowed(700, stale) is True
    assert checks(fake_telegram) == 1
