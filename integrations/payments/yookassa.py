"""The YooKassa adapter: payments, status, notifications and refunds through the official SDK `yookassa` (SPEC 13.4).

The SDK's resources make every call (`Payment.create` with an
Idempotence-Key, `Payment.find_one`, `Refund.create`), its request models
validate and serialize what is sent, its response models read what comes
back, and its notification factory reads webhooks. Two things are this
module's own:

- **Per-shop configuration, no global state.** The SDK's resources build their
  API client from the process-wide `yookassa.Configuration` (shop id, secret
  key, API URL are class attributes there). Each YooKassaProvider instead
  hands the resources a client of its own (a subclass of the SDK's ApiClient,
  given to a per-instance subclass of each resource), so two shops in one
  process never share credentials and nothing of `Configuration` is read or
  written. The API URL is that client's `endpoint`: the real API by default,
  the fake in tests and the dev stack.
- **The transport.** The SDK's own ApiClient.execute sends with no timeout
  (Configuration.timeout is the back-off between its retries of a 202, not
  a socket timeout), follows redirects, logs bodies and headers through
  Configuration.logger when one is set, and turns a transport failure into an
  AttributeError. The client here sends through integrations/payments/http.py
  instead: one deadline, a capped answer, no redirect, failures classified.
  HTTP errors are raised as the SDK's own exception classes and mapped to
  the classified codes in one table (`_classified`).

YooKassa does not sign notifications. An event parsed here is `signed=False`:
the webhook route fetches the payment (`fetch_payment`) and settles on what
the API says, never on the notification (as YooKassa recommends).

Amounts: the SDK's Amount model passes a value through float and two decimal
places. That is exact for up to 15 significant digits, so this adapter takes
only two-decimal currencies and amounts below 10**15 minor units, both ways.
"""

import base64
import json
import re

from yookassa import Payment, Refund
from yookassa.client import ApiClient
from yookassa.domain.common import RequestObject, UserAgent
from yookassa.domain.exceptions import (
    ApiError,
    BadRequestError,
    ForbiddenError,
    GoneError,
    InternalServerError,
    NotFoundError,
    ResponseProcessingError,
    TooManyRequestsError,
    UnauthorizedError,
)
from yookassa.domain.notification import WebhookNotificationFactory
from yookassa.domain.response import PaymentResponse, RefundResponse

from integrations.payments import (
    DETAIL_UNDECODABLE,
    MALFORMED_WEBHOOK,
    PAYMENT_NOT_FOUND,
    PROVIDER_REJECTED,
    PROVIDER_UNAVAILABLE,
    STATUS_CANCELED,
    STATUS_PENDING,
    STATUS_SUCCEEDED,
    SUBJECT_PAYMENT,
    SUBJECT_REFUND,
    WEBHOOK_MAX_BYTES,
    PaymentProvider,
    ProviderError,
    ProviderPayment,
    ProviderRefund,
    WebhookEvent,
    WebhookRejected,
    http_error_code,
    http_url,
    parse_order_id,
)
from integrations.payments.amounts import AmountError, exponent, to_decimal_text, to_minor
from integrations.payments.http import REQUEST_TIMEOUT_S, ProviderHttp
from security.redactor import register_secret

PROVIDER = "yookassa"
DEFAULT_API_URL = "https://api.yookassa.ru/v3"

EVENT_PAYMENT_SUCCEEDED = "payment.succeeded"
EVENT_PAYMENT_CANCELED = "payment.canceled"
EVENT_PAYMENT_WAITING_FOR_CAPTURE = "payment.waiting_for_capture"
EVENT_REFUND_SUCCEEDED = "refund.succeeded"
PAYMENT_EVENTS = (EVENT_PAYMENT_SUCCEEDED, EVENT_PAYMENT_CANCELED, EVENT_PAYMENT_WAITING_FOR_CAPTURE)
NOTIFICATION_TYPE = "notification"

