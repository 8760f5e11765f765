"""A fake webhook receiver: a real HTTP server that verifies Standard Webhooks signatures and records what arrived.

Every POST is checked with `standardwebhooks` against the receiver's secret
(a bad or missing signature is answered 401 and counted, never recorded as
accepted). An accepted request is recorded with its arrival order,
`webhook-id` and parsed body. On demand it misbehaves as receivers do:

- `fail_rate`: that share of requests is answered 500 (nothing recorded);
- `timeout_rate`: that share is held `hold_seconds` before it is answered
  (longer than the sender waits: a timeout to it) and then recorded, as a
  receiver that did the work but answered too late;
- `latency_ms`: every answer comes this long after the request arrived;
- `down_for(seconds)`: until then every connection is closed unanswered.

Tests drive it from Python; a benchmark in another process drives it over
HTTP (`GET /_fake/stats`, `POST /_fake/reset`, `POST /_fake/faults`), or
`python -m fakes.webhook_receiver --secret whsec_… [--port N]`.
"""

import argparse
import json
import random
import threading
import time
from dataclasses import dataclass

from standardwebhooks import Webhook, WebhookVerificationError

from fakes.http_server import ServedFake, close_connection

MAX_REQUEST_BYTES = 1 << 20
DEFAULT_HOLD_SECONDS = 12.0  # past the publisher's 10 s deadline
HOOK_PATH = "/hooks"
FAULTS = ("fail_rate", "timeout_rate", "latency_ms", "hold_seconds")


@dataclass(frozen=True)
class Accepted:
    sequence: int  # arrival order among accepted requests, from 1
    webhook_id: str
    body: dict
    at: float  # time.monotonic() when it was recorded


class FakeWebhookReceiver(ServedFake):
    """start() serves on a background thread; `url` is where to send webhooks."""

    server_name = "FakeWebhookReceiver"
    thread_name = "fake-webhooks"

    def __init__(self, secret, host="127.0.0.1", port=0, seed=None):
        self._init_served(host, port)
        self.secret = secret
        self._webhook = Webhook(secret)
        self._seed = seed
        self._lock = threading.Lock()
        self.reset()

    @property
    def url(self):
        return self.base_url + HOOK_PATH

    # --- test controls -----------------------------------------------------

    def reset(self):
        """Forget everything received and every fault."""
        with self._lock:
            self._accepted = []
            counted = ("requests", "failed", "held", "refused", "aborted", "invalid_signatures")
            self._counts = dict.fromkeys(counted, 0)
            self._faults = {
                "fail_rate": 0.0,
                "timeout_rate": 0.0,
                "latency_ms": 0.0,
                "hold_seconds": DEFAULT_HOLD_SECONDS,
            }
            self._down_until = 0.0
            self._rng = random.Random(self._seed)

    def set_faults(self, **faults):
        unknown = set(faults) - set(FAULTS)
        if unknown:
            raise ValueError(f"unknown faults: {', '.join(sorted(unknown))}")
        with self._lock:
            merged = {**self._faults, **{name: float(value) for name, value in faults.items()}}
            if not 0 <= merged["fail_rate"] + merged["timeout_rate"] <= 1:
                raise ValueError("fail_rate and timeout_rate add up to between 0 and 1")
            self._faults = merged
        return dict(merged)

    def down_for(self, seconds):
        """Close every connection unanswered for the next `seconds`, open ones included."""
        with self._lock:
            self._down_until = time.monotonic() + seconds
        if self._server is not None:
            self._server.close_open_connections()

    @property
    def is_down(self):
        return time.monotonic() < self._down_until

    def accepted(self):
        """Accepted requests in arrival order (a redelivered event appears again)."""
        with self._lock:
            return list(self._accepted)

    def stats(self):
        with self._lock:
            accepted = self._accepted
            return {
                **self._counts,
                "accepted": len(accepted),
                "distinct": len({item.webhook_id for item in accepted}),
                "first_at": accepted[0].at if accepted else None,
                "last_at": accepted[-1].at if accepted else None,
            }

    # --- serving -----------------------------------------------------------

    def _serve(self, handler):
        if self.is_down:
            with self._lock:
                self._counts["refused"] += 1
            handler.close_connection = True
            close_connection(handler.connection)
            return
        length = int(handler.headers.get("Content-Length") or 0)
        if length > MAX_REQUEST_BYTES:
            return self._answer(handler, 413, {"error": "too large"})
        body = handler.rfile.read(length) if length else b""
        if len(body) < length:
            # The sender went away mid-request (a worker killed while posting):
            # nothing arrived to verify, and nobody is left to answer.
            with self._lock:
                self._counts["aborted"] += 1
            handler.close_connection = True
            return
        if handler.path.startswith("/_fake/"):
            return self._control(handler, body)
        if handler.command != "POST" or handler.path != HOOK_PATH:
            return self._answer(handler, 404, {"error": "no such route"})
        with self._lock:
            self._counts["requests"] += 1
            draw = self._rng.random()
            faults = dict(self._faults)
        try:
            payload = self._webhook.verify(body.decode(), dict(handler.headers))
        except (WebhookVerificationError, ValueError):
            with self._lock:
                self._counts["invalid_signatures"] += 1
            return self._answer(handler, 401, {"error": "invalid signature"})
        if draw < faults["fail_rate"]:
            with self._lock:
                self._counts["failed"] += 1
            return self._answer(handler, 500, {"error": "injected failure"}, handler.arrived, faults)
        if draw < faults["fail_rate"] + faults["timeout_rate"]:
            with self._lock:
                self._counts["held"] += 1
            if self._stopping.wait(faults["hold_seconds"]):
                return
        self._record(handler.headers["webhook-id"], payload)
        return self._answer(handler, 204, None, handler.arrived, faults)

    def _record(self, webhook_id, payload):
        with self._lock:
            self._accepted.append(Accepted(len(self._accepted) + 1, webhook_id, payload, time.monotonic()))

    def _answer(self, handler, status, body, arrived=None, faults=None):
        if faults and faults["latency_ms"] and arrived is not None:
            delay = arrived + faults["latency_ms"] / 1000 - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        data = b"" if body is None else json.dumps(body).encode()
        handler.send_response(status)
        if data:
            handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        if data:
            handler.wfile.write(data)

    def _control(self, handler, body):
        try:
            payload = json.loads(body or b"{}")
            if handler.command == "GET" and handler.path == "/_fake/stats":
                return self._answer(handler, 200, self.stats())
            if handler.command == "POST" and handler.path == "/_fake/reset":
                self.reset()
                return self._answer(handler, 200, {"reset": True})
            if handler.command == "POST" and handler.path == "/_fake/faults":
                return self._answer(handler, 200, self.set_faults(**payload))
        except (ValueError, TypeError) as error:
            return self._answer(handler, 400, {"error": str(error)})
        return self._answer(handler, 404, {"error": "no such control route"})


def main(argv=None):
    parser = argparse.ArgumentParser(description="a fake Standard Webhooks receiver")
    parser.add_argument("--secret", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    receiver = FakeWebhookReceiver(args.secret, host=args.host, port=args.port).start()
    print(f"fake webhook receiver on {receiver.url}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        receiver.stop()


if __name__ == "__main__":
    main()
