"""Outbound webhooks: POST one event to one destination, signed the Standard Webhooks way (SPEC 15.2).

The signature comes from `standardwebhooks`, the specification's reference
library: `webhook-id` (the event id; receivers deduplicate on it),
`webhook-timestamp` (Unix seconds, taken at each attempt: receivers refuse a
timestamp more than five minutes off) and `webhook-signature` (`v1,` and the
base64 HMAC-SHA256 of `id.timestamp.body` under the destination's secret).

Each attempt has a 10 s deadline to connect and to each read, follows no
redirect (a signed event is not carried to another host), and reads at most
64 KiB of the answer (only its status matters). A 2xx answer is delivered;
everything else is a classified failure whose code is one of:

- `webhook_http_<status>`: a non-2xx, non-3xx answer
- `webhook_redirect`: a 3xx answer
- `webhook_timeout`: no answer within the deadline
- `webhook_unavailable`: the connection failed, was refused or dropped

No code, message or log line of this module carries the secret, a body or a
URL path.
"""

import datetime
from dataclasses import dataclass
from urllib.parse import urlsplit

import requests
from standardwebhooks import Webhook

from integrations.transport import KeepAliveAdapter

TIMEOUT_S = 10
MAX_ANSWER_BYTES = 64 * 1024
USER_AGENT = "Omniflow-Outbox/1"

HTTP_PREFIX = "webhook_http_"
WEBHOOK_REDIRECT = "webhook_redirect"
WEBHOOK_TIMEOUT = "webhook_timeout"
WEBHOOK_UNAVAILABLE = "webhook_unavailable"


@dataclass(frozen=True)
class Answer:
    delivered: bool
    code: str = None  # the failure's code; None when delivered
    status: int = None


def signature_headers(secret, message_id, body, timestamp):
    """The three Standard Webhooks headers for `body` (text) sent at `timestamp` (whole Unix seconds)."""
    signed_at = datetime.datetime.fromtimestamp(int(timestamp), datetime.timezone.utc)
    return {
        "webhook-id": str(message_id),
        "webhook-timestamp": str(int(timestamp)),
        "webhook-signature": Webhook(secret).sign(str(message_id), signed_at, body),
    }


class WebhookSender:
    """Thread-safe: each worker thread keeps its own kept-alive connection per
    destination (integrations/transport.py). Requests go straight to the
    transport adapter, as the Remnawave adapter's do: no cookies, hooks or
    redirects apply, and the environment's proxy and CA settings are read once
    per origin, not on every call."""

    def __init__(self, timeout=TIMEOUT_S):
        self.timeout = timeout
        self._adapter = KeepAliveAdapter()
        self._environment = {}
        self._session = requests.Session()

    def _settings_for(self, url):
        parts = urlsplit(url)
        origin = (parts.scheme, parts.netloc)
        settings = self._environment.get(origin)
        if settings is None:
            settings = self._session.merge_environment_settings(url, {}, None, None, None)
            self._environment[origin] = settings
        return settings

    def post(self, url, secret, message_id, body, timestamp):
        request = requests.PreparedRequest()
        try:
            request.prepare_method("POST")
            request.prepare_url(url, None)
            request.prepare_headers(
                {
                    "User-Agent": USER_AGENT,
                    "Content-Type": "application/json",
                    **signature_headers(secret, message_id, body, timestamp),
                }
            )
            request.prepare_body(body.encode(), None)
            settings = self._settings_for(url)
            response = self._adapter.send(
                request,
                stream=True,
                timeout=(self.timeout, self.timeout),
                verify=settings["verify"],
                proxies=settings["proxies"],
            )
        except requests.Timeout:
            return Answer(False, WEBHOOK_TIMEOUT)
        except requests.RequestException:
            return Answer(False, WEBHOOK_UNAVAILABLE)
        try:
            _drain(response)
        except requests.Timeout:
            return Answer(False, WEBHOOK_TIMEOUT, response.status_code)
        except requests.RequestException:
            return Answer(False, WEBHOOK_UNAVAILABLE, response.status_code)
        status = response.status_code
        if 200 <= status < 300:
            return Answer(True, None, status)
        if 300 <= status < 400:
            return Answer(False, WEBHOOK_REDIRECT, status)
        return Answer(False, f"{HTTP_PREFIX}{status}", status)

    def close(self):
        self._adapter.close()


def _drain(response):
    """Read the answer to its end (so the connection can be reused), or give the connection up past the cap."""
    read = 0
    while True:
        chunk = response.raw.read(16 * 1024)
        if not chunk:
            return
        read += len(chunk)
        if read > MAX_ANSWER_BYTES:
            response.close()
            return
