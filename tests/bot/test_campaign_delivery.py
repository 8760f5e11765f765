"""SPEC 6, 14.6: campaign delivery at APP_TELEGRAM_DELIVERY_RATE — a 429 waits its retry_after, a 403 marks the
recipient and the customer unreachable, and no recipient gets the text twice, a restart included."""

import threading
import time

import pytest

from bot.campaigns import INTERRUPTED, CampaignDelivery
from bot.pacing import TokenBucket
from models.campaigns import Campaign, CampaignRecipient
from models.commerce import Customer
from ops import campaign_expansion
from ops.campaigns import EMPTY_AUDIENCE, INVALID_CAMPAIGN_TEXT, CampaignRejected, create_campaign, progress

FIRST_CHAT = 5_000_000
TEXT = "Spring sale: 30 % off every plan this week."


def customers(count, first=FIRST_CHAT):
    rows = [{"id": f"c{first + index}", "display_name": f"user {index}", "telegram_id": first + index}
            for index in range(count)]  # fmt: skip
    for start in range(0, count, 500):
        Customer.insert_many(rows[start : start + 500]).execute()
    return [row["telegram_id"] for row in rows]


def campaign(kind="campaign", text=TEXT):
    """A campaign started now, its recipients written as the campaign_expansion pass writes them."""
    created = create_campaign(kind, text, "alice", "spring sale")
    campaign_expansion.run()
    return Campaign.get_by_id(created.id)


def sends(fake, chats):
    """(time, chat) of every campaign message the fake accepted, oldest first."""
    found = []
    for chat in chats:
        found += [(entry["at"], chat) for entry in fake.bot_messages(chat) if entry["text"] == TEXT]
    return sorted(found)


