"""Payment providers' webhooks (SPEC 13.6): the HTTP side of commerce/webhooks.py.

POST /v1/webhooks/yookassa     YooKassa notifications (unsigned: confirmed by fetching the payment)
POST /v1/webhooks/cryptobot    Crypto Pay updates (header crypto-pay-api-signature)

No operator credentials: a delivery proves itself (a signature, or the
provider's API confirming it, which the delivery's job asks). A client
address (behind APP_TRUSTED_PROXY, the one its X-Forwarded-For gives; an
IPv6 client's /64) making more than APP_WEBHOOK_RATE_LIMIT requests a minute
to these routes gets a 429 with Retry-After and nothing is written: a
provider delivers again after it, a flood of junk costs at most that many
rows a minute. A body over 64 KiB is refused with 413 before anything is
written; a provider this shop has not configured is a 404 and nothing is
written either. A YooKassa notification from outside
APP_YOOKASSA_WEBHOOK_ADDRESSES (the ranges YooKassa notifies from) is a 403,
kept as a rejected delivery for audit. Every other delivery is stored first
and answered at once: 200 `{"outcome": "accepted"}` when it is stored with
the job that confirms and applies it (the provider need not deliver it
again), 200 `{"outcome": "replayed"}` for an event already applied, 401 for
a bad signature, 400 for a malformed one, 503 when the database cannot store
it (the provider delivers again). Maintenance never refuses a webhook (SPEC
13.12). A body is never logged or echoed.

The rate limit is a token bucket per address held by each web process, so
with N web processes an address may make N times as many; a real provider's
burst stays far below even one process's.
"""

import ipaddress
import math
import threading
import time

import bottle

from commerce import webhooks
from commerce.providers import HOSTED, PROVIDER_NOT_CONFIGURED
from integrations.payments import BAD_SIGNATURE, MALFORMED_WEBHOOK
from models.payments import WEBHOOK_BODY_LIMIT
from ops.operators import throttle_address
from web import problems
from web.answers import answered, client_address, json_answer, plain_digits, require_schema
from web.problems import Problem

BODY_TOO_LARGE = problems.BODY_TOO_LARGE
DETAILS = {
    BAD_SIGNATURE: "the delivery's signature does not verify",
    MALFORMED_WEBHOOK: "the delivery is not one of this provider's documented notifications",
}
# Past this many addresses, the buckets that have filled up again are forgotten (they hold nothing).
TRACKED_ADDRESSES = 10_000


def build(providers, settings):
    app = bottle.Bottle()
    problems.install(app)
    limit = AddressLimit(settings.webhook_rate_limit)
    senders = {"yookassa": settings.yookassa_webhook_addresses}
    for name in HOSTED:
        app.post(f"/v1/webhooks/{name}", callback=_intake(providers, name, limit, senders.get(name)))
    return app


def _intake(providers, name, limit, senders):
    def route():
        return answered(_receive, providers.get(name), name, limit, senders)

    return route


def _receive(adapter, name, limit, senders):
    address = client_address()
    wait = limit.wait(throttle_address(address))
    if wait:
        bottle.response.set_header("Retry-After", str(wait))
        raise Problem(429, problems.TOO_MANY_REQUESTS, "too many webhook requests from this address; deliver it later")
    if adapter is None:
        raise Problem(404, PROVIDER_NOT_CONFIGURED, f"{name} is not configured here")
    body = _capped_body()
    require_schema(problems.DATABASE_UNAVAILABLE, "the database")
    if senders is not None and not _among(address, senders):
        webhooks.reject(name, body, bottle.request.headers, address, webhooks.ADDRESS_REFUSED)
        raise Problem(403, webhooks.ADDRESS_REFUSED, f"{name} does not deliver from this address")
    intake = webhooks.receive(adapter, body, bottle.request.headers, address)
    if intake.status == 200:
        return json_answer(200, {"outcome": intake.outcome})
    raise Problem(intake.status, intake.outcome, DETAILS[intake.outcome])


def _among(address, networks):
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    if ip.version == 6 and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    return any(ip in network for network in networks)


def _capped_body():
    """The raw body, or a 413 when it is over the cap (read no further than the cap and one byte)."""
    declared = bottle.request.get_header("Content-Length", "")
    if declared and plain_digits(declared) and int(declared) > WEBHOOK_BODY_LIMIT:
        raise Problem(413, BODY_TOO_LARGE, f"a webhook body is at most {WEBHOOK_BODY_LIMIT} bytes")
    body = bottle.request.body.read(WEBHOOK_BODY_LIMIT + 1)
    if len(body) > WEBHOOK_BODY_LIMIT:
        raise Problem(413, BODY_TOO_LARGE, f"a webhook body is at most {WEBHOOK_BODY_LIMIT} bytes")
    return body


class AddressLimit:
    """`per_minute` requests per address, refilled evenly over the minute, a whole minute's worth at once
    at most (a token bucket per address)."""

    def __init__(self, per_minute, clock=time.monotonic):
        self.per_minute = per_minute
        self.clock = clock
        self._buckets = {}  # address → (tokens left, when counted)
        self._forget_past = TRACKED_ADDRESSES
        self._lock = threading.Lock()

    def wait(self, address):
        """0 when a request from `address` may go on now (and counts it), else the whole seconds until one may."""
        now, rate = self.clock(), self.per_minute / 60
        with self._lock:
            tokens, counted = self._buckets.get(address, (self.per_minute, now))
            tokens = min(self.per_minute, tokens + (now - counted) * rate)
            if tokens < 1:
                self._buckets[address] = (tokens, now)
                return max(1, math.ceil((1 - tokens) / rate))
            self._buckets[address] = (tokens - 1, now)
            if len(self._buckets) > self._forget_past:
                self._forget_full(now, rate)
            return 0

    def _forget_full(self, now, rate):
        self._buckets = {
            address: (tokens, counted)
            for address, (tokens, counted) in self._buckets.items()
            if tokens + (now - counted) * rate < self.per_minute
        }
        self._forget_past = max(TRACKED_ADDRESSES, 2 * len(self._buckets))
