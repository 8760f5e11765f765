"""A fake Crypto Pay (CryptoBot): a real HTTP server speaking the documented subset of the API, with signed webhooks.

Methods (GET with a query string, or POST with JSON or a form; header
`Crypto-Pay-API-Token`): /api/getMe, /api/createInvoice, /api/getInvoices
(newest first, filtered by asset, fiat, invoice_ids and status, paged by
offset and count as Crypto Pay pages them).
Answers are `{"ok": true, "result": ...}`, errors `{"ok": false, "error":
{"code": <HTTP status>, "name": "..."}}` with that HTTP status.

An invoice starts `active` and becomes `paid` through the control side
(`pay(id)` in Python, POST /_fake/invoices/{id}/pay, the Pay button of
/checkout/{id}, or `auto_pay_seconds`), or `expired` (`expire(id)`, or its
`expires_in` passing). Paying POSTs an `invoice_paid` update to the webhook
URL, signed as Crypto Pay signs it: header `crypto-pay-api-signature` = hex
HMAC-SHA256 of the body keyed with SHA-256 of the app's token.

Faults: fail (500, nothing done) and timeout (done, never
answered) per API
call; webhook_lost, webhook_duplicate (the same update twice),
webhook_bad_signature (signed with another key) and wrong_amount (the invoice
is paid 0.01 short of what it was created for) per payment.

Run it with `python omniflow.py fake-cryptobot`.
"""

import datetime
import hashlib
import hmac
import json
import os
import re
import secrets
from decimal import Decimal, InvalidOperation
from pathlib import Path
from urllib.parse import parse_qsl

from fakes.provider_server import COMMON_WEBHOOK_FAULTS, FakeProvider, Reply, iso, utcnow

DEV_TOKEN = "1234:AAomniflowFakeCryptoPayDevToken"
DEFAULT_PORT = 3030

ROUTE_GET_ME = "getMe"
ROUTE_CREATE_INVOICE = "createInvoice"
ROUTE_GET_INVOICES = "getInvoices"
METHODS = (ROUTE_GET_ME, ROUTE_CREATE_INVOICE, ROUTE_GET_INVOICES)

# Crypto Pay's assets with their getCurrencies `decimals`, and its fiat currencies.
ASSETS = {"USDT": 18, "USDC": 18, "TON": 9, "BTC": 8, "ETH": 18, "LTC": 8, "BNB": 18, "TRX": 6, "JET": 9}
FIATS = (
    "USD", "EUR", "RUB", "BYN", "UAH", "GBP", "CNY", "KZT", "UZS", "GEL", "TRY", "AMD", "THB", "INR",
    "BRL", "IDR", "AZN", "AED", "PLN", "ILS", "KGS", "TJS",
)  # fmt: skip
FIAT_DECIMALS = 8
PAID_BUTTONS = ("viewItem", "openChannel", "openBot", "callback")
DESCRIPTION_MAX_LENGTH = 1024
PAYLOAD_MAX_BYTES = 4096
EXPIRES_IN_MAX = 2678400
WRONG_AMOUNT_SHORTFALL = Decimal("0.01")  # the wrong_amount fault: paid one hundredth of a unit short
FIAT_RATE = Decimal(100)  # the fake's fixed price of one paid asset unit in any fiat
_AMOUNT = re.compile(r"^[0-9]{1,20}(?:\.[0-9]{1,18})?$")


def _fail(status, name):
    return Reply(status, {"ok": False, "error": {"code": status, "name": name}})


def sign(token, body):
    """Crypto Pay's webhook signature of `body` for the app with this token."""
    return hmac.new(hashlib.sha256(token.encode("utf-8")).digest(), body, hashlib.sha256).hexdigest()


def default_token():
    """(token, is the dev token) from APP_CRYPTOBOT_TOKEN in the environment or .env, else the development token."""
    token = os.environ.get("APP_CRYPTOBOT_TOKEN", "").strip()
    dotenv_file = Path(__file__).resolve().parent.parent / ".env"
    if not token and dotenv_file.exists():
        from dotenv import dotenv_values

        token = (dotenv_values(dotenv_file).get("APP_CRYPTOBOT_TOKEN") or "").strip()
    return (token, False) if token else (DEV_TOKEN, True)


