"""What the fake payment providers share: a threaded HTTP server, fault draws, webhook delivery, the control routes.

A fake provider (fakes/yookassa.py, fakes/cryptobot.py) is a real HTTP server
on 127.0.0.1 that keeps its payments in memory. This module gives each one:

- the server and its lifecycle (fakes/http_server.py) and the request
  plumbing (body cap, JSON answers, dropped sockets);
- API faults drawn per call from rates: `fail` (a 5xx, nothing done) and
  `timeout` (the call is done, its answer never sent: the socket is held past
  the client's deadline, then closed);
- webhook delivery to a configured URL, synchronously from the call that
  changed a payment, with faults drawn per delivery: `webhook_lost` (never
  sent), `webhook_duplicate` (sent twice), and what a fake adds
  (`webhook_bad_signature`, `wrong_amount`);
- the control routes under /_fake/ (stats, faults, reset, deliveries), guarded
  by the fake's own API credentials; each fake adds its payment actions;
- the payer's page: GET /checkout/<id> with Pay and Cancel buttons, so a
  developer can complete a payment by hand; `auto_pay_seconds` completes
  every new payment by itself after that long.
"""

import datetime
import json
import random
import socket
import threading
from html import escape
from urllib.parse import parse_qsl, urlsplit

import requests

from fakes.http_server import ServedFake
from fakes.state_file import KeepsState

MAX_REQUEST_BYTES = 1 << 20
DELIVERY_TIMEOUT_S = 5.0
DEFAULT_HOLD_SECONDS = 12.0  # longer than the adapters' 10 s deadline: a held call is a timeout to them

API_FAULTS = ("fail", "timeout")
COMMON_WEBHOOK_FAULTS = ("webhook_lost", "webhook_duplicate", "wrong_amount")

# Outcomes of one webhook delivery, as deliveries() lists them.
DELIVERED = "delivered"  # the receiver answered 2xx
REFUSED = "refused"  # the receiver answered, not 2xx
UNREACHABLE = "unreachable"  # no answer (connection refused, timeout)
LOST = "lost"  # the webhook_lost fault: never sent
NO_WEBHOOK_URL = "no_webhook_url"


def utcnow():
    return datetime.datetime.now(datetime.timezone.utc)


def iso(value):
    """Providers' timestamp form: UTC, milliseconds, Z."""
    value = value.astimezone(datetime.timezone.utc)
    return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"


class Reply(Exception):
    """Ends request handling with this status and JSON body."""

    def __init__(self, status, body):
        super().__init__(status)
        self.status = status
        self.body = body


