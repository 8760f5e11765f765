"""SPEC 13.4–13.7, 13.12, 2.2: money comes in through the fake providers over real HTTP.

The web app runs on waitress with both providers configured at their fakes
(real servers); each fake delivers its webhooks to it; the fulfillment
worker runs in this process against the fake panel. Every test takes the
ledger invariant.
"""

import datetime
import hashlib
import json
import subprocess
import sys
import threading

import pytest
import requests

from commerce import ledger, payments, webhooks
from commerce.payments import poll_intent
from fakes.cryptobot import sign
from models.commerce import Customer, Order
from models.fulfillment import Entitlement, FulfillmentOperation
from models.jobs import Job
from models.ledger import LedgerTransaction
from models.ops import OperatorNotice, OutboxEvent
from models.payments import PaymentIntent, ProviderWebhookEvent
from ops import maintenance
from tests.support import commerce
from tests.support.direct import make_due
from tests.support.shop import (
    CRYPTOBOT_TOKEN,
    due_deliveries,
    environ,
    fulfil,
    rub_plan,
    settle_deliveries,
    web_process,
)
from tests.web.conftest import serving
from tests.web.test_panel_api import session_of
from web.webhooks import AddressLimit

PROVIDERS = ["yookassa", "cryptobot"]
RETAINED = webhooks.RETENTION  # an accepted delivery's stay; a rejected one's is shorter


@pytest.fixture
def money(shop, ledger_invariant):
    return shop


def buy(shop, provider, customer=None, plan=None, request_id="r1"):
    customer = customer or commerce.customer()
    plan = plan or rub_plan()
    answer = shop.checkout(
        customerId=customer.id, kind="purchase", provider=provider, currency="RUB", planId=plan.id, requestId=request_id
    )
    assert answer.status_code == 200, answer.text
    return answer.json()


def intent_of(order_id):
    return PaymentIntent.get(PaymentIntent.order == order_id)


def pay(shop, provider, order_id, **kwargs):
    """The payer pays at the provider; the fake delivers its webhook (unless a fault loses it)."""
    return shop.fake(provider).complete(intent_of(order_id).provider_payment_id, **kwargs)


def delivery_jobs():
    return Job.select().where(Job.kind == "webhook_delivery")


def settled_counts():
    return {
        "ledger": LedgerTransaction.select().count(),
        "entitlements": Entitlement.select().count(),
        "jobs": Job.select().where(Job.kind == "fulfillment").count(),
        "paid events": OutboxEvent.select().where(OutboxEvent.topic == "order.paid").count(),
    }


def replay(shop, provider, order_id):
    """The body and headers of the provider's delivery for this order's payment, as sent."""
    payment_id = intent_of(order_id).provider_payment_id
    if provider == "yookassa":
        return shop.yookassa.notification(payment_id), {}
    return shop.cryptobot.signed_update(payment_id)


# -- end to end -------------------------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_payment_at_each_provider_becomes_a_user_on_the_panel_and_a_fulfilled_order(money, provider):
    bought = buy(money, provider)
    assert bought["orderStatus"] == "pending" and bought["confirmationUrl"].startswith(money.fake(provider).base_url)
    order_id = bought["orderId"]
    pay(money, provider, order_id)
    assert [d["outcome"] for d in money.fake(provider).deliveries()] == ["delivered"]
    # Answered once stored with its job: nothing is settled in the request.
    assert (ProviderWebhookEvent.get().outcome, Order.get_by_id(order_id).status) == ("accepted", "pending")
    assert delivery_jobs().count() == 1 and settled_counts()["ledger"] == 0

    assert settle_deliveries() == ["settled"]
    order = Order.get_by_id(order_id)
    assert (order.status, order.settled_by, order.expires_at) == ("paid", "provider_webhook", None)
    assert intent_of(order_id).status == "succeeded"
    event = ProviderWebhookEvent.get()
    assert (event.outcome, event.payment_intent_id) == ("settled", intent_of(order_id).id)
    # What proved it: CryptoBot's signature; YooKassa, which signs nothing, its API's word.
    signed = provider == "cryptobot"
    assert (event.signature_ok, event.verdict) == (signed, "signature_valid" if signed else "confirmed")
    assert event.processed_at is not None
    assert ledger.balance(order.customer_id, "RUB") == 0  # clearing → revenue, not the wallet
    assert settled_counts() == {"ledger": 1, "entitlements": 1, "jobs": 1, "paid events": 1}

    fulfil()
    order = Order.get_by_id(order_id)
    assert order.status == "fulfilled"
    subscription = Entitlement.get(Entitlement.order == order_id).subscription
    assert money.panel.user(subscription.remote_username)["status"] == "ACTIVE"


