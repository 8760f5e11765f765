"""SPEC 0.2, 14.2, 14.3 with real bot processes: one instance, updates at most once and none skipped."""

import signal
import time

import pytest

from bot.lease import LEASE_NAME
from models.bot import BotUpdate
from models.commerce import Customer
from models.jobs import JobLeader
from models.ops import OperatorNotice
from ops.records import queue_notice
from tests.support.bots import TEST_LEASE_TTL_S, holding_the_update_table
from tests.support.processes import wait_for

pytestmark = pytest.mark.processes

ANN = {"id": 701, "first_name": "Ann", "language_code": "en"}


def applied(update):
    return BotUpdate.get_or_none(BotUpdate.update_id == update["update_id"]) is not None


def answers(fake, user=ANN):
    return [message["text"].split("!")[0] for message in fake.bot_messages(user["id"])]


def test_an_update_delivered_three_times_and_the_bot_killed_right_after_applying_it_is_applied_once(
    bots, fake_telegram
):
    # The three copies come in the bot's first poll; every later poll fails, so the offset
    # never moves past them: the bot dies after its commit and before the update is confirmed.
    update = fake_telegram.send_message(ANN, "/start")
    fake_telegram.inject(update)
    fake_telegram.inject(update)
    fake_telegram.set_fault("getUpdates", "5xx", after=1)
    first = bots.start()
    bots.wait_polling(first)
    wait_for(lambda: applied(update) and answers(fake_telegram), 20, message="applied and answered")
    first.kill()
    first.wait()
    fake_telegram.clear_faults()
    assert fake_telegram.waiting() == 3  # never confirmed: Telegram will deliver it again

    second = bots.start()
    bots.wait_polling(second, timeout=TEST_LEASE_TTL_S + 20)
    later = fake_telegram.send_message(ANN, "/start")
    wait_for(lambda: applied(later), 20, message="the next update applied")
    wait_for(lambda: len(fake_telegram.bot_messages(ANN["id"])) == 2, 10, message="the answer to the next update")
    time.sleep(1)  # room for a wrong second application to show
    assert fake_telegram.delivered(update["update_id"]) >= 2 * 3  # both bots were given all three copies
    assert Customer.select().where(Customer.telegram_id == ANN["id"]).count() == 1
    assert sorted(row.update_id for row in BotUpdate.select()) == [update["update_id"], later["update_id"]]
    assert answers(fake_telegram) == ["Welcome, Ann", "Welcome back, Ann"]  # the replays were never answered


def test_a_bot_killed_before_its_commit_leaves_the_update_to_the_next_bot(bots, fake_telegram, backend, database_url):
    first = bots.start()
    bots.wait_polling(first)
    with holding_the_update_table(backend, database_url):
        update = fake_telegram.send_message(ANN, "/start")
        wait_for(lambda: fake_telegram.delivered(update["update_id"]) == 1, 20, message="the bot read the update")
        time.sleep(0.5)  # it is waiting on the lock, inside its transaction
        first.kill()
        first.wait()
    assert not applied(update) and Customer.select().count() == 0

    second = bots.start()
    wait_for(lambda: applied(update), TEST_LEASE_TTL_S + 20, message="the update applied by the next bot")
    assert Customer.select().where(Customer.telegram_id == ANN["id"]).count() == 1
    wait_for(lambda: answers(fake_telegram) == ["Welcome, Ann"], 10, message="one fresh welcome")
    assert second.poll() is None


def test_a_second_bot_exits_2_and_a_new_one_takes_over_within_the_ttl_after_the_first_is_killed(bots, fake_telegram):
    first = bots.start()
    bots.wait_polling(first)
    second = bots.start()
    assert second.wait(30) == 2
    assert "another bot instance holds the lease" in bots.log(second)

    first.kill()
    killed_at = time.monotonic()
    first.wait()
    third = bots.start()
    bots.wait_polling(third, timeout=TEST_LEASE_TTL_S + 20)
    taken_after = time.monotonic() - killed_at
    assert taken_after <= TEST_LEASE_TTL_S + 5  # the TTL since the last renewal, plus the new process's start
    update = fake_telegram.send_message(ANN, "/start")
    wait_for(lambda: applied(update), 20, message="the new bot applies updates")