METADATA_ORDER_ID = "order_id"
DESCRIPTION_MAX_LENGTH = 128  # YooKassa's limit on a payment's description
REFUND_DESCRIPTION_MAX_LENGTH = 250  # and on a refund's comment
IDEMPOTENCE_KEY_MAX_LENGTH = 64  # YooKassa's limit on Idempotence-Key
MAX_AMOUNT_MINOR = 10**15 - 1  # 15 significant digits: what the SDK's float step keeps exactly
AMOUNT_EXPONENT = 2  # the SDK's Amount keeps two decimal places

# Payment and refund statuses (YooKassa's words → the intent's). A payment is
# created with capture=true, so waiting_for_capture is a passing state.
PAYMENT_STATUSES = {
    "pending": STATUS_PENDING,
    "waiting_for_capture": STATUS_PENDING,
    "succeeded": STATUS_SUCCEEDED,
    "canceled": STATUS_CANCELED,
}
REFUND_STATUSES = {"pending": STATUS_PENDING, "succeeded": STATUS_SUCCEEDED, "canceled": STATUS_CANCELED}

# The SDK's exception for each HTTP status it names (the SDK's client raises the same ones).
SDK_ERRORS = {
    error.HTTP_CODE: error
    for error in (
        BadRequestError,
        UnauthorizedError,
        ForbiddenError,
        NotFoundError,
        GoneError,
        TooManyRequestsError,
        InternalServerError,
        ResponseProcessingError,
    )
}

_ID = re.compile(r"^[0-9A-Za-z][0-9A-Za-z_-]{0,63}$")  # YooKassa ids: 36-character UUID-like text
_ERROR_CODE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")  # invalid_request, not_found, ...


class _ShopClient(ApiClient):
    """The SDK's API client for one shop: this shop's credentials and endpoint, sent through ProviderHttp."""

    def __init__(self, http, shop_id, secret_key):
        # Not ApiClient.__init__: it reads the process-wide Configuration.
        self.endpoint = http.base_url
        self.shop_id = shop_id
        self.shop_password = secret_key
        self.auth_token = None
        self.user_agent = UserAgent()
        self._http = http

    def __repr__(self):
        return f"_ShopClient({self._http.origin!r})"

    def request(self, method="", path="", query_params=None, headers=None, body=None):
        if isinstance(body, RequestObject):
            body.validate()
            body = dict(body)
        answer = self._http.send(
            str(method).upper(), path, self.prepare_request_headers(headers), json_body=body, params=query_params
        )
        try:
            payload = json.loads(answer.body)
        except (ValueError, UnicodeDecodeError):
            payload = None
        if answer.status == 200:
            if not isinstance(payload, dict):
                raise ProviderError(PROVIDER_UNAVAILABLE, provider=PROVIDER, status=200, detail=DETAIL_UNDECODABLE)
            return payload
        sdk_error = SDK_ERRORS.get(answer.status)
        if sdk_error is None or not isinstance(payload, dict):
            raise ProviderError(http_error_code(answer.status), provider=PROVIDER, status=answer.status)
        raise sdk_error(payload)


def _bound(resource, client):
    """The SDK resource class with this shop's client: its __init__ would build one from the global Configuration."""

    def __init__(self):
        self.client = client

    return type(resource.__name__, (resource,), {"__init__": __init__})


def _classified(error):
    """An SDK exception → ProviderError with the classified code; the provider's error code kept, never its text."""
    content = error.content if isinstance(error.content, dict) else {}
    code = content.get("code")
    provider_code = code if isinstance(code, str) and _ERROR_CODE.match(code) else None
    status = error.HTTP_CODE
    if isinstance(error, BadRequestError):
        classified = PROVIDER_REJECTED
    elif isinstance(error, NotFoundError):
        classified = PAYMENT_NOT_FOUND
    else:
        classified = http_error_code(status)
    return ProviderError(classified, provider=PROVIDER, status=status, provider_error_code=provider_code)


def _undecodable():
    return ProviderError(PROVIDER_UNAVAILABLE, provider=PROVIDER, detail=DETAIL_UNDECODABLE)


