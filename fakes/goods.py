"""A fake digital-goods provider (SPEC 15.4): a real HTTP server on 127.0.0.1 that sells codes and links.

The API it speaks is the one integrations/goods.py calls:

- `POST /v1/orders` with `{"reference", "sku", "recipient"}` (bearer token;
  the reference also as `Idempotency-Key`) → 201 `{"order": {"id",
  "reference", "status": "delivered", "payload": {"code", "link"}}}`. A
  reference bought before is answered with the first purchase (200), as a
  provider that dedupes on the idempotency key would; it still counts as a
  submission, so a test sees it.
- refusals, each with `{"error": {"code", "message"}}`: 503 `retry_later`
  (nothing done), 402 `insufficient_balance`, 422 `invalid_recipient`, 404
  `unknown_sku` (any SKU starting with `unknown`), 401 `unauthorized`.

Faults, drawn per purchase call from rates (`set_faults`): `fail` (503
retry_later, nothing bought), `lost_response` (bought, the socket closed
without an answer), `ambiguous` (bought, answered 502 with an HTML page:
the caller cannot tell), `balance` (402, nothing bought), `recipient` (422,
nothing bought), `slow` (bought, answered after `slow_seconds`); and
`latency_ms` for every call.

It counts, per reference, every purchase call that reached the point of
buying (`submissions`): a delivery submitted twice shows up as 2 there,
whichever answer either call got. Refused calls are counted apart
(`refused`). Control routes under /_fake/ (stats, faults, reset, orders)
need the same token.
"""

import json
import random
import secrets
import socket
import threading
import time
from urllib.parse import urlsplit

from fakes.http_server import ServedFake

DEFAULT_PORT = 3040
DEV_TOKEN = "dev-goods-token-0123456789"
MAX_REQUEST_BYTES = 64 << 10
RATE_FAULTS = ("fail", "lost_response", "ambiguous", "balance", "recipient", "slow")
PURCHASE = "POST /v1/orders"