def test_a_bot_paused_past_its_lease_exits_3_without_applying_anything(bots, fake_telegram):
    first = bots.start()
    bots.wait_polling(first)
    first.send_signal(signal.SIGSTOP)  # a long pause: its lease expires meanwhile
    second = bots.start()
    bots.wait_polling(second, timeout=TEST_LEASE_TTL_S + 20)
    taken = fake_telegram.send_message(ANN, "/start")
    wait_for(lambda: applied(taken), 20, message="the new holder applies updates")

    second.send_signal(signal.SIGSTOP)  # the lease stays the second's for a few seconds
    waiting = fake_telegram.send_message(ANN, "/start")
    first.send_signal(signal.SIGCONT)
    assert first.wait(15) == 3
    assert "bot lease lost" in bots.log(first)
    assert not applied(waiting)
    second.send_signal(signal.SIGCONT)
    wait_for(lambda: applied(waiting), 20, message="the holder applies what the paused bot did not")


def test_sigterm_stops_polling_at_once_and_releases_the_lease(bots, fake_telegram):
    bot = bots.start()
    bots.wait_polling(bot)
    wait_for(lambda: fake_telegram.stats()["calls"].get("getUpdates"), 10, message="a long poll under way")
    stopped_at = time.monotonic()
    bot.send_signal(signal.SIGTERM)
    assert bot.wait(10) == 0
    assert time.monotonic() - stopped_at < 5  # the 25 s long poll was cut short
    assert JobLeader.get_or_none(JobLeader.name == LEASE_NAME) is None
    assert "bot stopped; lease released" in bots.log(bot)
    assert "operator notifier off: APP_TELEGRAM_OPERATOR_CHAT_ID is not set" in bots.log(bot)
    assert "channel membership off: APP_TELEGRAM_REQUIRED_CHANNEL is not set" in bots.log(bot)
    successor = bots.start()
    bots.wait_polling(successor, timeout=10)  # no waiting out a TTL after a clean stop


def test_the_bot_process_delivers_pending_operator_notices_to_the_operator_chat(bots, fake_telegram):
    queue_notice("order_paid", "order:1", {"orderId": 1, "entitlementId": 1})
    bot = bots.start(env={"APP_TELEGRAM_OPERATOR_CHAT_ID": "-1009"})
    bots.wait_polling(bot)
    wait_for(lambda: OperatorNotice.get().status == "sent", 20, message="the notice sent")
    (sent,) = fake_telegram.accepted("sendMessage")
    assert sent["chat_id"] == -1009 and sent["params"]["text"] == "Order 1 paid; entitlement 1 created."
    assert [topic["name"] for topic in fake_telegram.topics(-1009)] == ["Payments"]


def test_sigterm_during_an_update_finishes_it_before_the_bot_exits(bots, fake_telegram):
    fake_telegram.set_fault("sendMessage", "slow", count=1, delay=3)  # the update's answer takes 3 s
    bot = bots.start()
    bots.wait_polling(bot)
    update = fake_telegram.send_message(ANN, "/start")
    wait_for(lambda: fake_telegram.stats()["calls"].get("sendMessage"), 20, message="the answer under way")
    signalled_at = time.monotonic()
    bot.send_signal(signal.SIGTERM)
    assert bot.wait(15) == 0
    assert time.monotonic() - signalled_at >= 1.5  # it waited for the answer instead of dropping it
    assert applied(update)
    assert "bot stopped; lease released" in bots.log(bot)
    assert JobLeader.get_or_none(JobLeader.name == LEASE_NAME) is None
