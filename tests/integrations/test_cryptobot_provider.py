"""SPEC 13.4, 12.2: the CryptoBot (Crypto Pay API) adapter against the fake Crypto Pay over real HTTP.

Invoices are created and fetched; webhooks are verified (HMAC-SHA256 keyed
with SHA-256 of the token, compared in constant time) before anything of them
is read; every fault is classified; there is no refund; no token leaks.
"""

import datetime
import hashlib
import hmac
import json
import logging
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from fakes.cryptobot import ROUTE_CREATE_INVOICE, FakeCryptoBot
from integrations.payments import (
    BAD_SIGNATURE,
    DETAIL_TIMEOUT,
    MALFORMED_WEBHOOK,
    PAYMENT_NOT_FOUND,
    PROVIDER_REJECTED,
    PROVIDER_UNAVAILABLE,
    REFUND_UNSUPPORTED,
    STATUS_EXPIRED,
    STATUS_PENDING,
    STATUS_SUCCEEDED,
    WEBHOOK_MAX_BYTES,
    ProviderError,
    WebhookRejected,
)
from integrations.payments import cryptobot as cryptobot_module
from integrations.payments.cryptobot import SIGNATURE_HEADER, CryptoBotProvider, webhook_signature
from security.redactor import redact
from tests.integrations.conftest import CLIENT_TIMEOUT_S, CRYPTOBOT_TOKEN

ROOT = Path(__file__).resolve().parents[2]
RETURN_URL = "https://t.me/omniflow_shop_bot"


def create(provider, order_id=42, amount_minor=19900, currency="RUB", return_url=RETURN_URL):
    return provider.create_payment(
        order_id=order_id,
        amount_minor=amount_minor,
        currency=currency,
        description=f"Order {order_id}",
        return_url=return_url,
        idempotence_key=f"order-{order_id}",
    )


def parse_time(text):
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))


def raised(fn, *args, **kwargs):
    with pytest.raises(ProviderError) as info:
        fn(*args, **kwargs)
    return info.value


def rejected(provider, body, headers):
    with pytest.raises(WebhookRejected) as info:
        provider.parse_webhook(body, headers)
    return info.value.code


# --- invoices ------------------------------------------------------------------


def test_an_order_priced_in_fiat_becomes_a_fiat_invoice_with_its_order_and_link(cryptobot, cryptobot_fake):
    payment = create(cryptobot, order_id=42, amount_minor=19900, currency="RUB")
    invoice = cryptobot_fake.invoice(payment.payment_id)
    assert (invoice["currency_type"], invoice["fiat"], invoice["amount"]) == ("fiat", "RUB", "199")
    assert (invoice["paid_btn_name"], invoice["paid_btn_url"]) == ("callback", RETURN_URL)
    assert (payment.status, payment.provider_status, payment.amount_minor, payment.currency, payment.order_id) == (
        STATUS_PENDING,
        "active",
        19900,
        "RUB",
        42,
    )
    assert payment.confirmation_url == invoice["bot_invoice_url"]
    assert cryptobot.fetch_payment(payment.payment_id) == payment


def test_an_order_priced_in_a_crypto_asset_becomes_a_crypto_invoice_exact_to_the_assets_precision(
    cryptobot, cryptobot_fake
):
    cases = (("USDT", 1_500_000_000, "1.5"), ("TON", 1, "0.000000001"), ("BTC", 12_345_678, "0.12345678"))
    for asset, amount_minor, text in cases:
        payment = create(cryptobot, amount_minor=amount_minor, currency=asset)
        invoice = cryptobot_fake.invoice(payment.payment_id)
        assert (invoice["currency_type"], invoice["asset"], invoice["amount"]) == ("crypto", asset, text)
        assert cryptobot.fetch_payment(payment.payment_id).amount_minor == amount_minor


def test_a_currency_crypto_pay_does_not_price_in_is_refused_before_anything_is_sent(cryptobot, cryptobot_fake):
    for currency in ("XTR", "JPY", "DOGECOIN"):
        with pytest.raises(ValueError):
            create(cryptobot, currency=currency)
    assert cryptobot_fake.stats()["calls"] == {}


def test_an_expired_invoice_is_expired(cryptobot, cryptobot_fake):
    payment = create(cryptobot)
    cryptobot_fake.expire(payment.payment_id)
    assert cryptobot.fetch_payment(payment.payment_id).status == STATUS_EXPIRED


