"""SPEC 13.4, 12.2: the YooKassa adapter (through the official SDK) against the fake YooKassa over real HTTP.

Payments are created with an Idempotence-Key, fetched, refunded; notifications
are parsed as unsigned hints; every fault is classified; no credential leaks.
"""

import base64
import json
import logging
import os
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import requests
import yookassa

from fakes.yookassa import ROUTE_CREATE_PAYMENT, FakeYooKassa
from integrations.payments import (
    DETAIL_TIMEOUT,
    MALFORMED_WEBHOOK,
    PAYMENT_NOT_FOUND,
    PROVIDER_REJECTED,
    PROVIDER_UNAVAILABLE,
    STATUS_CANCELED,
    STATUS_PENDING,
    STATUS_SUCCEEDED,
    SUBJECT_REFUND,
    WEBHOOK_MAX_BYTES,
    ProviderError,
    WebhookRejected,
)
from integrations.payments.yookassa import YooKassaProvider
from security.redactor import redact
from tests.integrations.conftest import CLIENT_TIMEOUT_S, YOOKASSA_SECRET, YOOKASSA_SHOP_ID

ROOT = Path(__file__).resolve().parents[2]
RETURN_URL = "https://shop.example.test/paid"


def create(provider, order_id=42, amount_minor=19900, currency="RUB", key=None):
    return provider.create_payment(
        order_id=order_id,
        amount_minor=amount_minor,
        currency=currency,
        description=f"Order {order_id}",
        return_url=RETURN_URL,
        idempotence_key=key or f"order-{order_id}-{uuid.uuid4().hex[:8]}",
    )


def raised(fn, *args, **kwargs):
    with pytest.raises(ProviderError) as info:
        fn(*args, **kwargs)
    return info.value


# --- payments ----------------------------------------------------------------


def test_a_created_payment_is_pending_with_its_order_amount_and_confirmation_url(yookassa, yookassa_fake):
    payment = create(yookassa, order_id=42, amount_minor=19900)
    assert (payment.status, payment.provider_status, payment.amount_minor, payment.currency) == (
        STATUS_PENDING,
        "pending",
        19900,
        "RUB",
    )
    assert payment.order_id == 42
    assert payment.confirmation_url == f"{yookassa_fake.base_url}/checkout/{payment.payment_id}"
    assert yookassa_fake.payment(payment.payment_id)["metadata"]["order_id"] == "42"
    assert yookassa.fetch_payment(payment.payment_id) == payment


def test_the_same_idempotence_key_never_makes_a_second_payment(yookassa, yookassa_fake):
    first = create(yookassa, key="order-7-attempt-1", order_id=7)
    again = create(yookassa, key="order-7-attempt-1", order_id=7)
    assert again.payment_id == first.payment_id
    assert yookassa_fake.stats()["payments"] == 1
    assert yookassa_fake.stats()["calls"][ROUTE_CREATE_PAYMENT] == 2


def test_a_create_that_timed_out_is_retried_with_its_key_and_finds_the_one_payment(yookassa, yookassa_fake):
    yookassa_fake.set_faults(timeout_rate=1.0)
    error = raised(create, yookassa, key="order-8-attempt-1", order_id=8)
    assert (error.code, error.detail, error.transient) == (PROVIDER_UNAVAILABLE, DETAIL_TIMEOUT, True)
    assert yookassa_fake.stats()["payments"] == 1  # the fake did create it: only the answer was lost
    yookassa_fake.clear_faults()
    retried = create(yookassa, key="order-8-attempt-1", order_id=8)
    assert yookassa_fake.stats()["payments"] == 1
    assert retried.payment_id == yookassa_fake.payments()[0]["id"]


def test_a_5xx_is_a_transient_provider_http_error_and_creates_nothing(yookassa, yookassa_fake):
    yookassa_fake.set_faults(fail_rate=1.0)
    error = raised(create, yookassa)
    assert (error.code, error.status, error.provider_error_code) == ("provider_http_500", 500, "internal_server_error")
    assert error.transient
    assert yookassa_fake.stats()["payments"] == 0


def test_an_unknown_payment_is_payment_not_found(yookassa):
    error = raised(yookassa.fetch_payment, str(uuid.uuid4()))
    assert (error.code, error.status, error.transient) == (PAYMENT_NOT_FOUND, 404, False)


