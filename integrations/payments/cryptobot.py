"""The CryptoBot adapter: invoices, their status and signed webhooks over the Crypto Pay API (SPEC 13.4).

Calls: `createInvoice` (a payment), `getInvoices` (its status). Every call
carries the app's token in `Crypto-Pay-API-Token`; the base URL is
configurable (mainnet https://pay.crypt.bot, testnet
https://testnet-pay.crypt.bot, or the fake). An answer is
`{"ok": true, "result": ...}` or `{"ok": false, "error": {"code", "name"}}`;
`name` (e.g. UNAUTHORIZED) is kept as the error's provider_error_code.

An order priced in a crypto asset becomes a crypto invoice in that asset; one
priced in a fiat currency Crypto Pay knows (RUB, USD, EUR, ...) becomes a fiat
invoice the payer settles in any accepted asset. Either way the invoice's own
`amount` and `asset`/`fiat` are what a payment is checked against.

Webhooks (`invoice_paid` updates) are signed: the header
`crypto-pay-api-signature` is the hex HMAC-SHA256 of the raw body keyed with
SHA-256 of the API token, compared with hmac.compare_digest. A parsed event is
`signed=True`.

Crypto Pay has no refund of an invoice (its `transfer` sends coins from the
app's balance to a Telegram user, which is a payout, not a refund of this
payment): `refund` raises `refund_unsupported`, and a refund of a CryptoBot
payment goes to the customer's wallet (SPEC 13.10).

createInvoice takes no idempotency key: a create retried after a timeout could
make a second invoice. Every invoice carries the order id and the intent's
idempotence key in its `payload`, so before creating again for an intent whose
create may have reached Crypto Pay, `find_created_payment` pages through the
app's recent active invoices in the order's asset or fiat (getInvoices filters
by asset, fiat, ids and status only, newest first) and hands back the one whose
payload names that key: the retry reuses it. Should an invoice still be made
twice (one paid while the other was being looked for), both name the one
order, and whichever is paid settles it.
"""

import datetime
import hashlib
import hmac
import json
import re

from integrations.payments import (
    BAD_SIGNATURE,
    DETAIL_UNDECODABLE,
    MALFORMED_WEBHOOK,
    PAYMENT_NOT_FOUND,
    PROVIDER_REJECTED,
    PROVIDER_UNAVAILABLE,
    REFUND_UNSUPPORTED,
    STATUS_EXPIRED,
    STATUS_PENDING,
    STATUS_SUCCEEDED,
    SUBJECT_PAYMENT,
    WEBHOOK_MAX_BYTES,
    PaymentProvider,
    ProviderError,
    ProviderPayment,
    WebhookEvent,
    WebhookRejected,
    header,
    http_error_code,
    http_url,
    parse_order_id,
)
from integrations.payments.amounts import CRYPTO_ASSETS, FIAT_CURRENCIES, AmountError, to_decimal_text, to_minor
from integrations.payments.http import REQUEST_TIMEOUT_S, ProviderHttp
from security.redactor import register_secret

PROVIDER = "cryptobot"
MAINNET_API_URL = "https://pay.crypt.bot"
TESTNET_API_URL = "https://testnet-pay.crypt.bot"

TOKEN_HEADER = "Crypto-Pay-API-Token"
SIGNATURE_HEADER = "crypto-pay-api-signature"
UPDATE_INVOICE_PAID = "invoice_paid"

METHOD_CREATE_INVOICE = "createInvoice"
METHOD_GET_INVOICES = "getInvoices"

CURRENCY_TYPE_CRYPTO = "crypto"
CURRENCY_TYPE_FIAT = "fiat"
INVOICE_TTL_S = 30 * 60  # SPEC 13.2: a pending order expires after 30 minutes; its invoice with it
DESCRIPTION_MAX_LENGTH = 1024
PAID_BUTTON = "callback"  # shown after payment as "Return", opening the return URL

