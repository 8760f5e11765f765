"""SPEC 15.2: the webhook adapter signs the Standard Webhooks way (checked by the
specification's own library in a real receiver), and classifies every failure."""

import base64
import hashlib
import hmac
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from standardwebhooks import Webhook

from fakes.webhook_receiver import FakeWebhookReceiver
from integrations import webhooks
from ops.outbox import generate_secret

SECRET = generate_secret()
BODY = json.dumps({"type": "order.paid", "timestamp": "2026-12-01T10:00:00.000Z", "data": {"orderId": 7}})


@pytest.fixture
def receiver():
    with FakeWebhookReceiver(SECRET, seed=7) as fake:
        yield fake


@pytest.fixture
def sender():
    sender = webhooks.WebhookSender(timeout=0.5, allow_private=True)  # the receivers listen on 127.0.0.1
    yield sender
    sender.close()


def test_a_post_is_signed_so_the_reference_library_verifies_it(receiver, sender):
    answer = sender.post(receiver.url, SECRET, 41, BODY, time.time())
    assert answer == webhooks.Answer(True, None, 204)
    (accepted,) = receiver.accepted()
    assert accepted.webhook_id == "41" and accepted.body == json.loads(BODY)
    assert receiver.stats()["invalid_signatures"] == 0


def test_the_headers_are_id_timestamp_and_a_v1_signature_of_id_timestamp_body():
    headers = webhooks.signature_headers(SECRET, 41, BODY, 1_780_000_000.9)
    assert headers["webhook-id"] == "41" and headers["webhook-timestamp"] == "1780000000"
    version, signature = headers["webhook-signature"].split(",")
    assert version == "v1"
    key = base64.b64decode(SECRET.removeprefix("whsec_"))
    expected = base64.b64encode(hmac.new(key, f"41.1780000000.{BODY}".encode(), hashlib.sha256).digest()).decode()
    assert signature == expected


def test_a_signature_under_another_secret_is_refused_by_the_receiver(receiver, sender):
    answer = sender.post(receiver.url, generate_secret(), 41, BODY, time.time())
    assert answer == webhooks.Answer(False, "webhook_http_401", 401)
    assert receiver.accepted() == [] and receiver.stats()["invalid_signatures"] == 1


def test_a_stale_timestamp_is_refused_by_the_receiver(receiver, sender):
    answer = sender.post(receiver.url, SECRET, 41, BODY, time.time() - 600)
    assert answer.code == "webhook_http_401" and receiver.accepted() == []


def test_failures_are_classified_without_anything_of_the_answer(receiver, sender):
    receiver.set_faults(fail_rate=1.0)
    assert sender.post(receiver.url, SECRET, 1, BODY, time.time()) == webhooks.Answer(False, "webhook_http_500", 500)
    receiver.set_faults(fail_rate=0.0, timeout_rate=1.0, hold_seconds=2)
    assert sender.post(receiver.url, SECRET, 2, BODY, time.time()).code == "webhook_timeout"
    receiver.set_faults(timeout_rate=0.0)
    receiver.down_for(5)
    assert sender.post(receiver.url, SECRET, 3, BODY, time.time()).code == "webhook_unavailable"
    nothing_listens = receiver.base_url.rsplit(":", 1)[0] + ":9"
    assert sender.post(nothing_listens + "/hooks", SECRET, 4, BODY, time.time()).code == "webhook_unavailable"


class _Fixed(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        status, body, headers = self.server.answer
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def fixed():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Fixed)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_a_redirect_is_not_followed_and_a_large_answer_is_not_read_past_the_cap(fixed, sender):
    url = f"http://127.0.0.1:{fixed.server_address[1]}/hooks"
    fixed.answer = (307, b"", {"Location": "http://127.0.0.2:9/elsewhere"})
    assert sender.post(url, SECRET, 1, BODY, time.time()) == webhooks.Answer(False, "webhook_redirect", 307)
    fixed.answer = (200, b"x" * (webhooks.MAX_ANSWER_BYTES * 4), {})
    assert sender.post(url, SECRET, 2, BODY, time.time()) == webhooks.Answer(True, None, 200)
    fixed.answer = (202, b"{}", {})
    assert sender.post(url, SECRET, 3, BODY, time.time()).delivered  # the connection was replaced, not reused


def test_the_receiver_verifies_with_the_reference_library():
    # What the fake checks is what a real receiver built on the library checks.
    headers = webhooks.signature_headers(SECRET, "msg_1", BODY, time.time())
    assert Webhook(SECRET).verify(BODY, headers) == json.loads(BODY)