def run_until(loop, done, timeout=120):
    thread = threading.Thread(target=loop.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    try:
        while not done() and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        loop.stop.set()
        thread.join(15)
    assert not thread.is_alive()


def all_settled(campaign_id):
    return lambda: Campaign.get_by_id(campaign_id).status == "done"


def rate_outside_the_pause(times):
    """Sends per second before and after the longest gap (the 429's pause), and that gap."""
    gaps = [(later - earlier, index) for index, (earlier, later) in enumerate(zip(times, times[1:]))]
    gap, at = max(gaps)
    before, after = times[: at + 1], times[at + 1 :]
    rate = lambda part: (len(part) - 1) / (part[-1] - part[0])  # noqa: E731
    return rate(before), rate(after), gap


# At the spec's rate, 25/s: a higher rate would be faster, but on 2 busy cores the test process (the fake Bot API
# included) could not keep up with 100/s, and the floor of ±10 % failed. 500 recipients in batches of 50 (about 20 s)
# cross as many batch boundaries as 2 000 in the loop's batches of 200 did (80 s), and each side of the 429 still
# spans 200 sends or more, so the rate is measured to within 1 %.
RATE = 25
RECIPIENTS = 500


def test_recipients_with_a_429_are_sent_at_the_rate_once_each_and_403s_are_marked_unreachable(
    database, telebot, fake_telegram, monkeypatch
):
    from bot import campaigns as delivery

    monkeypatch.setattr(delivery, "BATCH", 50)
    chats = customers(RECIPIENTS)
    blocked = chats[50:RECIPIENTS:50]  # 9 customers who blocked the bot
    for chat in blocked:
        fake_telegram.block(chat)
    sent = campaign()
    assert sent.recipients == RECIPIENTS
    loop = CampaignDelivery(telebot, threading.Event(), RATE, idle_s=0.05)

    def inject_429_midway():
        while fake_telegram.accepted_count("sendMessage") < 200 and not loop.stop.is_set():
            time.sleep(0.01)
        fake_telegram.set_fault("sendMessage", "429", count=1, retry_after=1)

    injector = threading.Thread(target=inject_429_midway, daemon=True)
    injector.start()
    run_until(loop, all_settled(sent.id))
    injector.join(5)

    assert fake_telegram.stats()["faults_injected"] == {"sendMessage:429": 1}
    delivered = sends(fake_telegram, chats)
    per_chat = {}
    for _, chat in delivered:
        per_chat[chat] = per_chat.get(chat, 0) + 1
    assert set(per_chat.values()) == {1}  # no recipient twice
    assert set(per_chat) == set(chats) - set(blocked)  # every reachable one once
    assert progress(sent.id) == {"pending": 0, "sending": 0, "sent": RECIPIENTS - 9, "unreachable": 9, "failed": 0}
    unreachable = {r.chat_id for r in CampaignRecipient.select().where(CampaignRecipient.status == "unreachable")}
    assert unreachable == set(blocked)
    marked = Customer.select().where(Customer.telegram_unreachable_at.is_null(False))
    assert {customer.telegram_id for customer in marked} == set(blocked)

    # Measured by the fake's clock over the messages it accepted (a 403 takes its token but leaves no message,
    # which lowers the measured rate by 1 %).
    times = [at for at, _ in delivered]
    before, after, pause = rate_outside_the_pause(times)
    print(f"campaign delivery at {RATE}/s: {before:.1f}/s before the 429, {after:.1f}/s after, pause {pause:.2f} s")
    assert 0.9 * RATE <= before <= 1.1 * RATE
    assert 0.9 * RATE <= after <= 1.1 * RATE
    assert pause >= 0.9  # the retry_after (1 s) was honoured: the gap runs from the last send before the 429


def test_a_restart_mid_campaign_sends_the_rest_and_nobody_twice(database, telebot, fake_telegram):
    chats = customers(300)
    sent = campaign()
    first = CampaignDelivery(telebot, threading.Event(), 500, idle_s=0.05)
    run_until(first, lambda: len(fake_telegram.accepted("sendMessage")) >= 120)
    assert 0 < progress(sent.id)["sent"] < 300
    second = CampaignDelivery(telebot, threading.Event(), 500, idle_s=0.05)
    run_until(second, all_settled(sent.id))
    delivered = [chat for _, chat in sends(fake_telegram, chats)]
    assert sorted(delivered) == sorted(chats)
    assert progress(sent.id)["sent"] == 300


def test_a_recipient_a_dead_bot_left_claimed_is_failed_never_sent_again(database, telebot, fake_telegram):
    chats = customers(3)
    sent = campaign()
    claimed = CampaignRecipient.select().where(CampaignRecipient.chat_id == chats[0]).get()
    CampaignRecipient.update(status="sending", attempts=1).where(CampaignRecipient.id == claimed.id).execute()
    run_until(CampaignDelivery(telebot, threading.Event(), 100, idle_s=0.05), all_settled(sent.id))
    assert CampaignRecipient.get_by_id(claimed.id).status == "failed"
    assert CampaignRecipient.get_by_id(claimed.id).error_code == INTERRUPTED
    assert fake_telegram.bot_messages(chats[0]) == []
    assert [len(fake_telegram.bot_messages(chat)) for chat in chats[1:]] == [1, 1]


def test_a_5xx_is_sent_again_later_and_a_timeout_is_never_sent_twice(database, telebot, fake_telegram, monkeypatch):
    from telebot import apihelper

    chats = customers(4)
    sent = campaign()
    fake_telegram.set_fault("sendMessage", "5xx", count=1, chat_id=chats[0])
    monkeypatch.setattr(apihelper, "READ_TIMEOUT", 0.5)
    fake_telegram.set_fault("sendMessage", "slow", count=1, delay=2, chat_id=chats[1])
    run_until(CampaignDelivery(telebot, threading.Event(), 100, idle_s=0.05, backoff_s=0.1), all_settled(sent.id))
    assert len(fake_telegram.bot_messages(chats[0])) == 1
    assert CampaignRecipient.get(CampaignRecipient.chat_id == chats[0]).status == "sent"
    timed_out = CampaignRecipient.get(CampaignRecipient.chat_id == chats[1])
    assert (timed_out.status, timed_out.error_code) == ("failed", "unknown")
    assert len(fake_telegram.bot_messages(chats[1])) == 1  # the slow call did send it, once
    assert [len(fake_telegram.bot_messages(chat)) for chat in chats[2:]] == [1, 1]


def test_a_campaign_leaves_out_unreachable_blocked_and_chatless_customers_an_announcement_only_the_first(database):
    customers(3)
    Customer.update(telegram_unreachable_at=Customer.created_at).where(Customer.id == f"c{FIRST_CHAT}").execute()
    Customer.update(blocked=True).where(Customer.id == f"c{FIRST_CHAT + 1}").execute()
    Customer.create(id="no-chat", display_name="web only")
    assert campaign("campaign").recipients == 1
    assert campaign("announcement").recipients == 2


def test_bad_campaigns_are_refused_and_write_nothing(database):
    with pytest.raises(CampaignRejected) as refused:
        campaign()
    assert refused.value.code == EMPTY_AUDIENCE
    customers(1)
    for text in ("", "   ", "x" * 4097, None):
        with pytest.raises(CampaignRejected) as refused:
            create_campaign("campaign", text, "alice", "why")
        assert refused.value.code == INVALID_CAMPAIGN_TEXT
    assert Campaign.select().count() == 0 and CampaignRecipient.select().count() == 0


def test_the_token_bucket_spaces_takes_at_its_rate():
    bucket = TokenBucket(50)
    started = time.monotonic()
    for _ in range(52):
        assert bucket.take()
    elapsed = time.monotonic() - started
    assert 0.9 <= elapsed <= 1.1  # 50 intervals of 20 ms after the two tokens it starts with


def test_an_announcement_goes_out_before_a_campaign_queued_earlier(database, telebot, fake_telegram, monkeypatch):
    from bot import campaigns as delivery

    monkeypatch.setattr(delivery, "BATCH", 5)
    customers(20)
    sale = campaign("campaign")
    news = campaign("announcement", "Maintenance tonight at 02:00 UTC.")
    loop = CampaignDelivery(telebot, threading.Event(), 1000, idle_s=0.05)
    loop.tick()  # one batch of each kind, the announcement's taken first
    assert progress(news.id)["sent"] == 5 and progress(sale.id)["sent"] == 5
    run_until(loop, lambda: all_settled(sale.id)() and all_settled(news.id)())
    assert progress(news.id)["sent"] == progress(sale.id)["sent"] == 20


def test_a_customer_who_blocked_the_bot_is_reachable_again_after_start(database, telebot, fake_telegram):
    from tests.support.botruns import InProcessBot

    chats = customers(2)
    fake_telegram.block(chats[0])
    first = campaign()
    run_until(CampaignDelivery(telebot, threading.Event(), 1000, idle_s=0.05), all_settled(first.id))
    assert campaign().recipients == 1  # the unreachable one is left out
    fake_telegram.block(chats[0], blocked=False)
    fake_telegram.send_message({"id": chats[0], "first_name": "user 0"}, "/start")
    InProcessBot(telebot, fake_telegram).drain()
    assert Customer.get(Customer.telegram_id == chats[0]).telegram_unreachable_at is None
    assert campaign().recipients == 2


def test_a_sender_that_wakes_late_catches_the_lost_time_up_on_its_next_take():
    now = [0.0]
    bucket = TokenBucket(10, clock=lambda: now[0])
    assert bucket.take() and bucket.take()  # the two it starts with
    now[0] = 0.15  # woke 50 ms after its token was due at 0.1
    assert bucket.take()
    now[0] = 0.2  # the next token's time: late by nothing, though the last take was
    assert bucket._wait_needed() == 0
    assert bucket._wait_needed() > 0  # and no more than the rate allows