class FakeGoodsProvider(ServedFake):
    server_name = "FakeGoods"
    thread_name = "fake-goods"

    def __init__(self, token=DEV_TOKEN, host="127.0.0.1", port=0, latency_ms=0, seed=None):
        self._init_served(host, port)
        self.token = token
        self._seed = seed
        self._lock = threading.Lock()
        self._default_latency_ms = latency_ms
        self.reset()

    # --- control -------------------------------------------------------------

    def reset(self):
        with self._lock:
            self._rng = random.Random(self._seed)
            self._faults = self._no_faults(self._default_latency_ms)
            self._orders = {}  # reference -> order
            self._submissions = {}  # reference -> purchase calls that bought (or found) it
            self._refused = {}  # error code -> count
            self._faults_injected = {}
            self._calls = 0
            self._in_flight = 0

    @staticmethod
    def _no_faults(latency_ms=0):
        faults = {f"{name}_rate": 0.0 for name in RATE_FAULTS}
        faults.update(latency_ms=float(latency_ms), slow_seconds=3.0)
        return faults

    def set_faults(self, **settings):
        """Change some fault settings: `<fault>_rate` (0–1) for each of RATE_FAULTS, latency_ms, slow_seconds, seed."""
        known = {*self._no_faults(), "seed"}
        unknown = set(settings) - known
        if unknown:
            raise ValueError(f"unknown fault settings: {', '.join(sorted(unknown))}")
        with self._lock:
            faults = dict(self._faults)
            for name, value in settings.items():
                if name == "seed":
                    self._rng = random.Random(value)
                    continue
                value = float(value)
                if value < 0 or (name.endswith("_rate") and value > 1):
                    raise ValueError(f"{name} is out of range")
                faults[name] = value
            if sum(faults[f"{name}_rate"] for name in RATE_FAULTS) > 1.0 + 1e-9:
                raise ValueError("the fault rates add up to more than 1")
            self._faults = faults
            return dict(faults)

    def clear_faults(self):
        with self._lock:
            self._faults = self._no_faults(self._default_latency_ms)

    def stats(self):
        with self._lock:
            return {
                "calls": self._calls,
                "in_flight": self._in_flight,
                "submissions": dict(self._submissions),
                "refused": dict(self._refused),
                "faults_injected": dict(self._faults_injected),
                "orders": len(self._orders),
            }

    def orders(self):
        with self._lock:
            return [dict(order) for order in self._orders.values()]

    # --- serving ---------------------------------------------------------------

    def _serve(self, handler):
        with self._lock:
            self._in_flight += 1
        try:
            self._dispatch(handler)
        except OSError:
            handler.close_connection = True
        finally:
            with self._lock:
                self._in_flight -= 1

    def _dispatch(self, handler):
        method, path = handler.command, urlsplit(handler.path).path
        length = handler.headers.get("Content-Length") or "0"
        if not (length.isascii() and length.isdigit()) or int(length) > MAX_REQUEST_BYTES:
            self._respond(handler, 413, _error("too_large", "request body too large"), close=True)
            return
        raw = handler.rfile.read(int(length))
        if not self._authorized(handler):
            self._respond(handler, 401, _error("unauthorized", "bad or missing bearer token"))
            return
        if path.startswith("/_fake/"):
            self._control(handler, method, path, raw)
            return
        if f"{method} {path}" != PURCHASE:
            self._respond(handler, 404, _error("not_found", "no such route"))
            return
        with self._lock:
            self._calls += 1
        try:
            body = json.loads(raw or b"{}")
        except (ValueError, UnicodeDecodeError):
            body = None
        if not isinstance(body, dict) or not all(isinstance(body.get(k), str) for k in ("reference", "sku")):
            self._respond(handler, 400, _error("invalid_request", "reference and sku are required strings"))
            return
        self._purchase(handler, body)

    def _purchase(self, handler, body):
        fault, latency_ms, slow_seconds = self._draw()
        refusal = {
            "fail": (503, "retry_later"),
            "balance": (402, "insufficient_balance"),
            "recipient": (422, "invalid_recipient"),
        }.get(fault)
        if refusal is None and body["sku"].startswith("unknown"):
            refusal = (404, "unknown_sku")
        status, answer = 0, None
        if refusal is None:
            status, answer = self._buy(body)
        wait = handler.arrived + latency_ms / 1000.0 - time.monotonic()
        if fault == "slow":
            wait = max(wait, slow_seconds)
        if wait > 0 and self._stopping.wait(wait):
            self._drop(handler)
            return
        if refusal is not None:
            with self._lock:
                self._refused[refusal[1]] = self._refused.get(refusal[1], 0) + 1
            self._respond(handler, refusal[0], _error(refusal[1], "refused"))
        elif fault == "lost_response":
            self._drop(handler)
        elif fault == "ambiguous":
            self._respond_raw(handler, 502, b"<html><body>Bad Gateway</body></html>", "text/html")
        else:
            self._respond(handler, status, answer)

    def _draw(self):
        with self._lock:
            faults = self._faults
            draw, edge, fault = self._rng.random(), 0.0, None
            for name in RATE_FAULTS:
                edge += faults[f"{name}_rate"]
                if draw < edge:
                    fault = name
                    self._faults_injected[name] = self._faults_injected.get(name, 0) + 1
                    break
            return fault, faults["latency_ms"], faults["slow_seconds"]

    def _buy(self, body):
        reference = body["reference"]
        with self._lock:
            self._submissions[reference] = self._submissions.get(reference, 0) + 1
            order = self._orders.get(reference)
            if order is not None:
                return 200, {"order": dict(order)}
            order = {
                "id": f"g_{len(self._orders) + 1:06d}",
                "reference": reference,
                "sku": body["sku"],
                "status": "delivered",
                "payload": {
                    "code": "-".join(secrets.token_hex(2).upper() for _ in range(4)),
                    "link": f"{self.base_url}/redeem/{secrets.token_urlsafe(12)}",
                },
            }
            self._orders[reference] = order
            return 201, {"order": dict(order)}

    def _control(self, handler, method, path, raw):
        if method == "GET" and path == "/_fake/stats":
            self._respond(handler, 200, self.stats())
        elif method == "GET" and path == "/_fake/orders":
            self._respond(handler, 200, {"orders": self.orders()})
        elif method == "POST" and path == "/_fake/faults":
            try:
                payload = json.loads(raw or b"{}")
                if payload.pop("clear", False):
                    self.clear_faults()
                self._respond(handler, 200, self.set_faults(**payload))
            except (ValueError, TypeError, AttributeError) as error:
                self._respond(handler, 400, _error("invalid_faults", str(error)))
        elif method == "POST" and path == "/_fake/reset":
            self.reset()
            self._respond(handler, 200, {"reset": True})
        else:
            self._respond(handler, 404, _error("not_found", "no such control route"))

    def _authorized(self, handler):
        scheme, _, presented = (handler.headers.get("Authorization") or "").partition(" ")
        return scheme.lower() == "bearer" and secrets.compare_digest(presented.strip(), self.token)

    def _respond(self, handler, status, body, close=False):
        self._respond_raw(handler, status, json.dumps(body).encode(), "application/json", close)

    @staticmethod
    def _respond_raw(handler, status, data, content_type, close=False):
        handler.send_response(status)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(data)))
        if close:
            handler.send_header("Connection", "close")
            handler.close_connection = True
        handler.end_headers()
        handler.wfile.write(data)

    @staticmethod
    def _drop(handler):
        """Close the socket without a byte of answer."""
        handler.close_connection = True
        try:
            handler.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def _error(code, message):
    return {"error": {"code": code, "message": message}}


def run_cli(host="127.0.0.1", port=DEFAULT_PORT, token=None, latency_ms=0):
    """`python omniflow.py fake-goods`: serve in the foreground until Ctrl-C or SIGTERM."""
    import signal

    provider = FakeGoodsProvider(token=token or DEV_TOKEN, host=host, port=port, latency_ms=latency_ms)

    def stop(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    provider.bind()
    print(f"fake goods provider on {provider.base_url}", flush=True)
    print("token: the development token" if token is None else "token: as configured", flush=True)
    print("control: GET /_fake/stats, GET /_fake/orders, POST /_fake/faults, POST /_fake/reset", flush=True)
    try:
        provider.serve_forever()
    except KeyboardInterrupt:
        pass
    print("fake goods provider stopped", flush=True)