@pytest.mark.parametrize("provider", PROVIDERS)
def test_with_the_webhook_lost_the_poll_settles_the_order(money, provider):
    order_id = buy(money, provider)["orderId"]
    money.fake(provider).set_faults(webhook_lost_rate=1.0)
    pay(money, provider, order_id)
    assert [d["outcome"] for d in money.fake(provider).deliveries()] == ["lost"]
    assert Order.get_by_id(order_id).status == "pending"

    applied = poll_intent(intent_of(order_id))
    assert applied.outcome == payments.SETTLED
    assert Order.get_by_id(order_id).settled_by == "provider_poll"
    assert poll_intent(intent_of(order_id)).outcome == payments.REPLAYED
    assert settled_counts()["ledger"] == 1 and intent_of(order_id).last_polled_at is not None
    fulfil()
    assert Order.get_by_id(order_id).status == "fulfilled"


def test_a_checkout_retried_makes_one_payment_at_the_provider(money):
    customer, plan = commerce.customer(), rub_plan()
    first = buy(money, "yookassa", customer, plan, request_id="same")
    again = buy(money, "yookassa", customer, plan, request_id="same")
    assert again == first
    assert len(money.yookassa.payments()) == 1 and PaymentIntent.select().count() == 1


def test_a_checkout_whose_provider_timed_out_reuses_its_idempotence_key_and_makes_one_payment(money):
    customer, plan = commerce.customer(), rub_plan()
    money.yookassa.set_faults(timeout_rate=1.0, hold_seconds=3)
    body = dict(customerId=customer.id, kind="purchase", provider="yookassa", currency="RUB", planId=plan.id)
    # The web process's adapter waits 10 s; the fake holds the answer for 3 s and then drops it.
    timed_out = money.checkout(**body, requestId="slow")
    assert (timed_out.status_code, timed_out.json()["code"]) == (502, "provider_unavailable")
    assert intent_of(timed_out_order(customer)).status == "created"
    money.yookassa.clear_faults()
    retried = money.checkout(**body, requestId="slow")
    assert retried.status_code == 200 and retried.json()["confirmationUrl"]
    assert len(money.yookassa.payments()) == 1  # the fake made it once: the key was the same


def timed_out_order(customer):
    return Order.get(Order.customer == customer.id).id


# -- replays, forgeries, mismatches -----------------------------------------------------------------------

STORM_SENDER = """
import sys, threading, requests
url, body, headers = sys.argv[1], sys.argv[2].encode(), dict(h.split(":", 1) for h in sys.argv[3:])
answers = []
def send():
    answers.append(requests.post(url, data=body, headers=headers, timeout=60).status_code)
threads = [threading.Thread(target=send) for _ in range(5)]
[t.start() for t in threads]
[t.join() for t in threads]
print(" ".join(map(str, answers)))
"""


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_replay_storm_settles_once_with_one_ledger_movement_and_one_job(money, provider, database_url):
    order_id = buy(money, provider)["orderId"]
    money.fake(provider).set_faults(webhook_lost_rate=1.0)
    pay(money, provider, order_id)
    body, headers = replay(money, provider, order_id)
    headers = {"Content-Type": "application/json", **headers}
    answers = []

    def send(web):
        answers.append(money.webhook(provider, body, headers, web).status_code)

    with web_process(database_url, money) as other_web:
        webs = (money.web, other_web)
        header_args = [f"{name}:{value}" for name, value in headers.items()]
        senders = [
            subprocess.Popen(
                [sys.executable, "-c", STORM_SENDER, f"{web}/v1/webhooks/{provider}", body.decode(), *header_args],
                stdout=subprocess.PIPE,
                text=True,
            )
            for web in webs
        ]
        threads = [threading.Thread(target=send, args=(web,)) for web in webs * 5]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for sender in senders:
            out, _ = sender.communicate(timeout=120)
            answers += [int(status) for status in out.split()]
    assert answers == [200] * 20
    settle_deliveries()
    assert settled_counts() == {"ledger": 1, "entitlements": 1, "jobs": 1, "paid events": 1}
    outcomes = sorted(e.outcome for e in ProviderWebhookEvent.select())
    assert outcomes.count("settled") == 1 and len(outcomes) == 20
    assert set(outcomes) <= {"settled", "replayed"}