class FakeProvider(KeepsState, ServedFake):
    """The shared part of a fake provider. Subclasses implement the API (`_api`) and their payment actions."""

    server_name = "FakeProvider"
    thread_name = "fake-provider"
    webhook_faults = COMMON_WEBHOOK_FAULTS

    def __init__(self, host="127.0.0.1", port=0, webhook_url=None, seed=None, auto_pay_seconds=None):
        self._init_served(host, port)
        self.webhook_url = webhook_url
        self.auto_pay_seconds = auto_pay_seconds
        self._seed = seed
        self._lock = threading.RLock()
        self._timers = set()
        self._after_answer = threading.local()  # webhooks a call queued, sent once its answer is out
        self._rng = random.Random(seed)
        self._faults = self._no_faults()
        self._reset_counters()
        self._reset_state()

    # --- lifecycle ---------------------------------------------------------

    def _release(self):
        super()._release()  # releases held (timeout-fault) calls
        with self._lock:
            timers, self._timers = self._timers, set()
        for timer in timers:
            timer.cancel()

    # --- faults and counters -----------------------------------------------

    @property
    def fault_settings(self):
        rates = (*API_FAULTS, *self.webhook_faults)
        return (*(f"{name}_rate" for name in rates), "hold_seconds", "routes", "seed")

    def set_faults(self, **settings):
        """Change some fault settings; the others keep their value.

        fail_rate, timeout_rate (per API call), webhook_*_rate and
        wrong_amount_rate (per webhook delivery or payment completion), each a
        probability between 0 and 1; hold_seconds (how long a timeout-fault
        answer is held); routes (API route names the API faults apply to;
        empty: all); seed.
        """
        unknown = set(settings) - set(self.fault_settings)
        if unknown:
            raise ValueError(f"unknown fault settings: {', '.join(sorted(unknown))}")
        with self._lock:
            faults = dict(self._faults)
            for name, value in settings.items():
                if name.endswith("_rate"):
                    rate = float(value)
                    if not 0.0 <= rate <= 1.0:
                        raise ValueError(f"{name} must be between 0 and 1")
                    faults[name] = rate
            if faults["fail_rate"] + faults["timeout_rate"] > 1.0 + 1e-9:
                raise ValueError("fail_rate and timeout_rate add up to more than 1")
            if "hold_seconds" in settings:
                hold = float(settings["hold_seconds"])
                if hold < 0:
                    raise ValueError("hold_seconds must be >= 0")
                faults["hold_seconds"] = hold
            if "routes" in settings:
                routes = settings["routes"] or ()
                faults["routes"] = (routes,) if isinstance(routes, str) else tuple(routes)
            if "seed" in settings:
                self._rng = random.Random(settings["seed"])
            self._faults = faults
            return self._public_faults()

    def clear_faults(self):
        with self._lock:
            self._faults = self._no_faults()

    def faults(self):
        with self._lock:
            return self._public_faults()

    def stats(self):
        with self._lock:
            return {
                "calls": dict(self._calls),
                "faults_injected": dict(self._faults_injected),
                "rejected": dict(self._rejected),
                "deliveries": len(self._deliveries),
                **self._state_counts(),
            }

    def deliveries(self):
        """Every webhook delivery attempt, oldest first: event id, outcome, receiver's status."""
        with self._lock:
            return [dict(delivery) for delivery in self._deliveries]

    def reset(self):
        """Forget every payment, count, delivery and fault."""
        with self._lock:
            timers, self._timers = self._timers, set()
            self._reset_state()
            self._reset_counters()
            self._faults = self._no_faults()
            self._rng = random.Random(self._seed)
        for timer in timers:
            timer.cancel()

    def _no_faults(self):
        faults = {f"{name}_rate": 0.0 for name in (*API_FAULTS, *self.webhook_faults)}
        faults.update(hold_seconds=DEFAULT_HOLD_SECONDS, routes=())
        return faults

    def _public_faults(self):
        faults = dict(self._faults)
        faults["routes"] = list(faults["routes"])
        return faults

    def _reset_counters(self):
        self._calls = {}
        self._faults_injected = {}
        self._rejected = {}
        self._deliveries = []

    @staticmethod
    def _bump(counter, key):
        counter[key] = counter.get(key, 0) + 1

    def _draw(self, name):
        """True with the probability of fault `name` (counted when it fires); call under the lock."""
        rate = self._faults.get(f"{name}_rate", 0.0)
        fired = rate > 0 and self._rng.random() < rate
        if fired:
            self._bump(self._faults_injected, name)
        return fired

    def _draw_api_fault(self, route):
        with self._lock:
            routes = self._faults["routes"]
            if routes and route not in routes:
                return None, 0.0
            draw = self._rng.random()
            fault = None
            if draw < self._faults["fail_rate"]:
                fault = "fail"
            elif draw < self._faults["fail_rate"] + self._faults["timeout_rate"]:
                fault = "timeout"
            if fault:
                self._bump(self._faults_injected, fault)
            return fault, self._faults["hold_seconds"]

    # --- webhooks ----------------------------------------------------------

    def _deliver(self, event_id, body, headers):
        """POST one webhook to webhook_url, with the delivery faults; returns this delivery's records."""
        with self._lock:
            url = self.webhook_url
            lost = self._draw("webhook_lost")
            copies = 2 if self._draw("webhook_duplicate") else 1
        if not url:
            return [self._record_delivery(event_id, NO_WEBHOOK_URL)]
        if lost:
            return [self._record_delivery(event_id, LOST)]
        records = []
        for _ in range(copies):
            try:
                answer = requests.post(
                    url, data=body, headers=headers, timeout=DELIVERY_TIMEOUT_S, allow_redirects=False
                )
            except requests.RequestException:
                records.append(self._record_delivery(event_id, UNREACHABLE))
                continue
            outcome = DELIVERED if 200 <= answer.status_code < 300 else REFUSED
            records.append(self._record_delivery(event_id, outcome, answer.status_code))
        return records

    def _deliver_after_answer(self, event_id, body, headers):
        """Queue a webhook that an API call caused; it goes out once the call's answer has been sent
        (the call holds the fake's lock meanwhile, and a receiver may call the API back)."""
        queued = getattr(self._after_answer, "queue", None)
        if queued is None:
            queued = self._after_answer.queue = []
        queued.append((event_id, body, headers))

    def _flush_deliveries(self):
        queued, self._after_answer.queue = getattr(self._after_answer, "queue", None) or [], []
        for event_id, body, headers in queued:
            self._deliver(event_id, body, headers)

    def _record_delivery(self, event_id, outcome, status=None):
        record = {"event_id": event_id, "outcome": outcome, "status": status, "at": iso(utcnow())}
        with self._lock:
            self._deliveries.append(record)
        return dict(record)

    def _schedule_auto_pay(self, payment_id):
        if not self.auto_pay_seconds:
            return

        def pay():
            with self._lock:
                self._timers.discard(timer)
            if not self._stopping.is_set():
                try:
                    self.complete(payment_id)
                except (KeyError, ValueError):
                    pass  # completed or canceled by hand meanwhile
                self.save_state()

        timer = threading.Timer(float(self.auto_pay_seconds), pay)
        timer.daemon = True
        with self._lock:
            self._timers.add(timer)
        timer.start()

    # --- HTTP --------------------------------------------------------------

    def _serve(self, handler):
        try:
            self._dispatch(handler)
        except OSError:
            handler.close_connection = True  # the client went away
        finally:
            if handler.command != "GET":
                self.save_state()

    def _dispatch(self, handler):
        method = handler.command
        parts = urlsplit(handler.path)
        length = handler.headers.get("Content-Length")
        if length and (not (length.isascii() and length.isdigit()) or int(length) > MAX_REQUEST_BYTES):
            self._respond(handler, 413, {"error": "payload too large"}, close=True)
            return
        raw = handler.rfile.read(int(length)) if length else b""
        query = dict(parse_qsl(parts.query, keep_blank_values=True))
        if parts.path.startswith("/_fake/"):
            self._control_route(handler, method, parts.path, raw)
            return
        if parts.path.startswith("/checkout/"):
            self._checkout_route(handler, method, parts.path)
            return
        try:
            route, process = self._api(handler, method, parts.path, query, raw)
        except Reply as reply:
            self._respond(handler, reply.status, reply.body)
            return
        with self._lock:
            self._bump(self._calls, route)
        fault, hold = self._draw_api_fault(route)
        if fault == "fail":
            self._respond(handler, *self._server_error())
            return
        try:
            status, body = process()
        except Reply as reply:
            status, body = reply.status, reply.body
        try:
            if fault == "timeout":
                # The work is done; its answer never comes: held past the client's deadline, then the socket closes.
                self._stopping.wait(hold)
                self._drop(handler)
                return
            self._respond(handler, status, body)
        finally:
            self._flush_deliveries()

    def _respond(self, handler, status, body, close=False):
        data = json.dumps(body, separators=(",", ":")).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json; charset=utf-8")
        handler.send_header("Content-Length", str(len(data)))
        if close:
            handler.send_header("Connection", "close")
            handler.close_connection = True
        handler.end_headers()
        handler.wfile.write(data)

    @staticmethod
    def _drop(handler):
        handler.close_connection = True
        try:
            handler.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _control_route(self, handler, method, path, raw):
        if not self._authorized(handler):
            self._respond(handler, 401, {"error": "unauthorized"})
            return
        try:
            payload = json.loads(raw) if raw else {}
            if not isinstance(payload, dict):
                raise ValueError("body must be a JSON object")
            status, body = self._control(method, path, payload)
        except KeyError:
            status, body = 404, {"error": "no such payment"}
        except (ValueError, TypeError) as error:
            status, body = 400, {"error": str(error)}
        self._respond(handler, status, body)

    def _control(self, method, path, payload):
        if method == "GET" and path == "/_fake/stats":
            return 200, self.stats()
        if method == "GET" and path == "/_fake/deliveries":
            return 200, {"deliveries": self.deliveries()}
        if method == "GET" and path == "/_fake/faults":
            return 200, self.faults()
        if method == "POST" and path == "/_fake/faults":
            if payload.pop("clear", False):
                self.clear_faults()
            return 200, self.set_faults(**payload)
        if method == "POST" and path == "/_fake/reset":
            self.reset()
            return 200, {"reset": True}
        if method == "POST" and path == "/_fake/webhook":
            self.webhook_url = payload.get("url") or None
            return 200, {"url": self.webhook_url}
        return self._payment_control(method, path, payload)

    def _checkout_route(self, handler, method, path):
        parts = path.strip("/").split("/")
        try:
            if method == "GET" and len(parts) == 2:
                summary = self._checkout_summary(parts[1])
                self._html(handler, 200, _checkout_page(parts[1], summary))
                return
            if method == "POST" and len(parts) == 3 and parts[2] in ("pay", "cancel"):
                target = self.complete(parts[1]) if parts[2] == "pay" else self.cancel(parts[1])
                handler.send_response(303)
                handler.send_header("Location", target or f"/checkout/{parts[1]}")
                handler.send_header("Content-Length", "0")
                handler.end_headers()
                return
        except KeyError:
            self._html(handler, 404, "<p>No such payment.</p>")
            return
        except ValueError as error:
            self._html(handler, 409, f"<p>{escape(str(error))}</p>")
            return
        self._html(handler, 404, "<p>Not found.</p>")

    @staticmethod
    def _html(handler, status, text):
        data = f"<!doctype html><meta charset=utf-8><title>Fake checkout</title>{text}".encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "text/html; charset=utf-8")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    # --- what a fake provider implements ------------------------------------

    def _reset_state(self):
        raise NotImplementedError

    def _state_counts(self):
        raise NotImplementedError

    def _authorized(self, handler):
        raise NotImplementedError

    def _api(self, handler, method, path, query, raw):
        """(route name, a function answering (status, body)); raise Reply to answer before any fault applies."""
        raise NotImplementedError

    def _server_error(self):
        raise NotImplementedError

    def _payment_control(self, method, path, payload):
        raise NotImplementedError

    def _checkout_summary(self, payment_id):
        """(amount text, currency, status) of a payment for the payer's page; KeyError when there is none."""
        raise NotImplementedError

    def complete(self, payment_id):
        """Mark a payment paid and deliver its webhook; returns where the payer goes next (or None)."""
        raise NotImplementedError

    def cancel(self, payment_id):
        raise NotImplementedError


def _checkout_page(payment_id, summary):
    amount, currency, status = summary
    buttons = ""
    if status in ("pending", "active"):
        buttons = (
            f'<form method=post action="/checkout/{escape(payment_id)}/pay"><button>Pay</button></form>'
            f'<form method=post action="/checkout/{escape(payment_id)}/cancel"><button>Cancel</button></form>'
        )
    return (
        f"<h1>Fake checkout</h1><p>Payment {escape(payment_id)}: {escape(amount)} {escape(currency)}, "
        f"{escape(status)}.</p>{buttons}"
    )
