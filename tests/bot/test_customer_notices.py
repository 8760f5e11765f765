"""SPEC 14.4, 14.6: "your access is ready" is written by the worker's success and delivered by the bot once,
with the link and its QR code; every kind with a text is delivered, an unknown one fails visibly."""

import hashlib
import json
import logging
import threading

import pytest

from bot import qr
from bot.customer_notices import CustomerNoticeLoop
from commerce import codes
from commerce.passes.renewal import NOTICE_DUNNING
from models.commerce import Customer, Subscription
from models.fulfillment import Entitlement
from models.ops import CustomerNotice
from ops.records import queue_customer_notice
from tests.support import sales
from tests.support.shop import fulfil, rub_plan

ANN_ID = 801


@pytest.fixture
def loop(database, telebot, bot_services):
    return CustomerNoticeLoop(telebot, threading.Event())


@pytest.fixture
def buyer(database):
    return Customer.create(display_name="Ann", telegram_id=ANN_ID, language_code="en")


def bought(buyer):
    """A plan paid at YooKassa and fulfilled on the fake panel by the worker; returns its subscription."""
    _, settlement, _ = sales.paid_order(buyer, rub_plan())
    fulfil()
    return settlement


def notices(kind=None):
    query = CustomerNotice.select().order_by(CustomerNotice.id)
    return list(query if kind is None else query.where(CustomerNotice.kind == kind))


def test_the_create_s_success_writes_one_access_ready_notice_with_ids_only(buyer, bot_services):
    order, settlement, _ = sales.paid_order(buyer, rub_plan())
    assert notices() == []  # not before the panel has the user
    fulfil()
    (notice,) = notices()
    assert (notice.kind, notice.dedupe_key, notice.status) == (
        "access_ready", f"entitlement:{settlement.entitlement_id}", "pending",
    )  # fmt: skip
    assert notice.customer_id == buyer.id
    payload = json.loads(notice.payload)
    assert set(payload) == {"entitlementId", "subscriptionId"}  # never the link (SPEC 13.13)
    assert "http" not in notice.payload


def test_a_create_that_fails_writes_no_access_ready_notice(buyer, bot_services):
    bot_services.panel.set_faults(fail_rate=1.0)
    sales.paid_order(buyer, rub_plan())
    fulfil()
    assert notices() == []


def test_access_ready_is_sent_once_as_the_qr_code_with_the_link_in_its_caption(loop, buyer, fake_telegram):
    settlement = bought(buyer)
    assert loop.tick() == 0
    assert loop.tick() == 0
    (sent,) = fake_telegram.accepted("sendPhoto")
    link = bot_link(settlement)
    caption = sent["params"]["caption"]
    assert caption.startswith("Your access is ready: Monthly until ") and caption.endswith(link)
    assert sent["chat_id"] == ANN_ID and sent["sha256"] == hashlib.sha256(qr.png(link)).hexdigest()
    (notice,) = notices()
    assert notice.status == "sent" and notice.sent_at is not None


def bot_link(settlement):
    from bot import services
    from models.fulfillment import Entitlement

    subscription = Subscription.get_by_id(Entitlement.get_by_id(settlement.entitlement_id).subscription_id)
    return services.remote_user(subscription.remote_user_id).subscription_url


def test_every_kind_with_a_text_is_delivered_in_the_customers_language(loop, buyer, fake_telegram):
    plan = rub_plan()
    Customer.update(language_code="ru").where(Customer.id == buyer.id).execute()
    queue_customer_notice(buyer.id, NOTICE_DUNNING, "s7:2027-01-01T00:00:00",
                          {"subscriptionId": "s7", "periodEnd": "2027-01-01T00:00:00Z", "planId": plan.id,
                           "amountMinor": 19900, "currency": "RUB"})  # fmt: skip
    loop.tick()
    (sent,) = fake_telegram.accepted("sendMessage")
    assert sent["params"]["text"] == (
        "С кошелька не удалось списать 199.00 RUB за продление «Monthly». "
        "Пополните его до 2027-01-01 00:00 UTC, чтобы сохранить доступ."
    )
    assert notices()[0].status == "sent"