def test_a_replay_of_a_processed_event_answers_200_and_changes_nothing(money):
    order_id = buy(money, "cryptobot")["orderId"]
    pay(money, "cryptobot", order_id)
    assert settle_deliveries() == ["settled"]
    body, headers = replay(money, "cryptobot", order_id)
    before, jobs_before = settled_counts(), delivery_jobs().count()
    answer = money.webhook("cryptobot", body, headers)
    assert (answer.status_code, answer.json()) == (200, {"outcome": "replayed"})
    assert settled_counts() == before and delivery_jobs().count() == jobs_before  # no job for a replay
    assert ProviderWebhookEvent.select().order_by(ProviderWebhookEvent.id.desc()).first().processed_at is not None


def test_a_replay_stored_before_the_first_delivery_was_applied_changes_nothing_when_its_job_runs(money):
    order_id = buy(money, "cryptobot")["orderId"]
    pay(money, "cryptobot", order_id)
    body, headers = replay(money, "cryptobot", order_id)
    answer = money.webhook("cryptobot", body, headers)
    assert (answer.status_code, answer.json()) == (200, {"outcome": "accepted"})  # the first not applied yet
    assert settle_deliveries() == ["settled", "replayed"]
    assert settled_counts() == {"ledger": 1, "entitlements": 1, "jobs": 1, "paid events": 1}


def test_a_bad_signature_is_a_401_the_delivery_is_kept_and_nothing_is_settled(money):
    order_id = buy(money, "cryptobot")["orderId"]
    money.cryptobot.set_faults(webhook_bad_signature_rate=1.0)
    pay(money, "cryptobot", order_id)
    assert [d["status"] for d in money.cryptobot.deliveries()] == [401]
    event = ProviderWebhookEvent.get()
    assert (event.signature_ok, event.verdict, event.outcome, event.processed_at) == (
        False, "signature_bad", "bad_signature", None)  # fmt: skip
    assert bytes(event.body) == replay(money, "cryptobot", order_id)[0]
    assert Order.get_by_id(order_id).status == "pending"
    assert settled_counts() == {"ledger": 0, "entitlements": 0, "jobs": 0, "paid events": 0}
    assert delivery_jobs().count() == 0  # nothing waits to apply it


def test_a_rejected_delivery_keeps_only_what_audit_needs_for_days(money):
    junk = b'{"update_id": 1, "pad": "' + b"x" * 60_000 + b'"}'
    forged = money.webhook("cryptobot", junk, {"crypto-pay-api-signature": "0" * 64, "User-Agent": "flood/1"})
    malformed = money.webhook("yookassa", junk)
    assert (forged.status_code, malformed.status_code) == (401, 400)
    order_id = buy(money, "cryptobot")["orderId"]
    pay(money, "cryptobot", order_id)
    rejected, _, accepted = ProviderWebhookEvent.select().order_by(ProviderWebhookEvent.id)
    assert [e.outcome for e in ProviderWebhookEvent.select().order_by(ProviderWebhookEvent.id)] == [
        "bad_signature", "malformed_webhook", "accepted"]  # fmt: skip
    for event in ProviderWebhookEvent.select().where(ProviderWebhookEvent.outcome != "accepted"):
        assert bytes(event.body) == junk[:1024]
        assert (event.body_size, event.body_sha256) == (len(junk), hashlib.sha256(junk).hexdigest())
        assert event.retain_until - event.received_at == webhooks.REJECTED_RETENTION < datetime.timedelta(days=7)
    assert json.loads(bytes(rejected.headers)) == {
        "address": "127.0.0.1", "content-type": "application/json", "user-agent": "flood/1",
        "crypto-pay-api-signature": "64 characters",
    }  # fmt: skip
    body = replay(money, "cryptobot", order_id)[0]
    assert (bytes(accepted.body), accepted.body_size) == (body, len(body))  # an accepted one is kept whole
    assert accepted.retain_until - accepted.received_at == webhooks.RETENTION