INVOICE_STATUSES = {"active": STATUS_PENDING, "paid": STATUS_SUCCEEDED, "expired": STATUS_EXPIRED}

PAYLOAD_ORDER_ID = "order_id"
PAYLOAD_IDEMPOTENCE_KEY = "idempotence_key"

INVOICE_PAGE = 100  # getInvoices' `count`: invoices per page when looking for one a lost create made
RECOVERY_PAGES = 10  # how far back that looks at most: the newest 1 000 active invoices in the currency
CLOCK_SLACK = datetime.timedelta(minutes=5)  # this server's clock against Crypto Pay's

_ERROR_NAME = re.compile(r"^[A-Z][A-Z0-9_]{0,63}$")


def webhook_signature(token, body):
    """The signature Crypto Pay puts on a webhook body: hex HMAC-SHA256(key = SHA-256(token), raw body)."""
    key = hashlib.sha256(token.encode("utf-8")).digest()
    return hmac.new(key, body, hashlib.sha256).hexdigest()


class CryptoBotProvider(PaymentProvider):
    name = PROVIDER
    webhooks_signed = True
    supports_refunds = False

    def __init__(self, token, api_url=MAINNET_API_URL, timeout=REQUEST_TIMEOUT_S, invoice_ttl_s=INVOICE_TTL_S):
        if not token:
            raise ValueError("a Crypto Pay API token is required")
        register_secret(token)
        self._token = token
        self._webhook_key = hashlib.sha256(token.encode("utf-8")).digest()
        self._http = ProviderHttp(PROVIDER, api_url, timeout)
        self._invoice_ttl_s = int(invoice_ttl_s)

    def __repr__(self):
        return f"CryptoBotProvider({self._http.origin!r})"

    # --- the interface -----------------------------------------------------

    def create_payment(self, *, order_id, amount_minor, currency, description, return_url, idempotence_key):
        if parse_order_id(order_id) is None:
            raise ValueError("order_id must be a positive integer")
        if isinstance(amount_minor, bool) or not isinstance(amount_minor, int) or amount_minor <= 0:
            raise ValueError("amount_minor must be a positive integer")
        text = str(description or "").strip()
        if not text or len(text) > DESCRIPTION_MAX_LENGTH:
            raise ValueError(f"the description must be 1-{DESCRIPTION_MAX_LENGTH} characters")
        key = str(idempotence_key or "")
        if not key or len(key) > 128:
            raise ValueError("the idempotence key must be 1-128 characters")
        body = {
            **_priced_in(currency),
            "amount": to_decimal_text(amount_minor, currency),
            "description": text,
            "payload": json.dumps({PAYLOAD_ORDER_ID: str(order_id), PAYLOAD_IDEMPOTENCE_KEY: key}),
            "expires_in": self._invoice_ttl_s,
            "allow_comments": False,
        }
        if return_url:
            body.update(paid_btn_name=PAID_BUTTON, paid_btn_url=http_url(return_url, "the return URL"))
        return self._invoice(self._call(METHOD_CREATE_INVOICE, body))

    def find_created_payment(self, *, order_id, currency, idempotence_key, created_after):
        """The active invoice whose payload names this order and key, looked for newest first back to
        `created_after` (less CLOCK_SLACK) and RECOVERY_PAGES pages at most; None when there is none."""
        priced_in = _priced_in(currency)
        query = {"status": "active", "count": INVOICE_PAGE}
        if "asset" in priced_in:
            query["asset"] = priced_in["asset"]
        else:
            query["fiat"] = priced_in["fiat"]
        since = created_after - CLOCK_SLACK
        for page in range(RECOVERY_PAGES):
            result = self._call(METHOD_GET_INVOICES, {**query, "offset": page * INVOICE_PAGE})
            items = result.get("items") if isinstance(result, dict) else None
            if not isinstance(items, list):
                raise self._undecodable()
            for item in items:
                if isinstance(item, dict) and _payload_names(item.get("payload"), order_id, idempotence_key):
                    return self._invoice(item)
            older = [_created_at(item) for item in items if isinstance(item, dict)]
            if len(items) < INVOICE_PAGE or any(when is not None and when < since for when in older):
                return None
        return None

    def fetch_payment(self, payment_id):
        invoice_id = _invoice_id(payment_id)
        result = self._call(METHOD_GET_INVOICES, {"invoice_ids": str(invoice_id)})
        items = result.get("items") if isinstance(result, dict) else None
        if not isinstance(items, list):
            raise self._undecodable()
        for item in items:
            if isinstance(item, dict) and item.get("invoice_id") == invoice_id:
                return self._invoice(item)
        raise ProviderError(PAYMENT_NOT_FOUND, provider=PROVIDER)

    def parse_webhook(self, body, headers):
        """A signed update → WebhookEvent(signed=True); bad_signature before anything of the body is read."""
        if not isinstance(body, (bytes, bytearray)) or len(body) > WEBHOOK_MAX_BYTES:
            raise WebhookRejected(MALFORMED_WEBHOOK, provider=PROVIDER)
        if not self.signature_ok(bytes(body), header(headers, SIGNATURE_HEADER)):
            raise WebhookRejected(BAD_SIGNATURE, provider=PROVIDER)
        return self.read_stored_webhook(body)

    def read_stored_webhook(self, body):
        """The update of a delivery whose signature parse_webhook verified when it came in."""
        if not isinstance(body, (bytes, bytearray)) or len(body) > WEBHOOK_MAX_BYTES:
            raise WebhookRejected(MALFORMED_WEBHOOK, provider=PROVIDER)
        try:
            update = json.loads(body)
            update_id = update["update_id"]
            invoice = update["payload"]
            valid = (
                update.get("update_type") == UPDATE_INVOICE_PAID
                and isinstance(update_id, int)
                and not isinstance(update_id, bool)
                and isinstance(invoice, dict)
            )
            if not valid:
                raise ValueError("not an invoice_paid update")
            payment = self._invoice(invoice)
        except (ValueError, TypeError, KeyError, UnicodeDecodeError, ProviderError):
            raise WebhookRejected(MALFORMED_WEBHOOK, provider=PROVIDER) from None
        return WebhookEvent(
            provider=PROVIDER,
            event_id=str(update_id),
            event_type=UPDATE_INVOICE_PAID,
            subject=SUBJECT_PAYMENT,
            payment_id=payment.payment_id,
            status=payment.status,
            amount_minor=payment.amount_minor,
            currency=payment.currency,
            order_id=payment.order_id,
            signed=True,
        )

    def signature_ok(self, body, signature):
        """True when `signature` is this app's signature of `body`, compared in constant time."""
        expected = hmac.new(self._webhook_key, body, hashlib.sha256).hexdigest().encode("ascii")
        presented = str(signature or "").strip().lower().encode("utf-8", "replace")
        return hmac.compare_digest(expected, presented)

    def refund(self, *, payment_id, amount_minor, currency, idempotence_key, description=None):
        raise ProviderError(REFUND_UNSUPPORTED, provider=PROVIDER)

    # --- internals ---------------------------------------------------------

    def _call(self, method, body):
        answer = self._http.send(
            "POST",
            f"/api/{method}",
            {TOKEN_HEADER: self._token, "Content-Type": "application/json", "Accept": "application/json"},
            json_body=body,
        )
        try:
            payload = json.loads(answer.body)
        except (ValueError, UnicodeDecodeError):
            payload = None
        if not isinstance(payload, dict):
            if 200 <= answer.status < 300:
                raise self._undecodable(answer.status)
            raise ProviderError(http_error_code(answer.status), provider=PROVIDER, status=answer.status)
        if payload.get("ok") is True and answer.status == 200:
            return payload.get("result")
        error = payload.get("error") if isinstance(payload.get("error"), dict) else {}
        name = error.get("name")
        name = name if isinstance(name, str) and _ERROR_NAME.match(name) else None
        code = error.get("code")
        # Crypto Pay answers an error with its HTTP status; a 200 saying ok=false has its code in the body.
        status = answer.status if answer.status != 200 else (code if isinstance(code, int) else 200)
        classified = PROVIDER_REJECTED if status == 400 else http_error_code(status)
        raise ProviderError(classified, provider=PROVIDER, status=status, provider_error_code=name)

    @staticmethod
    def _undecodable(status=None):
        return ProviderError(PROVIDER_UNAVAILABLE, provider=PROVIDER, status=status, detail=DETAIL_UNDECODABLE)

    def _invoice(self, invoice):
        """A Crypto Pay Invoice object → ProviderPayment; provider_unavailable(undecodable) when it is not one."""
        try:
            invoice_id = invoice["invoice_id"]
            if isinstance(invoice_id, bool) or not isinstance(invoice_id, int) or invoice_id <= 0:
                raise ValueError("invoice_id")
            status = INVOICE_STATUSES[invoice["status"]]
            if invoice.get("currency_type") == CURRENCY_TYPE_FIAT:
                currency = invoice["fiat"]
                if currency not in FIAT_CURRENCIES:
                    raise ValueError("fiat")
            else:
                currency = invoice["asset"]
                if currency not in CRYPTO_ASSETS:
                    raise ValueError("asset")
            amount_minor = to_minor(invoice["amount"], currency)
            url = invoice.get("bot_invoice_url") or invoice.get("pay_url")
        except (KeyError, TypeError, ValueError, AmountError):
            raise self._undecodable() from None
        return ProviderPayment(
            provider=PROVIDER,
            payment_id=str(invoice_id),
            status=status,
            provider_status=invoice["status"],
            amount_minor=amount_minor,
            currency=currency,
            order_id=_payload_order_id(invoice.get("payload")),
            confirmation_url=url if isinstance(url, str) else None,
        )