def test_a_kind_without_a_text_fails_visibly_and_does_not_hold_up_the_others(loop, buyer, fake_telegram, caplog):
    queue_customer_notice(buyer.id, "horoscope", "1", {})
    queue_customer_notice(buyer.id, NOTICE_DUNNING, "2", {})
    with caplog.at_level(logging.ERROR, logger="omniflow.bot.customer_notices"):
        loop.tick()
    unknown, dunning = notices()
    assert (unknown.status, unknown.failure_code) == ("failed", "unknown_kind")
    assert dunning.status == "sent"
    assert any(record.getMessage().startswith("customer notice cannot be delivered") for record in caplog.records)


def test_a_customer_who_blocked_the_bot_gets_the_notice_failed_and_never_retried(loop, buyer, fake_telegram):
    fake_telegram.block(ANN_ID)
    queue_customer_notice(buyer.id, NOTICE_DUNNING, "1", {})
    loop.tick()
    loop.tick()
    (notice,) = notices()
    assert (notice.status, notice.failure_code) == ("failed", "forbidden")
    assert fake_telegram.stats()["calls"]["sendMessage"] == 1
    assert Customer.get_by_id(buyer.id).telegram_unreachable_at is not None  # campaigns leave them out


def test_a_429_waits_its_retry_after_and_the_notice_is_sent_once_after(loop, buyer, fake_telegram):
    fake_telegram.set_fault("sendMessage", "429", count=1, retry_after=7)
    queue_customer_notice(buyer.id, NOTICE_DUNNING, "1", {})
    queue_customer_notice(buyer.id, NOTICE_DUNNING, "2", {})
    assert loop.tick() == 7  # the run loop waits that long before the next tick
    assert [notice.status for notice in notices()] == ["pending", "pending"]
    assert loop.tick() == 0
    assert len(fake_telegram.accepted("sendMessage")) == 2
    assert [notice.status for notice in notices()] == ["sent", "sent"]


def test_a_5xx_leaves_the_notice_pending_and_a_later_tick_sends_it_once(loop, buyer, fake_telegram):
    fake_telegram.set_fault("sendMessage", "5xx", count=1)
    queue_customer_notice(buyer.id, NOTICE_DUNNING, "1", {})
    loop.tick()
    assert notices()[0].status == "pending"
    loop.tick()
    loop.tick()
    assert len(fake_telegram.accepted("sendMessage")) == 1 and notices()[0].status == "sent"


def test_a_renewal_is_told_as_renewed_once_with_its_new_end_and_no_link_again(loop, buyer, fake_telegram):
    settlement = bought(buyer)
    loop.tick()
    subscription = Entitlement.get_by_id(settlement.entitlement_id).subscription
    _, renewal, _ = sales.paid_order(buyer, Entitlement.get_by_id(settlement.entitlement_id).plan, kind="renewal",
                                     subscription=subscription)  # fmt: skip
    fulfil()
    (renewed,) = notices("access_renewed")
    assert renewed.dedupe_key == f"entitlement:{renewal.entitlement_id}" and len(notices("access_ready")) == 1
    loop.tick()
    (sent,) = fake_telegram.accepted("sendMessage")
    ends = Entitlement.get_by_id(renewal.entitlement_id).ends_at.strftime("%Y-%m-%d")
    assert sent["params"]["text"].startswith("Your subscription is renewed: Monthly until " + ends)
    assert bot_link(settlement) not in sent["params"]["text"] and len(fake_telegram.accepted("sendPhoto")) == 1