def test_yookassa_notifications_are_taken_only_from_its_published_addresses_and_others_kept_for_audit(money):
    order_id = buy(money, "yookassa")["orderId"]
    money.yookassa.set_faults(webhook_lost_rate=1.0)
    pay(money, "yookassa", order_id)
    body = replay(money, "yookassa", order_id)[0]
    behind_a_proxy = {**environ(money.yookassa, money.cryptobot), "APP_TRUSTED_PROXY": "127.0.0.1"}
    del behind_a_proxy["APP_YOOKASSA_WEBHOOK_ADDRESSES"]  # YooKassa's published ranges, the default
    with serving(behind_a_proxy) as web:

        def sent_from(address):
            return money.webhook("yookassa", body, {"X-Forwarded-For": address}, web)

        refused = [sent_from(address) for address in ("203.0.113.7", "185.71.76.32", "2a02:5181::1")]
        taken = [sent_from(address) for address in ("185.71.76.31", "77.75.156.11", "2a02:5180::7")]
    assert [(a.status_code, a.json()["code"]) for a in refused] == [(403, "webhook_address_refused")] * 3
    assert [(a.status_code, a.json()) for a in taken] == [(200, {"outcome": "accepted"})] * 3
    kept = ProviderWebhookEvent.select().where(ProviderWebhookEvent.outcome == "webhook_address_refused")
    assert [json.loads(bytes(event.headers))["address"] for event in kept] == [
        "203.0.113.7",
        "185.71.76.32",
        "2a02:5181::1",
    ]
    assert all(event.processed_at is None and event.retain_until - event.received_at < RETAINED for event in kept)
    assert delivery_jobs().count() == 3  # none for a refused one: no fetch, nothing settled by it
    assert settle_deliveries() == ["settled", "replayed", "replayed"]
    assert settled_counts()["ledger"] == 1


def test_a_flood_from_one_address_is_answered_429_with_retry_after_and_writes_nothing(money):
    limited = {**environ(money.yookassa, money.cryptobot), "APP_TRUSTED_PROXY": "127.0.0.1"}
    junk = b'{"update_id": 1, "pad": "' + b"x" * 60_000 + b'"}'
    with serving({**limited, "APP_WEBHOOK_RATE_LIMIT": "3"}) as web:

        def sent_from(address):
            headers = {"crypto-pay-api-signature": "0" * 64, "X-Forwarded-For": address}
            return money.webhook("cryptobot", junk, headers, web)

        flood = [sent_from("203.0.113.7") for _ in range(6)]
        elsewhere = sent_from("198.51.100.1")
    assert [answer.status_code for answer in flood] == [401, 401, 401, 429, 429, 429]
    assert flood[3].json()["code"] == "too_many_requests" and int(flood[3].headers["Retry-After"]) >= 1
    assert elsewhere.status_code == 401  # each address has its own allowance
    assert ProviderWebhookEvent.select().count() == 4
    assert sum(len(bytes(event.body)) for event in ProviderWebhookEvent.select()) == 4 * 1024


def test_the_webhook_rate_limit_refills_evenly_and_counts_each_address_apart():
    now = [0.0]
    limit = AddressLimit(60, clock=lambda: now[0])
    assert [limit.wait("203.0.113.7") for _ in range(61)] == [0] * 60 + [1]
    assert limit.wait("198.51.100.1") == 0
    now[0] += 1.0  # a second later: one more request, no burst
    assert (limit.wait("203.0.113.7"), limit.wait("203.0.113.7")) == (0, 1)
    now[0] += 3600.0  # an hour later: a whole minute's worth again, not an hour's
    assert [limit.wait("203.0.113.7") for _ in range(61)] == [0] * 60 + [1]