def test_a_request_the_api_refuses_is_provider_rejected(yookassa):
    pending = create(yookassa)
    error = raised(
        yookassa.refund, payment_id=pending.payment_id, amount_minor=100, currency="RUB", idempotence_key="r-1"
    )
    assert (error.code, error.status, error.provider_error_code) == (PROVIDER_REJECTED, 400, "invalid_request")
    assert not error.transient


def test_an_unreachable_api_is_provider_unavailable():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again: nothing listens there
    provider = YooKassaProvider("1", "secret-value", api_url=f"http://127.0.0.1:{port}/v3", timeout=CLIENT_TIMEOUT_S)
    assert raised(provider.fetch_payment, str(uuid.uuid4())).code == PROVIDER_UNAVAILABLE


def test_amounts_go_to_the_api_and_back_exactly_to_the_kopeck(yookassa, yookassa_fake):
    for amount_minor in (1, 10, 19999, 100_000_00, 999_999_999_999_99):
        payment = create(yookassa, amount_minor=amount_minor)
        assert payment.amount_minor == amount_minor
        expected = f"{amount_minor // 100}.{amount_minor % 100:02d}"
        assert yookassa_fake.payment(payment.payment_id)["amount"]["value"] == expected


def test_amounts_the_sdk_cannot_keep_exactly_are_refused_before_anything_is_sent(yookassa, yookassa_fake):
    for amount_minor, currency in ((10**15, "RUB"), (0, "RUB"), (-5, "RUB"), (100, "XTR"), (100, "USDT")):
        with pytest.raises(ValueError):
            create(yookassa, amount_minor=amount_minor, currency=currency)
    assert yookassa_fake.stats()["calls"] == {}


# --- notifications -------------------------------------------------------------


def test_a_succeeded_payment_notifies_and_the_notification_parses_as_an_unsigned_hint(
    yookassa, yookassa_fake, receiver
):
    payment = create(yookassa, order_id=5, amount_minor=49900)
    assert yookassa_fake.succeed(payment.payment_id) == RETURN_URL
    body, headers = receiver.last()
    event = yookassa.parse_webhook(body, headers)
    assert (event.event_type, event.payment_id, event.status, event.order_id) == (
        "payment.succeeded",
        payment.payment_id,
        STATUS_SUCCEEDED,
        5,
    )
    assert (event.amount_minor, event.currency, event.signed) == (49900, "RUB", False)
    assert event.event_id == f"payment.succeeded:{payment.payment_id}"
    assert yookassa.fetch_payment(payment.payment_id).paid


def test_a_forged_success_notification_is_contradicted_by_fetching_the_payment(yookassa, yookassa_fake, receiver):
    payment = create(yookassa)
    yookassa_fake.forge_notification(payment.payment_id)
    event = yookassa.parse_webhook(*receiver.last())
    assert event.status == STATUS_SUCCEEDED and not event.signed
    assert yookassa.fetch_payment(event.payment_id).status == STATUS_PENDING  # what the route settles on


def test_a_canceled_payment_notifies_canceled(yookassa, yookassa_fake, receiver):
    payment = create(yookassa)
    yookassa_fake.cancel(payment.payment_id)
    event = yookassa.parse_webhook(*receiver.last())
    assert (event.event_type, event.status) == ("payment.canceled", STATUS_CANCELED)
    assert yookassa.fetch_payment(payment.payment_id).status == STATUS_CANCELED


def test_a_lost_notification_leaves_the_payment_visible_to_a_poll(yookassa, yookassa_fake, receiver):
    yookassa_fake.set_faults(webhook_lost_rate=1.0)
    payment = create(yookassa)
    yookassa_fake.succeed(payment.payment_id)
    assert receiver.bodies() == []
    assert [d["outcome"] for d in yookassa_fake.deliveries()] == ["lost"]
    assert yookassa.fetch_payment(payment.payment_id).status == STATUS_SUCCEEDED


def test_a_notification_delivered_twice_carries_the_same_event_id(yookassa, yookassa_fake, receiver):
    yookassa_fake.set_faults(webhook_duplicate_rate=1.0)
    payment = create(yookassa)
    yookassa_fake.succeed(payment.payment_id)
    first, second = receiver.bodies()
    assert first == second
    assert yookassa.parse_webhook(first, {}).event_id == yookassa.parse_webhook(second, {}).event_id


