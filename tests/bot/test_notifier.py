"""SPEC 6, 14.6: the operator notifier sends every pending notice once, to one forum topic per notice topic."""

import json
import threading

import pytest

from bot import notifier, texts
from bot.notifier import BATCH, OperatorNotifier
from models.bot import BotForumTopic
from models.ops import OperatorNotice
from ops.records import queue_notice

OPERATOR_CHAT = -1001234567890
KINDS = ("order_paid", "fulfillment_failure", "outbox_dead")  # payments, fulfillment, operations


@pytest.fixture
def loop(database, telebot):
    return OperatorNotifier(telebot, OPERATOR_CHAT, threading.Event())


def queue(count, kinds=KINDS):
    for index in range(count):
        kind = kinds[index % len(kinds)]
        queue_notice(kind, f"n{index}", {"orderId": index, "entitlementId": index, "operation": "create",
                                         "errorCode": "panel_unavailable", "status": "failed"})  # fmt: skip


def sent_texts(fake):
    return [call["params"]["text"] for call in fake.accepted("sendMessage")]


def test_120_notices_over_3_topics_are_each_sent_once_with_one_forum_topic_per_topic(loop, fake_telegram):
    queue(120)
    sent_per_tick = []
    for _ in range(4):
        before = len(fake_telegram.accepted("sendMessage"))
        assert loop.tick() == 0
        sent_per_tick.append(len(fake_telegram.accepted("sendMessage")) - before)
    assert sent_per_tick == [BATCH, BATCH, 20, 0]
    assert OperatorNotice.select().where(OperatorNotice.status == "sent").count() == 120
    topics = fake_telegram.topics(OPERATOR_CHAT)
    assert sorted(topic["name"] for topic in topics) == ["Fulfillment", "Operations", "Payments"]
    threads = {row.topic: row.message_thread_id for row in BotForumTopic.select()}
    assert sorted(threads.values()) == sorted(topic["message_thread_id"] for topic in topics)
    texts_sent = sent_texts(fake_telegram)
    assert len(texts_sent) == len(set(texts_sent)) == 120
    for call in fake_telegram.accepted("sendMessage"):
        assert str(call["chat_id"]) == str(OPERATOR_CHAT)
    by_thread = {}
    for call in fake_telegram.accepted("sendMessage"):
        by_thread.setdefault(int(call["params"]["message_thread_id"]), []).append(call["params"]["text"])
    assert all(text.startswith("Order") for text in by_thread[threads["payments"]])
    assert all(text.startswith("Fulfillment") for text in by_thread[threads["fulfillment"]])
    assert all(text.startswith("outbox_dead:") for text in by_thread[threads["operations"]])


def test_with_5xx_injected_notices_are_sent_later_and_never_twice_after_a_success(loop, fake_telegram):
    queue(60)
    loop.tick()
    fake_telegram.set_fault("sendMessage", "5xx", count=2)
    assert loop.tick() == 0  # the first send fails: the tick stops, nothing more is marked
    assert OperatorNotice.select().where(OperatorNotice.status == "sent").count() == BATCH
    assert loop.tick() == 0  # fails again
    loop.tick()
    loop.tick()
    assert fake_telegram.stats()["faults_injected"] == {"sendMessage:5xx": 2}
    texts_sent = sent_texts(fake_telegram)
    assert len(texts_sent) == len(set(texts_sent)) == 60
    assert OperatorNotice.select().where(OperatorNotice.status == "pending").count() == 0


def test_a_timeout_leaves_the_notice_pending_for_the_next_tick(loop, fake_telegram, monkeypatch):
    from telebot import apihelper

    queue(1)
    monkeypatch.setattr(apihelper, "READ_TIMEOUT", 0.5)
    fake_telegram.set_fault("sendMessage", "slow", count=1, delay=3)
    loop.tick()
    assert OperatorNotice.get().status == "pending"
    loop.tick()
    assert OperatorNotice.get().status == "sent"


def test_a_429_is_honoured_with_its_retry_after(loop, fake_telegram):
    queue(5)
    fake_telegram.set_fault("sendMessage", "429", count=1, retry_after=7)
    assert loop.tick() == 7
    assert OperatorNotice.select().where(OperatorNotice.status == "sent").count() == 0
    assert loop.tick() == 0
    assert OperatorNotice.select().where(OperatorNotice.status == "sent").count() == 5


def test_a_forum_topic_that_could_not_be_created_is_created_on_a_later_tick_and_only_once(loop, fake_telegram):
    queue(3, kinds=("order_paid",))
    fake_telegram.set_fault("createForumTopic", "5xx", count=1)
    loop.tick()
    assert BotForumTopic.select().count() == 0 and fake_telegram.accepted("sendMessage") == []
    loop.tick()
    loop.tick()
    assert len(fake_telegram.topics(OPERATOR_CHAT)) == 1
    assert len(fake_telegram.accepted("sendMessage")) == 3


def test_notices_never_carry_links_or_secrets():
    notice = OperatorNotice(
        kind="some_failure",
        payload=json.dumps({"link": "https://sub.example.com/api/sub/AbCdEf123456", "token": "s3cr3t-value-xyz"}),
    )
    rendered = notifier.render(notice)
    assert "AbCdEf123456" not in rendered and "s3cr3t-value-xyz" not in rendered
    assert rendered.startswith("some_failure:")


def test_every_notice_kind_written_today_has_a_topic_and_a_sentence():
    from bot.handlers.fallback import NOTICE_UNMATCHED_PAYMENT
    from commerce.gift_purchase import NOTICE_GIFT_CODE_UNDELIVERED
    from commerce.provider_refund import NOTICE_REFUND_FAILED
    from commerce.refunds import NOTICE_REFUND_MANUAL
    from fulfillment import rules
    from omniflow import NOTICE_UNDECLARED_WORK

    kinds = (
        rules.NOTICE_ORDER_PAID,
        rules.NOTICE_FULFILLMENT_FAILURE,
        NOTICE_UNMATCHED_PAYMENT,
        NOTICE_REFUND_MANUAL,
        NOTICE_REFUND_FAILED,
        NOTICE_GIFT_CODE_UNDELIVERED,
        NOTICE_UNDECLARED_WORK,
    )
    for kind in kinds:
        assert kind in texts.TOPIC_OF_KIND and kind in texts.NOTICE_TEXTS


def test_a_refund_notice_names_the_refund_the_order_and_what_to_do():
    payload = {"refundId": 4, "orderId": 9, "amountMinor": 29900, "currency": "RUB", "provider": "cryptobot"}
    rendered = notifier.render(OperatorNotice(kind="refund_manual", payload=json.dumps(payload)))
    assert rendered.startswith("Refund 4 of order 9: 29900 RUB paid at cryptobot") and "by hand" in rendered
