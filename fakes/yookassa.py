"""A fake YooKassa: a real HTTP server speaking the documented subset of API v3, with notifications and faults.

Routes (under /v3, Basic auth `shop_id:secret_key`):

- POST /v3/payments: create a payment. Idempotence-Key is required; the same
  key with the same body answers the first answer again (no second payment),
  the same key with another body is refused. Amounts are checked to the
  kopeck; `capture: true` only (this fake has no two-stage payments).
- GET /v3/payments/{id}: the payment, or 404 not_found.
- POST /v3/refunds: refund all or part of a succeeded payment (same key rules);
  `succeeded` at once, or `pending` while `hold_refunds` is set, until
  `settle_refund(id)` (or `settle_refund(id, succeed=False)`: `canceled`).
- GET /v3/refunds/{id}: the refund, or 404 not_found.

A payment starts `pending` with a redirect confirmation URL (this fake's own
checkout page) and becomes `succeeded` or `canceled` through the control side:
`succeed(id)` / `cancel(id)` in Python, POST /_fake/payments/{id}/succeed|cancel
over HTTP, the Pay/Cancel buttons of /checkout/{id}, or `auto_pay_seconds`.
Each change POSTs a notification (`payment.succeeded`, `payment.canceled`,
`refund.succeeded`) to the webhook URL, unsigned as YooKassa's are.

Faults: fail (500 internal_server_error, nothing done) and timeout (done, never
answered) per API call; webhook_lost, webhook_duplicate and wrong_amount
(the payment is completed for one kopeck less than it was created for) per
completion. YooKassa signs nothing, so its "wrong signature" is a forged
notification: `forge_notification(id)` delivers a `payment.succeeded` for a
payment the API still holds as pending. A refund's `refund.succeeded` goes out
when it succeeds (at once, or at `settle_refund`), with the same delivery
faults; `notify_refund(id)` (POST /_fake/refunds/{id}/notify) sends it again,
and GET /_fake/refunds lists the refunds.

Run it with `python omniflow.py fake-yookassa`.
"""

import base64
import binascii
import hashlib
import json
import os
import re
import secrets
import uuid
from decimal import Decimal
from pathlib import Path

from fakes.provider_server import FakeProvider, Reply, iso, utcnow

DEV_SHOP_ID = "100500"
DEV_SECRET_KEY = "test_omniflow-fake-yookassa-dev-secret"
DEFAULT_PORT = 3020
API_PREFIX = "/v3"

ROUTE_CREATE_PAYMENT = "POST /v3/payments"
ROUTE_GET_PAYMENT = "GET /v3/payments/{id}"
ROUTE_CREATE_REFUND = "POST /v3/refunds"
ROUTE_GET_REFUND = "GET /v3/refunds/{id}"

CURRENCIES = ("RUB", "USD", "EUR", "BYN", "KZT", "UZS")
DESCRIPTION_MAX_LENGTH = 128
METADATA_MAX_KEYS = 16
METADATA_KEY_MAX_LENGTH = 32
METADATA_VALUE_MAX_LENGTH = 512
IDEMPOTENCE_KEY_MAX_LENGTH = 64
CENT = Decimal("0.01")

_AMOUNT = re.compile(r"^[0-9]{1,13}(?:\.[0-9]{1,2})?$")
_PAYMENT_PATH = re.compile(r"^/v3/payments/(?P<id>[^/]+)$")
_REFUND_PATH = re.compile(r"^/v3/refunds/(?P<id>[^/]+)$")


def _error(status, code, description, parameter=None):
    body = {"type": "error", "id": str(uuid.uuid4()), "code": code, "description": description}
    if parameter:
        body["parameter"] = parameter
    return Reply(status, body)


def _invalid(description, parameter=None):
    return _error(400, "invalid_request", description, parameter)


def _money(value):
    return f"{value.quantize(CENT)}"