class FakeCryptoBot(FakeProvider):
    """The fake. start() serves it on a background thread; base_url is what the adapter is given."""

    server_name = "FakeCryptoPay"
    thread_name = "fake-cryptobot"
    webhook_faults = (*COMMON_WEBHOOK_FAULTS, "webhook_bad_signature")

    def __init__(self, token=DEV_TOKEN, **kwargs):
        if not token:
            raise ValueError("the fake Crypto Pay needs an API token")
        self.token = token
        super().__init__(**kwargs)

    # --- state -------------------------------------------------------------

    def _reset_state(self):
        self._invoices = {}
        self._next_invoice_id = 1
        self._next_update_id = 1
        self._updates = {}  # invoice id → (body, headers) of its invoice_paid update as last sent

    def _snapshot(self):
        return {
            "invoices": list(self._invoices.values()),
            "next_invoice_id": self._next_invoice_id,
            "next_update_id": self._next_update_id,
            "updates": [[invoice_id, body, headers] for invoice_id, (body, headers) in self._updates.items()],
        }

    def _restore(self, state):
        self._invoices = {record["invoice_id"]: record for record in state["invoices"]}
        self._next_invoice_id = state["next_invoice_id"]
        self._next_update_id = state["next_update_id"]
        self._updates = {invoice_id: (body, headers) for invoice_id, body, headers in state["updates"]}

    def _state_counts(self):
        return {"invoices": len(self._invoices)}

    def invoices(self):
        with self._lock:
            return [self._invoice_json(record) for record in self._invoices.values()]

    def invoice(self, invoice_id):
        with self._lock:
            return self._invoice_json(self._invoices[int(invoice_id)])

    # --- the control side ----------------------------------------------------

    def pay(self, invoice_id, amount=None, paid_asset=None):
        """Pay an active invoice (recording `amount`, decimal text, when given) and send the signed update."""
        with self._lock:
            record = self._active(invoice_id)
            if amount is not None:
                try:
                    record["amount"] = _decimal(amount, self._places(record))
                except Reply:
                    raise ValueError("amount must be positive decimal text within the currency's places") from None
            elif self._draw("wrong_amount") and record["amount"] > WRONG_AMOUNT_SHORTFALL:
                record["amount"] -= WRONG_AMOUNT_SHORTFALL
            record.update(status="paid", paid_at=utcnow(), paid_asset=paid_asset or record["asset"] or "USDT")
            update = {
                "update_id": self._next_update_id,
                "update_type": "invoice_paid",
                "request_date": iso(utcnow()),
                "payload": self._invoice_json(record),
            }
            self._next_update_id += 1
            body = json.dumps(update, separators=(",", ":")).encode()
            bad = self._draw("webhook_bad_signature")
            signature = sign("not-" + self.token if bad else self.token, body)
            headers = {"Content-Type": "application/json", "crypto-pay-api-signature": signature}
            self._updates[record["invoice_id"]] = (body, dict(headers))
            return_url = record["paid_btn_url"]
        self._deliver(str(update["update_id"]), body, headers)
        return return_url

    complete = pay

    def expire(self, invoice_id):
        """Expire an active invoice (Crypto Pay sends no webhook for that)."""
        with self._lock:
            self._active(invoice_id)["status"] = "expired"
        return None

    cancel = expire

    def signed_update(self, invoice_id):
        """(body, headers) of the invoice_paid update last sent for this invoice, for replays."""
        with self._lock:
            body, headers = self._updates[int(invoice_id)]
            return body, dict(headers)

    def _active(self, invoice_id):
        record = self._invoices[int(invoice_id)]
        self._expire_if_due(record)
        if record["status"] != "active":
            raise ValueError(f"the invoice is {record['status']}, not active")
        return record

    @staticmethod
    def _places(record):
        return ASSETS[record["asset"]] if record["asset"] else FIAT_DECIMALS

    def _payment_control(self, method, path, payload):
        if method == "GET" and path == "/_fake/invoices":
            return 200, {"invoices": self.invoices()}
        found = re.fullmatch(r"/_fake/invoices/([0-9]+)/(pay|expire)", path)
        if method == "POST" and found:
            invoice_id, action = int(found.group(1)), found.group(2)
            if action == "pay":
                self.pay(invoice_id, amount=payload.get("amount"), paid_asset=payload.get("paid_asset"))
            else:
                self.expire(invoice_id)
            return 200, self.invoice(invoice_id)
        return 404, {"error": "no such control route"}

    def _checkout_summary(self, payment_id):
        if not payment_id.isdigit():
            raise KeyError(payment_id)
        with self._lock:
            record = self._invoices[int(payment_id)]
            self._expire_if_due(record)
            return _text(record["amount"]), record["asset"] or record["fiat"], record["status"]

    # --- HTTP --------------------------------------------------------------

    def _authorized(self, handler):
        presented = (handler.headers.get("Crypto-Pay-API-Token") or "").encode("utf-8", "replace")
        return secrets.compare_digest(presented, self.token.encode("utf-8"))

    def _server_error(self):
        return 500, {"ok": False, "error": {"code": 500, "name": "INTERNAL_ERROR"}}

    def _api(self, handler, method, path, query, raw):
        found = re.fullmatch(r"/api/([A-Za-z]+)", path)
        if not found or method not in ("GET", "POST"):
            raise _fail(404, "METHOD_NOT_FOUND")
        if not self._authorized(handler):
            with self._lock:
                self._bump(self._rejected, "unauthorized")
            raise _fail(401, "UNAUTHORIZED")
        name = found.group(1)
        if name not in METHODS:
            raise _fail(404, "METHOD_NOT_FOUND")
        params = dict(query)
        if raw:
            params.update(_body_params(handler.headers.get("Content-Type") or "", raw))
        if name == ROUTE_GET_ME:
            return name, lambda: (200, {"ok": True, "result": self._me()})
        if name == ROUTE_CREATE_INVOICE:
            return name, lambda: self._create_invoice(params)
        return name, lambda: self._get_invoices(params)

    @staticmethod
    def _me():
        return {"app_id": 1, "name": "Omniflow fake", "payment_processing_bot_username": "CryptoBot"}

    def _create_invoice(self, params):
        currency_type = params.get("currency_type") or "crypto"
        if currency_type == "crypto":
            asset, fiat = params.get("asset"), None
            if asset not in ASSETS:
                raise _fail(400, "ASSET_INVALID")
            places = ASSETS[asset]
        elif currency_type == "fiat":
            asset, fiat = None, params.get("fiat")
            if fiat not in FIATS:
                raise _fail(400, "FIAT_INVALID")
            places = FIAT_DECIMALS
        else:
            raise _fail(400, "CURRENCY_TYPE_INVALID")
        amount = _decimal(params.get("amount"), places)
        description = params.get("description")
        if description is not None and len(str(description)) > DESCRIPTION_MAX_LENGTH:
            raise _fail(400, "DESCRIPTION_TOO_LONG")
        payload = params.get("payload")
        if payload is not None and len(str(payload).encode("utf-8")) > PAYLOAD_MAX_BYTES:
            raise _fail(400, "PAYLOAD_TOO_LONG")
        expires_in = params.get("expires_in")
        if expires_in is not None:
            if not str(expires_in).isdigit() or not 1 <= int(expires_in) <= EXPIRES_IN_MAX:
                raise _fail(400, "EXPIRES_IN_INVALID")
            expires_in = int(expires_in)
        button, button_url = params.get("paid_btn_name"), params.get("paid_btn_url")
        if button is not None and button not in PAID_BUTTONS:
            raise _fail(400, "PAID_BTN_NAME_INVALID")
        if button is not None and not (isinstance(button_url, str) and re.match(r"^https?://\S+$", button_url)):
            raise _fail(400, "PAID_BTN_URL_REQUIRED")
        now = utcnow()
        with self._lock:
            invoice_id = self._next_invoice_id
            self._next_invoice_id += 1
            record = {
                "invoice_id": invoice_id,
                "hash": f"IV{secrets.token_hex(6)}",
                "currency_type": currency_type,
                "asset": asset,
                "fiat": fiat,
                "amount": amount,
                "description": None if description is None else str(description),
                "payload": None if payload is None else str(payload),
                "status": "active",
                "created_at": now,
                "expires_at": now + datetime.timedelta(seconds=expires_in) if expires_in else None,
                "allow_comments": _flag(params.get("allow_comments"), True),
                "allow_anonymous": _flag(params.get("allow_anonymous"), True),
                "paid_btn_name": button,
                "paid_btn_url": button_url if button else None,
                "paid_at": None,
                "paid_asset": None,
            }
            self._invoices[invoice_id] = record
            answer = self._invoice_json(record)
        self._schedule_auto_pay(invoice_id)
        return 200, {"ok": True, "result": answer}

    def _get_invoices(self, params):
        ids = params.get("invoice_ids")
        wanted = None
        if ids:
            parts = str(ids).split(",")
            if not all(part.strip().isdigit() for part in parts):
                raise _fail(400, "INVOICE_IDS_INVALID")
            wanted = {int(part) for part in parts}
        status = params.get("status")
        if status is not None and status not in ("active", "paid"):
            raise _fail(400, "STATUS_INVALID")
        asset, fiat = params.get("asset"), params.get("fiat")
        if asset is not None and asset not in ASSETS:
            raise _fail(400, "ASSET_INVALID")
        if fiat is not None and fiat not in FIATS:
            raise _fail(400, "FIAT_INVALID")
        offset, count = str(params.get("offset") or "0"), str(params.get("count") or "100")
        if not (offset.isdigit() and count.isdigit() and 1 <= int(count) <= 1000):
            raise _fail(400, "COUNT_INVALID")
        with self._lock:
            records = [
                record
                for record in sorted(self._invoices.values(), key=lambda r: r["invoice_id"], reverse=True)
                if (wanted is None or record["invoice_id"] in wanted)
                and (asset is None or record["asset"] == asset)
                and (fiat is None or record["fiat"] == fiat)
            ]
            for record in records:
                self._expire_if_due(record)
            if status:
                records = [record for record in records if record["status"] == status]
            items = [self._invoice_json(record) for record in records[int(offset) : int(offset) + int(count)]]
        return 200, {"ok": True, "result": {"items": items}}

    @staticmethod
    def _expire_if_due(record):
        if record["status"] == "active" and record["expires_at"] and record["expires_at"] <= utcnow():
            record["status"] = "expired"

    def _invoice_json(self, record):
        link = f"{self.base_url}/checkout/{record['invoice_id']}"
        invoice = {
            "invoice_id": record["invoice_id"],
            "hash": record["hash"],
            "currency_type": record["currency_type"],
            "amount": _text(record["amount"]),
            "bot_invoice_url": link,
            "mini_app_invoice_url": link,
            "web_app_invoice_url": link,
            "status": record["status"],
            "created_at": iso(record["created_at"]),
            "allow_comments": record["allow_comments"],
            "allow_anonymous": record["allow_anonymous"],
        }
        if record["asset"]:
            invoice["asset"] = record["asset"]
        else:
            invoice["fiat"] = record["fiat"]
            invoice["accepted_assets"] = ["USDT", "TON", "BTC"]
        for key in ("description", "payload", "paid_btn_name", "paid_btn_url"):
            if record[key] is not None:
                invoice[key] = record[key]
        if record["expires_at"]:
            invoice["expiration_date"] = iso(record["expires_at"])
        if record["status"] == "paid":
            invoice.update(
                paid_at=iso(record["paid_at"]),
                paid_anonymously=False,
                paid_asset=record["paid_asset"],
                paid_amount=_text(record["amount"] if record["asset"] else record["amount"] / FIAT_RATE),
                paid_usd_rate="1.00000000",
                fee_asset=record["paid_asset"],
                fee_amount="0",
            )
            if not record["asset"]:
                invoice["paid_fiat_rate"] = _text(FIAT_RATE)
        return invoice


