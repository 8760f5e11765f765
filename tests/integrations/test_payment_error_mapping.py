"""SPEC 13.4, 12.2: corner cases of classifying provider answers, with the providers simulated by `responses`.

What no fake answers on purpose: a proxy's HTML error page, a redirect, an
oversized or undecodable answer, statuses the SDK has no exception for, and
provider texts that must never reach an error. The same adapters against the
fakes over real HTTP: test_yookassa_provider.py and test_cryptobot_provider.py.
"""

import json

import pytest
import requests
import responses

from integrations.payments import (
    DETAIL_OVERSIZED,
    DETAIL_REDIRECT,
    DETAIL_TRANSPORT,
    DETAIL_UNDECODABLE,
    PAYMENT_NOT_FOUND,
    PROVIDER_REJECTED,
    PROVIDER_UNAVAILABLE,
    ProviderError,
)
from integrations.payments.cryptobot import CryptoBotProvider
from integrations.payments.http import MAX_ANSWER_BYTES
from integrations.payments.yookassa import YooKassaProvider

YOOKASSA = "https://api.yookassa.example.test/v3"
CRYPTO_PAY = "https://pay.crypt.example.test"
PAYMENT_ID = "2d7c5f36-000f-5000-9000-1b0e3e7e5c5a"
SECRET = "live_sEcReT-value-that-must-stay-inside-0123"
TOKEN = "31337:AAtokenValueThatMustStayInside0123"


@pytest.fixture
def api():
    # The adapters send through their own transport adapter, which `responses` stands in for.
    with responses.RequestsMock(
        assert_all_requests_are_fired=False, target="integrations.transport.KeepAliveAdapter.send"
    ) as mock:
        yield mock


@pytest.fixture
def yookassa():
    return YooKassaProvider("506751", SECRET, api_url=YOOKASSA)


@pytest.fixture
def cryptobot():
    return CryptoBotProvider(TOKEN, api_url=CRYPTO_PAY)


def raised(fn, *args, **kwargs):
    with pytest.raises(ProviderError) as info:
        fn(*args, **kwargs)
    return info.value


def payment_json(**overrides):
    payment = {
        "id": PAYMENT_ID,
        "status": "succeeded",
        "paid": True,
        "amount": {"value": "199.00", "currency": "RUB"},
        "metadata": {"order_id": "42"},
        "created_at": "2026-12-01T10:00:00.000Z",
        "test": True,
    }
    payment.update(overrides)
    return payment


def invoice_json(**overrides):
    invoice = {"invoice_id": 7, "status": "paid", "currency_type": "crypto", "asset": "USDT", "amount": "1.5"}
    invoice.update(overrides)
    return invoice


# --- YooKassa ----------------------------------------------------------------------


def test_yookassa_an_html_error_page_from_a_proxy_is_provider_http_status_without_its_text(api, yookassa):
    api.get(f"{YOOKASSA}/payments/{PAYMENT_ID}", status=502, body=f"<html>Bad gateway {SECRET}</html>")
    error = raised(yookassa.fetch_payment, PAYMENT_ID)
    assert (error.code, error.status, error.provider_error_code, error.transient) == (
        "provider_http_502",
        502,
        None,
        True,
    )
    assert SECRET not in str(error) + repr(error)


@pytest.mark.parametrize(
    "status, code, transient",
    [(401, "provider_http_401", False), (403, "provider_http_403", False), (429, "provider_http_429", True),
     (500, "provider_http_500", True), (202, "provider_http_202", True), (409, "provider_http_409", False)],
)  # fmt: skip
def test_yookassa_each_error_status_maps_to_its_code(api, yookassa, status, code, transient):
    body = {"type": "error", "id": "e1", "code": "some_code", "description": f"details mentioning {SECRET}"}
    api.get(f"{YOOKASSA}/payments/{PAYMENT_ID}", status=status, json=body)
    error = raised(yookassa.fetch_payment, PAYMENT_ID)
    assert (error.code, error.status, error.transient) == (code, status, transient)
    assert "details" not in str(error) and SECRET not in repr(error)


def test_yookassa_400_is_rejected_and_404_not_found_with_the_providers_code_only(api, yookassa):
    api.post(f"{YOOKASSA}/refunds", status=400, json={"type": "error", "code": "invalid_request", "description": "x"})
    api.get(f"{YOOKASSA}/payments/{PAYMENT_ID}", status=404, json={"type": "error", "code": "not_found"})
    refused = raised(yookassa.refund, payment_id=PAYMENT_ID, amount_minor=100, currency="RUB", idempotence_key="k")
    assert (refused.code, refused.provider_error_code) == (PROVIDER_REJECTED, "invalid_request")
    missing = raised(yookassa.fetch_payment, PAYMENT_ID)
    assert (missing.code, missing.provider_error_code) == (PAYMENT_NOT_FOUND, "not_found")


def test_yookassa_a_provider_error_code_that_is_not_a_code_is_dropped(api, yookassa):
    api.get(f"{YOOKASSA}/payments/{PAYMENT_ID}", status=400, json={"type": "error", "code": f"Bearer {SECRET}"})
    error = raised(yookassa.fetch_payment, PAYMENT_ID)
    assert (error.code, error.provider_error_code) == (PROVIDER_REJECTED, None)


def test_yookassa_a_redirect_is_never_followed(api, yookassa):
    api.get(f"{YOOKASSA}/payments/{PAYMENT_ID}", status=302, headers={"Location": "https://elsewhere.test/steal"})
    error = raised(yookassa.fetch_payment, PAYMENT_ID)
    assert (error.code, error.detail) == (PROVIDER_UNAVAILABLE, DETAIL_REDIRECT)
    assert [call.request.url for call in api.calls] == [f"{YOOKASSA}/payments/{PAYMENT_ID}"]