def default_credentials():
    """(shop id, secret key, is the dev pair) from the environment or .env, else the fixed development pair."""
    values = {name: os.environ.get(name, "").strip() for name in ("APP_YOOKASSA_SHOP_ID", "APP_YOOKASSA_SECRET_KEY")}
    dotenv_file = Path(__file__).resolve().parent.parent / ".env"
    if not all(values.values()) and dotenv_file.exists():
        from dotenv import dotenv_values

        file_values = dotenv_values(dotenv_file)
        values = {name: value or (file_values.get(name) or "").strip() for name, value in values.items()}
    if all(values.values()):
        return values["APP_YOOKASSA_SHOP_ID"], values["APP_YOOKASSA_SECRET_KEY"], False
    return DEV_SHOP_ID, DEV_SECRET_KEY, True


class FakeYooKassa(FakeProvider):
    """The fake. start() serves it on a background thread; api_url is what the adapter is given."""

    server_name = "FakeYooKassa"
    thread_name = "fake-yookassa"

    def __init__(self, shop_id=DEV_SHOP_ID, secret_key=DEV_SECRET_KEY, **kwargs):
        if not shop_id or not secret_key:
            raise ValueError("the fake YooKassa needs a shop id and a secret key")
        self.shop_id = str(shop_id)
        self.secret_key = secret_key
        super().__init__(**kwargs)

    @property
    def api_url(self):
        return self.base_url + API_PREFIX

    # --- state -------------------------------------------------------------

    def _reset_state(self):
        self._payments = {}
        self._refunds = {}
        self.hold_refunds = False  # True: new refunds stay pending until settle_refund()
        self._idempotence = {}  # (route, key) → (fingerprint of the body, status, answer)

    def _state_counts(self):
        return {"payments": len(self._payments), "refunds": len(self._refunds)}

    def _snapshot(self):
        return {
            "payments": list(self._payments.values()),
            "refunds": list(self._refunds.values()),
            "idempotence": [[route, key, *seen] for (route, key), seen in self._idempotence.items()],
        }

    def _restore(self, state):
        self._payments = {record["id"]: record for record in state["payments"]}
        self._refunds = {refund["id"]: refund for refund in state["refunds"]}
        self._idempotence = {(route, key): tuple(seen) for route, key, *seen in state["idempotence"]}

    def payments(self):
        with self._lock:
            return [self._payment_json(record) for record in self._payments.values()]

    def payment(self, payment_id):
        with self._lock:
            return self._payment_json(self._payments[payment_id])

    # --- the control side ----------------------------------------------------

    def succeed(self, payment_id, amount=None):
        """Complete a pending payment (for `amount`, decimal text, when given) and notify; returns the return URL."""
        with self._lock:
            record = self._pending(payment_id)
            if amount is not None:
                if not isinstance(amount, str) or not _AMOUNT.match(amount):
                    raise ValueError("amount must be decimal text with at most two places")
                record["amount"] = Decimal(amount)
            elif self._draw("wrong_amount"):
                record["amount"] -= CENT
            now = utcnow()
            record.update(status="succeeded", paid=True, captured_at=now)
            body = self._notification("payment.succeeded", self._payment_json(record))
            return_url = record["return_url"]
        self._deliver(f"payment.succeeded:{payment_id}", body, _JSON)
        return return_url

    complete = succeed

    def cancel(self, payment_id, reason="expired_on_confirmation"):
        """Cancel a pending payment and notify."""
        with self._lock:
            record = self._pending(payment_id)
            record.update(status="canceled", cancellation_details={"party": "yoo_money", "reason": reason})
            body = self._notification("payment.canceled", self._payment_json(record))
        self._deliver(f"payment.canceled:{payment_id}", body, _JSON)
        return None

    def forge_notification(self, payment_id, event="payment.succeeded"):
        """Deliver a notification that claims `event` while the API keeps the payment as it is."""
        with self._lock:
            claimed = self._payment_json(self._payments[payment_id])
            claimed.update(status="succeeded" if event == "payment.succeeded" else "canceled", paid=True)
            body = self._notification(event, claimed)
        return self._deliver(f"{event}:{payment_id}", body, _JSON)

    def notification(self, payment_id, event=None):
        """The body of the notification for this payment's current state (for replays)."""
        with self._lock:
            record = self._payments[payment_id]
            return self._notification(event or f"payment.{record['status']}", self._payment_json(record))

    def settle_refund(self, refund_id, succeed=True):
        """Finish a pending refund: `succeeded` (notified) or `canceled` (the money is the payment's again)."""
        with self._lock:
            refund = self._refunds[refund_id]
            if refund["status"] != "pending":
                raise ValueError(f"the refund is {refund['status']}, not pending")
            refund["status"] = "succeeded" if succeed else "canceled"
            if not succeed:
                self._payments[refund["payment_id"]]["refunded"] -= Decimal(refund["amount"]["value"])
            body = self._notification("refund.succeeded", dict(refund)) if succeed else None
        if body is not None:
            self._deliver(f"refund.succeeded:{refund_id}", body, _JSON)

    def refunds(self):
        with self._lock:
            return [dict(refund) for refund in self._refunds.values()]

    def notify_refund(self, refund_id):
        """Deliver `refund.succeeded` for a refund that succeeded (again: a replay, or one whose first was lost)."""
        with self._lock:
            refund = self._refunds[refund_id]
            if refund["status"] != "succeeded":
                raise ValueError(f"the refund is {refund['status']}, not succeeded")
            body = self._notification("refund.succeeded", dict(refund))
        return self._deliver(f"refund.succeeded:{refund_id}", body, _JSON)

    def _pending(self, payment_id):
        record = self._payments[payment_id]
        if record["status"] != "pending":
            raise ValueError(f"the payment is {record['status']}, not pending")
        return record

    @staticmethod
    def _notification(event, obj):
        return json.dumps({"type": "notification", "event": event, "object": obj}, separators=(",", ":")).encode()

    def _payment_control(self, method, path, payload):
        if method == "GET" and path == "/_fake/payments":
            return 200, {"payments": self.payments()}
        found = re.fullmatch(r"/_fake/payments/([^/]+)/(succeed|cancel|forge)", path)
        if method == "POST" and found:
            payment_id, action = found.groups()
            if action == "succeed":
                self.succeed(payment_id, amount=payload.get("amount"))
            elif action == "cancel":
                self.cancel(payment_id)
            else:
                self.forge_notification(payment_id)
            return 200, self.payment(payment_id)
        if method == "GET" and path == "/_fake/refunds":
            return 200, {"refunds": self.refunds()}
        found = re.fullmatch(r"/_fake/refunds/([^/]+)/notify", path)
        if method == "POST" and found:
            return 200, {"deliveries": self.notify_refund(found.group(1))}
        return 404, {"error": "no such control route"}

    def _checkout_summary(self, payment_id):
        with self._lock:
            record = self._payments[payment_id]
            return _money(record["amount"]), record["currency"], record["status"]

    # --- HTTP --------------------------------------------------------------

    def _authorized(self, handler):
        scheme, _, encoded = (handler.headers.get("Authorization") or "").partition(" ")
        if scheme.lower() != "basic":
            return False
        try:
            shop_id, _, secret = base64.b64decode(encoded.strip(), validate=True).decode("utf-8").partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return False
        shop_ok = secrets.compare_digest(shop_id.encode(), self.shop_id.encode())
        return shop_ok & secrets.compare_digest(secret.encode(), self.secret_key.encode())

    def _server_error(self):
        return 500, _error(500, "internal_server_error", "Internal server error").body

    def _api(self, handler, method, path, query, raw):
        if not path.startswith(API_PREFIX + "/"):
            raise _error(404, "not_found", "Not found")
        if method == "POST" and path == "/v3/payments":
            route = ROUTE_CREATE_PAYMENT
        elif method == "POST" and path == "/v3/refunds":
            route = ROUTE_CREATE_REFUND
        elif method == "GET" and _PAYMENT_PATH.match(path):
            route = ROUTE_GET_PAYMENT
        elif method == "GET" and _REFUND_PATH.match(path):
            route = ROUTE_GET_REFUND
        else:
            raise _error(404, "not_found", "Not found")
        if not self._authorized(handler):
            with self._lock:
                self._bump(self._rejected, "unauthorized")
            raise _error(401, "invalid_credentials", "Authentication failed", "Authorization")
        if route == ROUTE_GET_PAYMENT:
            payment_id = _PAYMENT_PATH.match(path).group("id")
            return route, lambda: self._get_payment(payment_id)
        if route == ROUTE_GET_REFUND:
            refund_id = _REFUND_PATH.match(path).group("id")
            return route, lambda: self._get_refund(refund_id)
        key = handler.headers.get("Idempotence-Key") or ""
        if not key or len(key) > IDEMPOTENCE_KEY_MAX_LENGTH:
            raise _invalid("Idempotence-Key header is required (1-64 characters)", "Idempotence-Key")
        try:
            body = json.loads(raw or b"null")
        except (ValueError, UnicodeDecodeError):
            raise _invalid("Request body is not valid JSON") from None
        if not isinstance(body, dict):
            raise _invalid("Request body must be a JSON object")
        create = self._create_payment if route == ROUTE_CREATE_PAYMENT else self._create_refund
        return route, lambda: self._idempotent(route, key, raw, lambda: create(body))

    def _idempotent(self, route, key, raw, create):
        fingerprint = hashlib.sha256(raw or b"").hexdigest()
        with self._lock:
            seen = self._idempotence.get((route, key))
            if seen is not None:
                if seen[0] != fingerprint:
                    raise _invalid("Idempotence key duplicated with other request parameters", "Idempotence-Key")
                return seen[1], seen[2]
            try:
                status, answer = create()
            except Reply as reply:
                status, answer = reply.status, reply.body
            self._idempotence[(route, key)] = (fingerprint, status, answer)
        return status, answer

    def _get_payment(self, payment_id):
        with self._lock:
            record = self._payments.get(payment_id)
            if record is None:
                raise _error(404, "not_found", "Payment not found or forbidden", "payment_id")
            return 200, self._payment_json(record)

    def _get_refund(self, refund_id):
        with self._lock:
            refund = self._refunds.get(refund_id)
            if refund is None:
                raise _error(404, "not_found", "Refund not found or forbidden", "refund_id")
            return 200, dict(refund)

    def _create_payment(self, body):
        value, currency = _amount(body.get("amount"), "amount")
        if body.get("capture") is not True:
            raise _invalid("This fake takes capture=true only", "capture")
        confirmation = body.get("confirmation")
        if not isinstance(confirmation, dict) or confirmation.get("type") != "redirect":
            raise _invalid("confirmation.type must be redirect", "confirmation.type")
        return_url = confirmation.get("return_url")
        if not isinstance(return_url, str) or not re.match(r"^https?://\S+$", return_url) or len(return_url) > 2048:
            raise _invalid("confirmation.return_url is required", "confirmation.return_url")
        description = body.get("description")
        if description is not None and (not isinstance(description, str) or len(description) > 128):
            raise _invalid("description must be text of at most 128 characters", "description")
        metadata = body.get("metadata") or {}
        _check_metadata(metadata)
        payment_id = str(uuid.uuid4())
        now = utcnow()
        record = {
            "id": payment_id,
            "status": "pending",
            "paid": False,
            "amount": value,
            "currency": currency,
            "description": description,
            "metadata": dict(metadata),
            "return_url": return_url,
            "created_at": now,
            "captured_at": None,
            "refunded": Decimal("0"),
            "cancellation_details": None,
        }
        self._payments[payment_id] = record
        self._schedule_auto_pay(payment_id)
        return 200, self._payment_json(record)

    def _create_refund(self, body):
        payment_id = body.get("payment_id")
        if not isinstance(payment_id, str) or not payment_id:
            raise _invalid("payment_id is required", "payment_id")
        value, currency = _amount(body.get("amount"), "amount")
        record = self._payments.get(payment_id)
        if record is None:
            raise _error(404, "not_found", "Payment not found or forbidden", "payment_id")
        if record["status"] != "succeeded":
            raise _invalid("Only a succeeded payment can be refunded", "payment_id")
        if currency != record["currency"]:
            raise _invalid("The refund's currency differs from the payment's", "amount.currency")
        if record["refunded"] + value > record["amount"]:
            raise _invalid("The refund exceeds what is left of the payment", "amount.value")
        record["refunded"] += value
        refund_id = str(uuid.uuid4())
        refund = {
            "id": refund_id,
            "payment_id": payment_id,
            "status": "pending" if self.hold_refunds else "succeeded",
            "created_at": iso(utcnow()),
            "amount": {"value": _money(value), "currency": currency},
        }
        if isinstance(body.get("description"), str):
            refund["description"] = body["description"][:250]
        self._refunds[refund_id] = refund
        if refund["status"] == "succeeded":
            notice = self._notification("refund.succeeded", refund)
            self._deliver_after_answer(f"refund.succeeded:{refund_id}", notice, _JSON)
        return 200, dict(refund)

    def _payment_json(self, record):
        payment = {
            "id": record["id"],
            "status": record["status"],
            "paid": record["paid"],
            "amount": {"value": _money(record["amount"]), "currency": record["currency"]},
            "created_at": iso(record["created_at"]),
            "metadata": dict(record["metadata"]),
            "recipient": {"account_id": self.shop_id, "gateway_id": "1000001"},
            "refundable": record["status"] == "succeeded" and record["refunded"] < record["amount"],
            "test": True,
        }
        if record["description"] is not None:
            payment["description"] = record["description"]
        if record["status"] == "pending":
            payment["confirmation"] = {
                "type": "redirect",
                "return_url": record["return_url"],
                "confirmation_url": f"{self.base_url}/checkout/{record['id']}",
            }
        if record["status"] == "succeeded":
            payment["captured_at"] = iso(record["captured_at"])
            payment["income_amount"] = {
                "value": _money(record["amount"] * Decimal("0.965")),
                "currency": record["currency"],
            }
            payment["payment_method"] = {"type": "bank_card", "id": record["id"], "saved": False, "title": "Bank card"}
        if record["refunded"]:
            payment["refunded_amount"] = {"value": _money(record["refunded"]), "currency": record["currency"]}
        if record["cancellation_details"]:
            payment["cancellation_details"] = dict(record["cancellation_details"])
        return payment