def _decimal(value, places):
    if not isinstance(value, str) or not _AMOUNT.match(value):
        raise _fail(400, "AMOUNT_INVALID")
    try:
        amount = Decimal(value)
    except InvalidOperation:
        raise _fail(400, "AMOUNT_INVALID") from None
    if amount <= 0 or amount != amount.quantize(Decimal(1).scaleb(-places)):
        raise _fail(400, "AMOUNT_INVALID")
    return amount


def _text(amount):
    """Crypto Pay writes amounts as plain decimal text without trailing zeros."""
    return format(amount.normalize(), "f")


def _flag(value, default):
    if value is None:
        return default
    return value is True or str(value).lower() == "true"


def _body_params(content_type, raw):
    if content_type.startswith("application/json"):
        try:
            body = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            raise _fail(400, "JSON_INVALID") from None
        if not isinstance(body, dict):
            raise _fail(400, "JSON_INVALID")
        return body
    return dict(parse_qsl(raw.decode("utf-8", "replace"), keep_blank_values=True))


def run_cli(host="127.0.0.1", port=DEFAULT_PORT, webhook_url=None, auto_pay_seconds=None, state_file=None, fresh=False):
    """`python omniflow.py fake-cryptobot`: serve in the foreground until Ctrl-C or SIGTERM."""
    import signal

    token, is_dev = default_token()
    fake = FakeCryptoBot(token=token, host=host, port=port, webhook_url=webhook_url, auto_pay_seconds=auto_pay_seconds)
    if state_file:
        fake.keep_state_in(state_file, fresh)

    def stop(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    fake.bind()
    print(f"fake Crypto Pay (createInvoice, getInvoices, signed invoice_paid webhooks) on {fake.base_url}", flush=True)
    print(f"token: {token}" if is_dev else "token: APP_CRYPTOBOT_TOKEN (from the environment or .env)", flush=True)
    print(f"webhooks to: {webhook_url or 'nowhere (set --webhook-url)'}", flush=True)
    if auto_pay_seconds:
        print(f"every new invoice is paid by itself after {auto_pay_seconds:g} s", flush=True)
    print(fake.state_line(), flush=True)
    print("control: GET /_fake/invoices, POST /_fake/invoices/ID/pay|expire, /_fake/faults", flush=True)
    try:
        fake.serve_forever()
    except KeyboardInterrupt:
        pass
    fake.save_state()  # what a request changed just before the stop, whose own write may not have run yet
    print("fake Crypto Pay stopped", flush=True)