def test_a_payment_completed_for_another_amount_shows_it_in_the_notification_and_the_api(
    yookassa, yookassa_fake, receiver
):
    yookassa_fake.set_faults(wrong_amount_rate=1.0)
    payment = create(yookassa, amount_minor=19900)
    yookassa_fake.succeed(payment.payment_id)
    assert yookassa.parse_webhook(*receiver.last()).amount_minor == 19899
    assert yookassa.fetch_payment(payment.payment_id).amount_minor == 19899


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"[]",
        b'{"type": "notification"}',
        b'{"type": "something", "event": "payment.succeeded", "object": {"id": "x"}}',
        b'{"type": "notification", "event": "payment.succeeded", "object": {}}',
        b'{"type": "notification", "event": "payment.succeeded", "object": {"id": "a/b", "status": "succeeded",'
        b' "amount": {"value": "1.00", "currency": "RUB"}}}',
        b'{"type": "notification", "event": "payment.succeeded", "object": {"id": "abc", "status": "lost",'
        b' "amount": {"value": "1.00", "currency": "RUB"}}}',
        b'{"type": "notification", "event": "payout.succeeded", "object": {"id": "abc"}}',
        b'{"type": "notification", "event": "payment.succeeded", "object": {"id": "abc", "status": "succeeded"}}',
    ],
)
def test_a_notification_that_is_not_one_is_refused_as_malformed(yookassa, body):
    with pytest.raises(WebhookRejected) as info:
        yookassa.parse_webhook(body, {"Content-Type": "application/json"})
    assert info.value.code == MALFORMED_WEBHOOK


def test_an_oversized_notification_is_refused_as_malformed(yookassa, yookassa_fake):
    payment = create(yookassa)
    yookassa_fake.succeed(payment.payment_id)
    body = yookassa_fake.notification(payment.payment_id)
    assert yookassa.parse_webhook(body, {}).status == STATUS_SUCCEEDED
    padded = body[:-1] + b"," + json.dumps({"padding": "x" * WEBHOOK_MAX_BYTES}).encode()[1:]
    with pytest.raises(WebhookRejected) as info:
        yookassa.parse_webhook(padded, {})
    assert info.value.code == MALFORMED_WEBHOOK


# --- refunds -------------------------------------------------------------------


def test_full_and_partial_refunds_go_through_the_api_and_notify(yookassa, yookassa_fake, receiver):
    payment = create(yookassa, amount_minor=30000)
    yookassa_fake.succeed(payment.payment_id)
    partial = yookassa.refund(
        payment_id=payment.payment_id, amount_minor=10000, currency="RUB", idempotence_key="refund-1"
    )
    assert (partial.payment_id, partial.status, partial.amount_minor) == (payment.payment_id, STATUS_SUCCEEDED, 10000)
    assert yookassa.fetch_payment(payment.payment_id).refunded_minor == 10000
    again = yookassa.refund(
        payment_id=payment.payment_id, amount_minor=10000, currency="RUB", idempotence_key="refund-1"
    )
    assert again.refund_id == partial.refund_id  # the same key: the same refund, not a second one
    rest = yookassa.refund(
        payment_id=payment.payment_id, amount_minor=20000, currency="RUB", idempotence_key="refund-2"
    )
    assert yookassa.fetch_payment(payment.payment_id).refunded_minor == 30000
    notices = [yookassa.parse_webhook(body, {}) for body in receiver.wait_for(3)[1:]]
    assert [(n.subject, n.refund_id, n.amount_minor) for n in notices] == [
        (SUBJECT_REFUND, partial.refund_id, 10000),
        (SUBJECT_REFUND, rest.refund_id, 20000),
    ]
    error = raised(
        yookassa.refund, payment_id=payment.payment_id, amount_minor=1, currency="RUB", idempotence_key="refund-3"
    )
    assert error.code == PROVIDER_REJECTED  # nothing left to refund


# --- configuration and secrets ---------------------------------------------------