def test_an_invoice_expires_with_its_order_after_thirty_minutes(cryptobot, cryptobot_fake):
    invoice = cryptobot_fake.invoice(create(cryptobot).payment_id)
    created, expires = (parse_time(invoice[key]) for key in ("created_at", "expiration_date"))
    assert expires - created == datetime.timedelta(minutes=30)


def test_an_unknown_invoice_is_payment_not_found(cryptobot):
    assert raised(cryptobot.fetch_payment, "424242").code == PAYMENT_NOT_FOUND


# --- faults ----------------------------------------------------------------------


def test_a_5xx_is_a_transient_provider_http_error_and_creates_nothing(cryptobot, cryptobot_fake):
    cryptobot_fake.set_faults(fail_rate=1.0)
    error = raised(create, cryptobot)
    assert (error.code, error.provider_error_code, error.transient) == ("provider_http_500", "INTERNAL_ERROR", True)
    assert cryptobot_fake.stats()["invoices"] == 0


def test_a_timeout_is_provider_unavailable(cryptobot, cryptobot_fake):
    cryptobot_fake.set_faults(timeout_rate=1.0, routes=[ROUTE_CREATE_INVOICE])
    error = raised(create, cryptobot)
    assert (error.code, error.detail, error.transient) == (PROVIDER_UNAVAILABLE, DETAIL_TIMEOUT, True)


def test_a_request_the_api_refuses_is_provider_rejected(cryptobot_fake):
    provider = CryptoBotProvider(CRYPTOBOT_TOKEN, api_url=cryptobot_fake.base_url, invoice_ttl_s=10**8)
    error = raised(create, provider)
    assert (error.code, error.status, error.provider_error_code) == (PROVIDER_REJECTED, 400, "EXPIRES_IN_INVALID")
    assert not error.transient


def test_a_wrong_token_is_provider_http_401_and_no_error_or_log_carries_the_token(cryptobot_fake, caplog):
    caplog.set_level(logging.DEBUG)
    wrong = "4242:AAwrongTokenThatMustNeverBePrinted"
    provider = CryptoBotProvider(wrong, api_url=cryptobot_fake.base_url)
    error = raised(create, provider)
    assert (error.code, error.provider_error_code) == ("provider_http_401", "UNAUTHORIZED")
    for text in (str(error), repr(error), repr(provider), caplog.text):
        assert wrong not in text
    assert wrong not in redact(f"token {wrong} failed")


def test_an_unreachable_api_is_provider_unavailable():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    provider = CryptoBotProvider("1:token-value", api_url=f"http://127.0.0.1:{port}", timeout=CLIENT_TIMEOUT_S)
    assert raised(provider.fetch_payment, "1").code == PROVIDER_UNAVAILABLE


# --- webhooks ----------------------------------------------------------------------


def test_a_paid_invoice_sends_a_signed_update_that_parses_as_a_signed_event(cryptobot, cryptobot_fake, receiver):
    payment = create(cryptobot, order_id=9, amount_minor=49900)
    cryptobot_fake.pay(payment.payment_id)
    body, headers = receiver.last()
    event = cryptobot.parse_webhook(body, headers)
    assert (event.event_type, event.payment_id, event.status, event.order_id, event.signed) == (
        "invoice_paid",
        payment.payment_id,
        STATUS_SUCCEEDED,
        9,
        True,
    )
    assert (event.amount_minor, event.currency) == (49900, "RUB")
    assert event.event_id == str(json.loads(body)["update_id"])
    assert cryptobot.fetch_payment(payment.payment_id).paid


def test_the_signature_is_hmac_sha256_of_the_raw_body_keyed_with_sha256_of_the_token(cryptobot):
    body = b'{"update_id": 1}'
    key = hashlib.sha256(CRYPTOBOT_TOKEN.encode()).digest()
    assert webhook_signature(CRYPTOBOT_TOKEN, body) == hmac.new(key, body, hashlib.sha256).hexdigest()
    assert cryptobot.signature_ok(body, hmac.new(key, body, hashlib.sha256).hexdigest())
    assert not cryptobot.signature_ok(body, hmac.new(CRYPTOBOT_TOKEN.encode(), body, hashlib.sha256).hexdigest())