@pytest.mark.parametrize(
    "body",
    [b"not json", b"[1, 2]", json.dumps(payment_json(status="exploded")).encode(),
     json.dumps(payment_json(amount={"value": "199.00"})).encode(),
     json.dumps(payment_json(amount={"value": "199.00", "currency": "XTR"})).encode(),
     json.dumps(payment_json(amount={"value": "12345678901234567.00", "currency": "RUB"})).encode(),
     json.dumps(payment_json(id="../../refunds")).encode()],
)  # fmt: skip
def test_yookassa_an_answer_that_is_not_a_payment_is_undecodable(api, yookassa, body):
    api.get(f"{YOOKASSA}/payments/{PAYMENT_ID}", status=200, body=body)
    error = raised(yookassa.fetch_payment, PAYMENT_ID)
    assert (error.code, error.detail) == (PROVIDER_UNAVAILABLE, DETAIL_UNDECODABLE)


def test_yookassa_an_oversized_answer_is_refused(api, yookassa):
    api.get(f"{YOOKASSA}/payments/{PAYMENT_ID}", status=200, body=b" " * (MAX_ANSWER_BYTES + 1))
    assert raised(yookassa.fetch_payment, PAYMENT_ID).detail == DETAIL_OVERSIZED


def test_yookassa_a_transport_error_is_unavailable(api, yookassa):
    api.get(f"{YOOKASSA}/payments/{PAYMENT_ID}", body=requests.ConnectionError("reset by peer"))
    error = raised(yookassa.fetch_payment, PAYMENT_ID)
    assert (error.code, error.detail) == (PROVIDER_UNAVAILABLE, DETAIL_TRANSPORT)


def test_yookassa_sends_the_idempotence_key_basic_auth_and_an_exact_amount(api, yookassa):
    api.post(f"{YOOKASSA}/payments", status=200, json=payment_json(status="pending"))
    yookassa.create_payment(
        order_id=42, amount_minor=1999, currency="RUB", description="Order 42",
        return_url="https://shop.example.test/paid", idempotence_key="order-42-1",
    )  # fmt: skip
    sent = api.calls[0].request
    assert sent.headers["Idempotence-Key"] == "order-42-1"
    assert sent.headers["Authorization"].startswith("Basic ")
    body = json.loads(sent.body)
    assert body["amount"] == {"value": "19.99", "currency": "RUB"}
    assert (body["capture"], body["metadata"]["order_id"]) == (True, "42")
    assert body["confirmation"] == {"type": "redirect", "return_url": "https://shop.example.test/paid"}


# --- Crypto Pay -----------------------------------------------------------------------


def test_cryptobot_ok_false_in_a_200_is_classified_by_the_code_in_its_body(api, cryptobot):
    api.post(f"{CRYPTO_PAY}/api/getInvoices", status=200, json={"ok": False, "error": {"code": 400, "name": "BAD"}})
    error = raised(cryptobot.fetch_payment, "7")
    assert (error.code, error.status, error.provider_error_code) == (PROVIDER_REJECTED, 400, "BAD")


def test_cryptobot_an_error_name_that_is_not_a_name_is_dropped(api, cryptobot):
    api.post(f"{CRYPTO_PAY}/api/getInvoices", status=401, json={"ok": False, "error": {"code": 401, "name": TOKEN}})
    error = raised(cryptobot.fetch_payment, "7")
    assert (error.code, error.provider_error_code) == ("provider_http_401", None)
    assert TOKEN not in str(error) + repr(error)


def test_cryptobot_a_non_json_error_is_provider_http_status(api, cryptobot):
    api.post(f"{CRYPTO_PAY}/api/getInvoices", status=503, body="<html>maintenance</html>")
    error = raised(cryptobot.fetch_payment, "7")
    assert (error.code, error.transient) == ("provider_http_503", True)


@pytest.mark.parametrize(
    "payload",
    [{"ok": True, "result": []}, {"ok": True, "result": {"items": "no"}},
     {"ok": True, "result": {"items": [invoice_json(status="refunded")]}},
     {"ok": True, "result": {"items": [invoice_json(asset="DOGECOIN")]}},
     {"ok": True, "result": {"items": [invoice_json(amount=1.5)]}},
     {"ok": True, "result": {"items": [invoice_json(amount="1.0000000001")]}}],
)  # fmt: skip
def test_cryptobot_an_answer_that_is_not_an_invoice_list_is_undecodable(api, cryptobot, payload):
    api.post(f"{CRYPTO_PAY}/api/getInvoices", status=200, json=payload)
    error = raised(cryptobot.fetch_payment, "7")
    assert (error.code, error.detail) == (PROVIDER_UNAVAILABLE, DETAIL_UNDECODABLE)


def test_cryptobot_a_list_without_the_invoice_asked_for_is_not_found(api, cryptobot):
    api.post(f"{CRYPTO_PAY}/api/getInvoices", status=200, json={"ok": True, "result": {"items": [invoice_json()]}})
    assert raised(cryptobot.fetch_payment, "8").code == PAYMENT_NOT_FOUND


def test_cryptobot_sends_the_token_header_and_no_refund_call(api, cryptobot):
    api.post(f"{CRYPTO_PAY}/api/getInvoices", status=200, json={"ok": True, "result": {"items": [invoice_json()]}})
    assert cryptobot.fetch_payment("7").amount_minor == 1_500_000_000
    sent = api.calls[0].request
    assert sent.headers["Crypto-Pay-API-Token"] == TOKEN
    assert json.loads(sent.body) == {"invoice_ids": "7"}