def _priced_in(currency):
    if currency in CRYPTO_ASSETS:
        return {"currency_type": CURRENCY_TYPE_CRYPTO, "asset": currency}
    if currency in FIAT_CURRENCIES:
        return {"currency_type": CURRENCY_TYPE_FIAT, "fiat": currency}
    raise ValueError("Crypto Pay takes no invoice in this currency")


def _invoice_id(payment_id):
    text = str(payment_id)
    if not (text.isascii() and text.isdigit()) or len(text) > 18 or int(text) <= 0:
        raise ValueError("a Crypto Pay invoice id is a positive integer")
    return int(text)


def _payload_names(payload, order_id, idempotence_key):
    """Whether an invoice's payload is the one create_payment wrote for this order and key."""
    try:
        data = json.loads(payload) if isinstance(payload, str) else None
    except ValueError:
        return False
    return (
        isinstance(data, dict)
        and data.get(PAYLOAD_IDEMPOTENCE_KEY) == str(idempotence_key)
        and parse_order_id(data.get(PAYLOAD_ORDER_ID)) == parse_order_id(order_id)
    )


def _created_at(invoice):
    """An invoice's `created_at` as naive UTC (the database's timestamps), or None when unreadable."""
    try:
        when = datetime.datetime.fromisoformat(invoice["created_at"])
    except (KeyError, TypeError, ValueError):
        return None
    return when.astimezone(datetime.timezone.utc).replace(tzinfo=None) if when.tzinfo else when


def _payload_order_id(payload):
    """The order id this adapter put in an invoice's payload; None for any other payload."""
    if not isinstance(payload, str):
        return None
    try:
        data = json.loads(payload)
    except ValueError:
        return None
    return parse_order_id(data.get(PAYLOAD_ORDER_ID)) if isinstance(data, dict) else None