def test_two_shops_in_one_process_each_use_their_own_credentials_and_no_global_configuration():
    with (
        FakeYooKassa(shop_id="111", secret_key="secret-one") as one,
        FakeYooKassa(shop_id="222", secret_key="secret-two") as two,
    ):
        first = YooKassaProvider("111", "secret-one", api_url=one.api_url)
        second = YooKassaProvider("222", "secret-two", api_url=two.api_url)
        a = create(first)
        b = create(second)
        assert (one.stats()["payments"], two.stats()["payments"]) == (1, 1)
        assert first.fetch_payment(a.payment_id).payment_id == a.payment_id
        assert raised(first.fetch_payment, b.payment_id).code == PAYMENT_NOT_FOUND
    assert (yookassa.Configuration.account_id, yookassa.Configuration.secret_key) == (None, None)
    assert yookassa.Configuration.api_url == "https://api.yookassa.ru/v3"


def test_wrong_credentials_are_provider_http_401_and_no_error_or_log_carries_a_secret(yookassa_fake, caplog):
    caplog.set_level(logging.DEBUG)
    wrong_secret = "test_wrong-secret-4711-abcdef"
    provider = YooKassaProvider(YOOKASSA_SHOP_ID, wrong_secret, api_url=yookassa_fake.api_url)
    error = raised(create, provider)
    assert (error.code, error.provider_error_code) == ("provider_http_401", "invalid_credentials")
    basic = base64.b64encode(f"{YOOKASSA_SHOP_ID}:{wrong_secret}".encode()).decode()
    for text in (str(error), repr(error), repr(provider), caplog.text):
        assert wrong_secret not in text and basic not in text
    assert wrong_secret not in redact(f"failed with {wrong_secret}")
    assert basic not in redact(f"header was {basic}")


def test_the_secret_key_is_registered_with_the_redactor(yookassa_fake):
    # Short and plain enough that only its registration can remove it (no pattern of the redactor matches it).
    YooKassaProvider("506751", "kiwi-banana-secret", api_url=yookassa_fake.api_url)
    assert "kiwi-banana-secret" not in redact("something said kiwi-banana-secret in passing")


# --- the fake's own surfaces ---------------------------------------------------------


def test_the_payers_page_pays_and_sends_the_payer_back(yookassa, yookassa_fake, receiver):
    payment = create(yookassa)
    page = requests.get(payment.confirmation_url, timeout=5)
    assert page.status_code == 200 and "Pay" in page.text
    paid = requests.post(payment.confirmation_url + "/pay", allow_redirects=False, timeout=5)
    assert (paid.status_code, paid.headers["Location"]) == (303, RETURN_URL)
    assert yookassa.fetch_payment(payment.payment_id).paid
    assert yookassa.parse_webhook(*receiver.last()).status == STATUS_SUCCEEDED


def test_the_control_side_over_http_needs_the_shops_credentials(yookassa, yookassa_fake):
    payment = create(yookassa)
    control = f"{yookassa_fake.base_url}/_fake/payments/{payment.payment_id}/succeed"
    assert requests.post(control, timeout=5).status_code == 401
    answer = requests.post(control, auth=(YOOKASSA_SHOP_ID, YOOKASSA_SECRET), timeout=5)
    assert answer.status_code == 200 and answer.json()["status"] == "succeeded"


def test_auto_pay_completes_a_new_payment_by_itself(receiver):
    with FakeYooKassa(webhook_url=receiver.url, auto_pay_seconds=0.2) as fake:
        provider = YooKassaProvider(fake.shop_id, fake.secret_key, api_url=fake.api_url)
        payment = create(provider)
        assert len(receiver.wait_for(1)) == 1
        assert provider.fetch_payment(payment.payment_id).paid


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_the_cli_serves_the_fake_without_a_database_and_never_prints_configured_credentials():
    port = free_port()
    env = dict(
        os.environ,
        DATABASE_URL="postgresql://nobody@127.0.0.1:1/no_such_database",
        APP_YOOKASSA_SHOP_ID="777001",
        APP_YOOKASSA_SECRET_KEY="test_cli-secret-0123456789",
    )
    process = subprocess.Popen(
        [sys.executable, "omniflow.py", "fake-yookassa", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert f"http://127.0.0.1:{port}/v3" in process.stdout.readline()
        provider = YooKassaProvider("777001", "test_cli-secret-0123456789", api_url=f"http://127.0.0.1:{port}/v3")
        assert create(provider).status == STATUS_PENDING
    finally:
        process.terminate()
        out, err = process.communicate(timeout=10)
    assert process.returncode == 0, err
    assert "test_cli-secret-0123456789" not in out + err