def test_access_ready_waits_while_the_panel_does_not_answer(loop, buyer, fake_telegram, bot_services):
    bought(buyer)
    bot_services.panel.set_faults(fail_rate=1.0)
    loop.tick()
    assert notices()[0].status == "pending" and fake_telegram.accepted("sendPhoto") == []
    bot_services.panel.set_faults(fail_rate=0.0)
    loop.tick()
    assert notices()[0].status == "sent" and len(fake_telegram.accepted("sendPhoto")) == 1


def test_a_bought_gift_s_code_is_sent_once_to_its_buyer_and_then_kept_nowhere(loop, buyer, fake_telegram, data_key):
    sales.paid_order(buyer, rub_plan(), kind="gift")
    (notice,) = notices()
    code = notice.secret
    loop.tick()
    loop.tick()
    (sent,) = fake_telegram.accepted("sendMessage")
    text = sent["params"]["text"]
    assert sent["chat_id"] == ANN_ID and text.startswith(f"Your gift card for Monthly: {code}\n")
    assert "This code is shown only this once" in text
    (notice,) = notices()
    assert notice.status == "sent" and notice.secret is None  # erased with the mark: shown once
    assert codes.find_gift_card(code).purchase_order_id == json.loads(notice.payload)["orderId"]


def test_a_gift_code_notice_whose_code_could_not_be_kept_fails_visibly(loop, buyer, fake_telegram):
    sales.paid_order(buyer, rub_plan(), kind="gift")  # no data key: nothing could be sealed
    loop.tick()
    (notice,) = notices()
    assert (notice.status, notice.failure_code) == ("failed", "no_code")
    assert fake_telegram.accepted("sendMessage") == []


def test_a_gift_code_waits_while_the_bot_has_no_data_key_and_is_sent_once_it_has(loop, buyer, fake_telegram, data_key):
    from ops import sealing

    sales.paid_order(buyer, rub_plan(), kind="gift")
    sealing.use_keys(None)
    loop.tick()
    assert notices()[0].status == "pending" and fake_telegram.accepted("sendMessage") == []
    sealing.use_keys(data_key)
    loop.tick()
    assert notices()[0].status == "sent" and len(fake_telegram.accepted("sendMessage")) == 1


def test_notices_waiting_for_an_unanswering_panel_hold_up_no_other_and_cost_one_panel_call_a_tick(
    loop, buyer, fake_telegram, bot_services, monkeypatch
):
    from bot import customer_notices, services

    settlement = bought(buyer)
    subscription_id = Entitlement.get_by_id(settlement.entitlement_id).subscription_id
    payload = {"entitlementId": settlement.entitlement_id, "subscriptionId": subscription_id}
    for number in range(customer_notices.BATCH + 5):  # more link notices than one tick tries
        queue_customer_notice(buyer.id, "access_ready", f"more:{number}", payload)
    queue_customer_notice(buyer.id, NOTICE_DUNNING, "behind-them", {})
    calls = []
    real = services.remote_user
    monkeypatch.setattr(services, "remote_user", lambda remote: calls.append(remote) or real(remote))
    bot_services.panel.set_faults(fail_rate=1.0)

    loop.tick()

    assert len(calls) == 1  # the first link notice asked; the others of the tick did not
    (dunning,) = notices(NOTICE_DUNNING)
    assert dunning.status == "sent"
    assert {notice.status for notice in notices("access_ready")} == {"pending"}
    bot_services.panel.set_faults(fail_rate=0.0)
    loop.tick()
    loop.tick()
    assert {notice.status for notice in notices("access_ready")} == {"sent"}


def test_a_refund_notice_says_where_the_money_went_and_that_access_ended(loop, buyer, fake_telegram):
    queue_customer_notice(buyer.id, "order_refunded_wallet_full", "refund:1",
                          {"orderId": 7, "amountMinor": 19900, "currency": "RUB"})  # fmt: skip
    loop.tick()
    (sent,) = fake_telegram.accepted("sendMessage")
    assert sent["params"]["text"] == (
        "Order 7 was refunded: 199.00 RUB was added to your wallet. The access it bought is switched off."
    )