def _amount_minor(amount):
    """The SDK's Amount → (minor units, currency); AmountError unless exact and within the SDK's exact range."""
    if amount is None or amount.value is None or not amount.currency:
        raise AmountError("no amount")
    currency = str(amount.currency)
    minor = to_minor(amount.value, currency)
    if exponent(currency) != AMOUNT_EXPONENT or minor > MAX_AMOUNT_MINOR:
        raise AmountError("an amount outside what the SDK keeps exactly")
    return minor, currency


class YooKassaProvider(PaymentProvider):
    name = PROVIDER
    webhooks_signed = False
    supports_refunds = True
    max_amount_minor = MAX_AMOUNT_MINOR

    def __init__(self, shop_id, secret_key, api_url=DEFAULT_API_URL, timeout=REQUEST_TIMEOUT_S):
        shop_id = str(shop_id or "").strip()
        if not shop_id:
            raise ValueError("a YooKassa shop id is required")
        if not secret_key:
            raise ValueError("a YooKassa secret key is required")
        register_secret(secret_key)
        # The Authorization header carries both, base64-encoded: a secret of its own.
        register_secret(base64.b64encode(f"{shop_id}:{secret_key}".encode()).decode("ascii"))
        self._http = ProviderHttp(PROVIDER, api_url, timeout)
        client = _ShopClient(self._http, shop_id, secret_key)
        self._payments = _bound(Payment, client)
        self._refunds = _bound(Refund, client)

    def __repr__(self):
        return f"YooKassaProvider({self._http.origin!r})"

    # --- the interface -----------------------------------------------------

    def create_payment(self, *, order_id, amount_minor, currency, description, return_url, idempotence_key):
        if parse_order_id(order_id) is None:
            raise ValueError("order_id must be a positive integer")
        params = {
            "amount": self._amount(amount_minor, currency),
            "capture": True,
            "confirmation": {"type": "redirect", "return_url": http_url(return_url, "the return URL")},
            "description": _description(description),
            "metadata": {METADATA_ORDER_ID: str(order_id)},
        }
        key = _idempotence_key(idempotence_key)
        return self._payment(self._call(lambda: self._payments.create(params, key)))

    def fetch_payment(self, payment_id):
        payment_id = _provider_id(payment_id)
        return self._payment(self._call(lambda: self._payments.find_one(payment_id)))

    def refund(self, *, payment_id, amount_minor, currency, idempotence_key, description=None):
        params = {"payment_id": _provider_id(payment_id), "amount": self._amount(amount_minor, currency)}
        if description:
            params["description"] = str(description)[:REFUND_DESCRIPTION_MAX_LENGTH]
        key = _idempotence_key(idempotence_key)
        return self._refund(self._call(lambda: self._refunds.create(params, key)))

    def fetch_refund(self, refund_id):
        """A refund as YooKassa holds it now (one it answered `pending` becomes `succeeded` or `canceled`)."""
        refund_id = _provider_id(refund_id)
        return self._refund(self._call(lambda: self._refunds.find_one(refund_id)))

    def parse_webhook(self, body, headers):
        """A notification → WebhookEvent(signed=False). Nothing here proves it came from YooKassa."""
        if not isinstance(body, (bytes, bytearray)) or len(body) > WEBHOOK_MAX_BYTES:
            raise _malformed()
        try:
            data = json.loads(body)
            notification = WebhookNotificationFactory().create(data)
        except (ValueError, TypeError, UnicodeDecodeError, AttributeError, KeyError):
            raise _malformed() from None
        if data.get("type") != NOTIFICATION_TYPE:
            raise _malformed()
        event = data.get("event")
        try:
            if event in PAYMENT_EVENTS:
                payment = self._payment(notification.object)
                return WebhookEvent(
                    provider=PROVIDER,
                    event_id=f"{event}:{payment.payment_id}",
                    event_type=event,
                    subject=SUBJECT_PAYMENT,
                    payment_id=payment.payment_id,
                    status=payment.status,
                    amount_minor=payment.amount_minor,
                    currency=payment.currency,
                    order_id=payment.order_id,
                    signed=False,
                )
            if event == EVENT_REFUND_SUCCEEDED:
                refund = self._refund(notification.object)
                return WebhookEvent(
                    provider=PROVIDER,
                    event_id=f"{event}:{refund.refund_id}",
                    event_type=event,
                    subject=SUBJECT_REFUND,
                    payment_id=refund.payment_id,
                    status=refund.status,
                    amount_minor=refund.amount_minor,
                    currency=refund.currency,
                    order_id=None,
                    signed=False,
                    refund_id=refund.refund_id,
                )
        except ProviderError:
            raise _malformed() from None
        raise _malformed()

    # --- internals ---------------------------------------------------------

    @staticmethod
    def _amount(amount_minor, currency):
        if exponent(currency) != AMOUNT_EXPONENT:
            raise ValueError("YooKassa amounts are in a currency with two decimal places")
        if isinstance(amount_minor, bool) or not isinstance(amount_minor, int):
            raise ValueError("amount_minor must be an integer")
        if not 0 < amount_minor <= MAX_AMOUNT_MINOR:
            raise ValueError("amount_minor must be positive and below 10**15")
        return {"value": to_decimal_text(amount_minor, currency), "currency": currency}

    @staticmethod
    def _call(fn):
        try:
            return fn()
        except ProviderError:
            raise
        except ApiError as error:
            raise _classified(error) from None
        except (ValueError, TypeError, AttributeError, KeyError):
            # The SDK's models refused an answer's shape (a request's shape is checked before sending).
            raise _undecodable() from None

    @staticmethod
    def _payment(response):
        if not isinstance(response, PaymentResponse):
            raise _undecodable()
        status = PAYMENT_STATUSES.get(response.status)
        payment_id = response.id
        if status is None or not isinstance(payment_id, str) or not _ID.match(payment_id):
            raise _undecodable()
        try:
            amount_minor, currency = _amount_minor(response.amount)
            refunded_minor = 0
            if response.refunded_amount is not None and response.refunded_amount.value is not None:
                refunded_minor, refunded_currency = _amount_minor(response.refunded_amount)
                if refunded_currency != currency:
                    raise AmountError("refunded in another currency")
        except AmountError:
            raise _undecodable() from None
        metadata = response.metadata if isinstance(response.metadata, dict) else {}
        confirmation_url = getattr(response.confirmation, "confirmation_url", None)
        return ProviderPayment(
            provider=PROVIDER,
            payment_id=payment_id,
            status=status,
            provider_status=response.status,
            amount_minor=amount_minor,
            currency=currency,
            order_id=parse_order_id(metadata.get(METADATA_ORDER_ID)),
            confirmation_url=confirmation_url if isinstance(confirmation_url, str) else None,
            refunded_minor=refunded_minor,
        )

    @staticmethod
    def _refund(response):
        if not isinstance(response, RefundResponse):
            raise _undecodable()
        status = REFUND_STATUSES.get(response.status)
        ids_ok = all(isinstance(value, str) and _ID.match(value) for value in (response.id, response.payment_id))
        if status is None or not ids_ok:
            raise _undecodable()
        try:
            amount_minor, currency = _amount_minor(response.amount)
        except AmountError:
            raise _undecodable() from None
        return ProviderRefund(
            provider=PROVIDER,
            refund_id=response.id,
            payment_id=response.payment_id,
            status=status,
            amount_minor=amount_minor,
            currency=currency,
        )


def _malformed():
    return WebhookRejected(MALFORMED_WEBHOOK, provider=PROVIDER)


def _provider_id(value):
    if not isinstance(value, str) or not _ID.match(value):
        raise ValueError("not a YooKassa id")
    return value


def _idempotence_key(value):
    key = str(value or "")
    if not key or len(key) > IDEMPOTENCE_KEY_MAX_LENGTH or not key.isascii() or not key.isprintable():
        raise ValueError(f"the idempotence key must be 1-{IDEMPOTENCE_KEY_MAX_LENGTH} printable ASCII characters")
    return key


def _description(value):
    text = str(value or "").strip()
    if not text or len(text) > DESCRIPTION_MAX_LENGTH:
        raise ValueError(f"the description must be 1-{DESCRIPTION_MAX_LENGTH} characters")
    return text