def test_a_forged_yookassa_notification_settles_nothing_and_is_recorded_as_what_the_api_said(money):
    order_id = buy(money, "yookassa")["orderId"]
    money.yookassa.forge_notification(intent_of(order_id).provider_payment_id)  # the API still says pending
    assert [d["status"] for d in money.yookassa.deliveries()] == [200]
    assert settle_deliveries() == ["pending"]
    assert Order.get_by_id(order_id).status == "pending" and settled_counts()["ledger"] == 0
    contradicted = ProviderWebhookEvent.get()
    assert (contradicted.signature_ok, contradicted.verdict) == (False, "contradicted")
    payment_page = f"{money.web}/panel/payments/{intent_of(order_id).id}"
    page = requests.get(payment_page, headers=session_of(money.web), timeout=10)
    assert page.status_code == 200
    assert 'data-verdict="contradicted">contradicted by the API</td>' in page.text and ">valid<" not in page.text
    forged = json.dumps({"type": "notification", "event": "payment.succeeded", "object": {
        "id": "2f1c6d3e-000f-5000-8000-1d2f3a4b5c6d", "status": "succeeded", "paid": True,
        "amount": {"value": "199.00", "currency": "RUB"}, "created_at": "2026-12-01T10:00:00.000Z",
        "metadata": {"order_id": str(order_id)}, "test": True, "refundable": True,
    }})  # fmt: skip
    answer = money.webhook("yookassa", forged)
    assert (answer.status_code, answer.json()) == (200, {"outcome": "accepted"})
    assert settle_deliveries() == ["unconfirmed"]
    event = ProviderWebhookEvent.select().order_by(ProviderWebhookEvent.id.desc()).first()
    # Ended, not left open: processed, with what the API said of it.
    assert (event.signature_ok, event.verdict, event.outcome) == (False, "unknown", "unconfirmed")
    assert event.processed_at is not None
    assert Order.get_by_id(order_id).status == "pending" and due_deliveries().count() == 0  # not tried again


def test_a_delivery_whose_confirming_fetch_fails_is_tried_again_by_its_job_and_settles(money):
    order_id = buy(money, "yookassa")["orderId"]
    money.yookassa.set_faults(fail_rate=1.0)  # the API answers 5xx to every call
    pay(money, "yookassa", order_id)
    assert [d["status"] for d in money.yookassa.deliveries()] == [200]
    assert settle_deliveries() == ["provider_unavailable"]
    job = delivery_jobs().get()
    assert (job.state, job.attempt) == ("retryable", 1) and Order.get_by_id(order_id).status == "pending"
    money.yookassa.clear_faults()
    make_due(job.id)
    assert settle_deliveries() == ["settled"]
    assert Job.get_by_id(job.id).state == "completed" and Order.get_by_id(order_id).status == "paid"


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_wrong_amount_settles_nothing_and_raises_one_notice(money, provider):
    order_id = buy(money, provider)["orderId"]
    money.fake(provider).set_faults(wrong_amount_rate=1.0, webhook_duplicate_rate=1.0)
    pay(money, provider, order_id)
    assert [d["status"] for d in money.fake(provider).deliveries()] == [200, 200]
    assert sorted(settle_deliveries()) == ["amount_mismatch", "replayed"]
    assert Order.get_by_id(order_id).status == "pending"
    assert settled_counts() == {"ledger": 0, "entitlements": 0, "jobs": 0, "paid events": 0}
    notices = list(OperatorNotice.select().where(OperatorNotice.kind == payments.NOTICE_PAYMENT_MISMATCH))
    assert len(notices) == 1
    assert json.loads(notices[0].payload)["orderId"] == order_id
    assert intent_of(order_id).status == "failed"


def test_a_payment_for_an_unknown_order_answers_200_with_a_notice(money):
    body = json.dumps(
        {
            "update_id": 9001,
            "update_type": "invoice_paid",
            "request_date": "2026-12-01T10:00:00.000Z",
            "payload": {
                "invoice_id": 777,
                "status": "paid",
                "currency_type": "fiat",
                "fiat": "RUB",
                "amount": "199",
                "payload": json.dumps({"order_id": "424242"}),
                "hash": "IVx",
                "created_at": "2026-12-01T10:00:00.000Z",
            },
        }  # fmt: skip
    ).encode()
    answer = money.webhook("cryptobot", body, {"crypto-pay-api-signature": sign(CRYPTOBOT_TOKEN, body)})
    assert (answer.status_code, answer.json()) == (200, {"outcome": "accepted"})
    assert settle_deliveries() == ["unknown_order"]
    assert OperatorNotice.get().kind == payments.NOTICE_PAYMENT_UNKNOWN_ORDER
    assert settled_counts()["ledger"] == 0