def test_a_wrong_signature_is_refused_before_the_body_is_read(cryptobot, cryptobot_fake, receiver):
    cryptobot_fake.set_faults(webhook_bad_signature_rate=1.0)
    payment = create(cryptobot)
    cryptobot_fake.pay(payment.payment_id)
    body, headers = receiver.last()
    assert rejected(cryptobot, body, headers) == BAD_SIGNATURE
    # Not even a body that is not JSON gets further than the signature.
    assert rejected(cryptobot, b"not json at all", {SIGNATURE_HEADER: "0" * 64}) == BAD_SIGNATURE


def test_a_tampered_body_or_a_missing_or_odd_signature_is_a_bad_signature(cryptobot, cryptobot_fake, receiver):
    payment = create(cryptobot, amount_minor=19900)
    cryptobot_fake.pay(payment.payment_id)
    body, headers = receiver.last()
    signature = headers[SIGNATURE_HEADER]
    tampered = body.replace(b'"amount":"199"', b'"amount":"1"')
    assert tampered != body
    assert rejected(cryptobot, tampered, headers) == BAD_SIGNATURE
    for odd in (None, "", signature[:-1], signature + "0", "Ж" * 64, signature.replace(signature[0], "z", 1)):
        assert rejected(cryptobot, body, {} if odd is None else {SIGNATURE_HEADER: odd}) == BAD_SIGNATURE
    # The header name is case-insensitive, and the good signature still passes.
    assert cryptobot.parse_webhook(body, {SIGNATURE_HEADER.upper(): signature}).payment_id == payment.payment_id


def test_the_signature_is_compared_in_constant_time_on_the_whole_digest(cryptobot, monkeypatch):
    compared = []
    real = hmac.compare_digest

    def recording(a, b):
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr(cryptobot_module.hmac, "compare_digest", recording)
    body = b'{"update_id": 1}'
    good = webhook_signature(CRYPTOBOT_TOKEN, body)
    assert cryptobot.signature_ok(body, good)
    bad = ("f" if good[0] != "f" else "e") + good[1:]  # differs in the first character only
    assert not cryptobot.signature_ok(body, bad)
    assert compared == [(good.encode(), good.encode()), (good.encode(), bad.encode())]


def test_a_signed_body_that_is_not_an_invoice_paid_update_is_malformed(cryptobot):
    for update in (
        b"[]",
        b'{"update_id": 1, "update_type": "invoice_paid"}',
        b'{"update_id": "1", "update_type": "invoice_paid", "payload": {}}',
        b'{"update_id": 1, "update_type": "something_else", "payload": {}}',
        b'{"update_id": 1, "update_type": "invoice_paid", "payload": {"invoice_id": 1, "status": "paid"}}',
        json.dumps(
            {
                "update_id": 1,
                "update_type": "invoice_paid",
                "payload": {"invoice_id": 1, "status": "paid", "asset": "USDT", "amount": "0.0000000001"},
            }
        ).encode(),  # more places than Omniflow's USDT minor unit: refused, never rounded
    ):
        assert rejected(cryptobot, update, {SIGNATURE_HEADER: webhook_signature(CRYPTOBOT_TOKEN, update)}) == (
            MALFORMED_WEBHOOK
        )


def test_an_oversized_body_is_refused_as_malformed_even_when_signed(cryptobot):
    body = json.dumps({"update_id": 1, "padding": "x" * WEBHOOK_MAX_BYTES}).encode()
    assert rejected(cryptobot, body, {SIGNATURE_HEADER: webhook_signature(CRYPTOBOT_TOKEN, body)}) == MALFORMED_WEBHOOK


def test_a_lost_webhook_leaves_the_invoice_visible_to_a_poll(cryptobot, cryptobot_fake, receiver):
    cryptobot_fake.set_faults(webhook_lost_rate=1.0)
    payment = create(cryptobot)
    cryptobot_fake.pay(payment.payment_id)
    assert receiver.bodies() == []
    assert [d["outcome"] for d in cryptobot_fake.deliveries()] == ["lost"]
    assert cryptobot.fetch_payment(payment.payment_id).status == STATUS_SUCCEEDED