_JSON = {"Content-Type": "application/json"}


def _amount(amount, parameter):
    if not isinstance(amount, dict):
        raise _invalid(f"{parameter} is required", parameter)
    value, currency = amount.get("value"), amount.get("currency")
    if not isinstance(value, str) or not _AMOUNT.match(value) or Decimal(value) <= 0:
        raise _invalid(f"{parameter}.value must be a positive amount with at most two decimal places", parameter)
    if currency not in CURRENCIES:
        raise _invalid(f"{parameter}.currency is not supported", f"{parameter}.currency")
    return Decimal(value), currency


def _check_metadata(metadata):
    if not isinstance(metadata, dict) or len(metadata) > METADATA_MAX_KEYS:
        raise _invalid("metadata must be an object of at most 16 keys", "metadata")
    for key, value in metadata.items():
        if len(key) > METADATA_KEY_MAX_LENGTH or not isinstance(value, str) or len(value) > METADATA_VALUE_MAX_LENGTH:
            raise _invalid("metadata keys are at most 32 characters, values text of at most 512", "metadata")


def run_cli(host="127.0.0.1", port=DEFAULT_PORT, webhook_url=None, auto_pay_seconds=None, state_file=None, fresh=False):
    """`python omniflow.py fake-yookassa`: serve in the foreground until Ctrl-C or SIGTERM."""
    import signal

    shop_id, secret_key, is_dev = default_credentials()
    fake = FakeYooKassa(
        shop_id=shop_id, secret_key=secret_key, host=host, port=port, webhook_url=webhook_url,
        auto_pay_seconds=auto_pay_seconds,
    )  # fmt: skip
    if state_file:
        fake.keep_state_in(state_file, fresh)

    def stop(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    fake.bind()
    print(f"fake YooKassa (API v3 subset) on {fake.api_url}", flush=True)
    if is_dev:  # the fixed development pair is no secret; a configured one is never printed
        print(f"shop id: {shop_id}  secret key: {secret_key}", flush=True)
    else:
        print("credentials: APP_YOOKASSA_SHOP_ID / APP_YOOKASSA_SECRET_KEY (from the environment or .env)", flush=True)
    print(f"notifications to: {webhook_url or 'nowhere (set --webhook-url)'}", flush=True)
    if auto_pay_seconds:
        print(f"every new payment succeeds by itself after {auto_pay_seconds:g} s", flush=True)
    print(fake.state_line(), flush=True)
    print("control: GET /_fake/payments, POST /_fake/payments/ID/succeed|cancel|forge, /_fake/faults", flush=True)
    try:
        fake.serve_forever()
    except KeyboardInterrupt:
        pass
    fake.save_state()  # what a request changed just before the stop, whose own write may not have run yet
    print("fake YooKassa stopped", flush=True)