def test_an_oversize_body_is_a_413_and_nothing_is_written(money):
    body = b'{"update_id": 1, "pad": "' + b"x" * (64 * 1024) + b'"}'
    for provider in PROVIDERS:
        answer = money.webhook(provider, body)
        assert (answer.status_code, answer.json()["code"]) == (413, "body_too_large")
        chunked = money.webhook(provider, iter([body[:1000], body[1000:]]))
        assert chunked.status_code == 413
    assert ProviderWebhookEvent.select().count() == 0


def test_a_provider_this_shop_has_not_configured_is_a_404_and_nothing_is_written(database):
    with serving() as web:
        answer = requests.post(web + "/v1/webhooks/yookassa", data=b"{}", timeout=10)
    assert (answer.status_code, answer.json()["code"]) == (404, "provider_not_configured")
    assert ProviderWebhookEvent.select().count() == 0


# -- maintenance --------------------------------------------------------------------------------------------


def test_in_maintenance_checkout_is_refused_and_webhooks_still_settle(money):
    order_id = buy(money, "cryptobot")["orderId"]
    maintenance.set_mode(True, "panel upgrade", actor="test")
    customer = commerce.customer("Bob")
    refused = money.checkout(
        customerId=customer.id,
        kind="purchase",
        provider="yookassa",
        currency="RUB",
        planId=Order.get_by_id(order_id).plan_id,
        requestId="m",
    )
    assert (refused.status_code, refused.json()["code"]) == (503, "maintenance_active")
    assert Order.select().where(Order.customer == customer.id).count() == 0
    pay(money, "cryptobot", order_id)
    assert settle_deliveries() == ["settled"]
    assert Order.get_by_id(order_id).status == "paid"


# -- what never leaks ---------------------------------------------------------------------------------------

CARD = "4111111111111111"
PAGES = ("/panel/system/operations", "/panel/system/drift", "/panel/system/outbox", "/panel/system/queue")


def test_a_provider_secret_and_a_card_number_in_a_webhook_appear_in_no_answer_log_page_or_notice(money, caplog):
    import logging

    caplog.set_level(logging.DEBUG)
    order_id = buy(money, "cryptobot")["orderId"]
    payment_id = intent_of(order_id).provider_payment_id
    answers = []
    for provider in PROVIDERS:
        planted = json.dumps({"type": "notification", "event": "payment.succeeded", "card": CARD,
                              "secret": CRYPTOBOT_TOKEN, "object": {"id": CARD, "number": CARD}}).encode()  # fmt: skip
        answers.append(money.webhook(provider, planted, {"crypto-pay-api-signature": CRYPTOBOT_TOKEN}))
    invoice = money.cryptobot.invoice(payment_id)
    body = json.dumps({"update_id": 5, "update_type": "invoice_paid", "payload": {
        **invoice, "status": "paid", "amount": "1", "comment": CARD, "secret": CRYPTOBOT_TOKEN}}).encode()  # fmt: skip
    answers.append(money.webhook("cryptobot", body, {"crypto-pay-api-signature": sign(CRYPTOBOT_TOKEN, body)}))
    assert [a.status_code for a in answers] == [400, 401, 200]  # malformed, bad signature, accepted
    assert settle_deliveries() == ["amount_mismatch"]
    cookie = session_of(money.web)
    pages = [requests.get(money.web + page, headers=cookie, timeout=10) for page in PAGES]
    assert [page.status_code for page in pages] == [200] * len(PAGES)
    texts = [a.text for a in answers + pages] + [r.getMessage() for r in caplog.records]
    texts += [n.payload for n in OperatorNotice.select()] + [e.payload for e in OutboxEvent.select()]
    texts += [str(j.errors) for j in Job.select()] + [str(o.last_error_code) for o in FulfillmentOperation.select()]
    for text in texts:
        assert CARD not in text and CRYPTOBOT_TOKEN not in text
    assert Customer.select().count() == 1
    assert Order.get_by_id(order_id).status == "pending"