def test_a_webhook_delivered_twice_is_the_same_update(cryptobot, cryptobot_fake, receiver):
    cryptobot_fake.set_faults(webhook_duplicate_rate=1.0)
    payment = create(cryptobot)
    cryptobot_fake.pay(payment.payment_id)
    (_, first, first_headers), (_, second, second_headers) = receiver.received
    assert first == second and first_headers[SIGNATURE_HEADER] == second_headers[SIGNATURE_HEADER]
    assert (
        cryptobot.parse_webhook(first, first_headers).event_id
        == cryptobot.parse_webhook(second, second_headers).event_id
    )
    body, headers = cryptobot_fake.signed_update(payment.payment_id)  # what a replay test sends again
    assert body == first and headers[SIGNATURE_HEADER] == first_headers[SIGNATURE_HEADER]


def test_an_invoice_paid_for_another_amount_shows_it_in_the_update_and_the_api(cryptobot, cryptobot_fake, receiver):
    cryptobot_fake.set_faults(wrong_amount_rate=1.0)
    payment = create(cryptobot, amount_minor=19900, currency="RUB")
    cryptobot_fake.pay(payment.payment_id)
    assert cryptobot.parse_webhook(*receiver.last()).amount_minor == 19899
    assert cryptobot.fetch_payment(payment.payment_id).amount_minor == 19899


# --- refunds, secrets, the fake's own surfaces ------------------------------------------


def test_there_is_no_refund_of_an_invoice_and_nothing_is_sent(cryptobot, cryptobot_fake):
    payment = create(cryptobot)
    cryptobot_fake.pay(payment.payment_id)
    calls = dict(cryptobot_fake.stats()["calls"])
    error = raised(
        cryptobot.refund, payment_id=payment.payment_id, amount_minor=19900, currency="RUB", idempotence_key="r"
    )
    assert error.code == REFUND_UNSUPPORTED and not cryptobot.supports_refunds
    assert cryptobot_fake.stats()["calls"] == calls


def test_the_token_is_registered_with_the_redactor(cryptobot_fake):
    # Short and plain enough that only its registration can remove it (no pattern of the redactor matches it).
    CryptoBotProvider("77:mango-papaya", api_url=cryptobot_fake.base_url)
    assert "mango-papaya" not in redact("something said 77:mango-papaya in passing")


def test_the_api_takes_get_with_a_query_and_post_with_a_form_too(cryptobot, cryptobot_fake):
    payment = create(cryptobot)
    headers = {"Crypto-Pay-API-Token": CRYPTOBOT_TOKEN}
    by_get = requests.get(
        f"{cryptobot_fake.base_url}/api/getInvoices", params={"invoice_ids": payment.payment_id}, headers=headers
    )
    by_form = requests.post(
        f"{cryptobot_fake.base_url}/api/getInvoices", data={"invoice_ids": payment.payment_id}, headers=headers
    )
    assert by_get.json() == by_form.json()
    assert by_get.json()["result"]["items"][0]["invoice_id"] == int(payment.payment_id)


def test_the_payers_page_pays_and_sends_the_payer_back(cryptobot, cryptobot_fake, receiver):
    payment = create(cryptobot)
    paid = requests.post(payment.confirmation_url + "/pay", allow_redirects=False, timeout=5)
    assert (paid.status_code, paid.headers["Location"]) == (303, RETURN_URL)
    assert cryptobot.parse_webhook(*receiver.last()).status == STATUS_SUCCEEDED


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_the_cli_serves_the_fake_without_a_database_and_never_prints_a_configured_token():
    port = free_port()
    token = "5150:AAcliTokenThatIsNeverPrinted"
    env = dict(os.environ, DATABASE_URL="postgresql://nobody@127.0.0.1:1/no_such_database", APP_CRYPTOBOT_TOKEN=token)
    process = subprocess.Popen(
        [sys.executable, "omniflow.py", "fake-cryptobot", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert f"http://127.0.0.1:{port}" in process.stdout.readline()
        provider = CryptoBotProvider(token, api_url=f"http://127.0.0.1:{port}")
        assert create(provider).status == STATUS_PENDING
    finally:
        process.terminate()
        out, err = process.communicate(timeout=10)
    assert process.returncode == 0, err
    assert token not in out + err


def test_a_fake_with_another_token_refuses_the_adapter():
    with FakeCryptoBot(token="1:one-token") as fake:
        provider = CryptoBotProvider("2:other-token", api_url=fake.base_url)
        assert raised(create, provider).code == "provider_http_401"
