"""The goods provider adapter (SPEC 15.4): buy one product for one order, and say what came of it.

`GoodsClient.submit(reference, sku, recipient)` POSTs `/v1/orders` with the
order's reference (also the `Idempotency-Key`) and returns the `Delivered`
payload, or raises `GoodsFailure` with a failure class that tells the
delivery job what may happen next:

| class | when | bought? |
| - | - | - |
| `retryable` | 429, 503 `retry_later` | no |
| `provider_unavailable` | no connection could be opened; 401/403 (our credentials) | no |
| `provider_balance` | 402 `insufficient_balance` | no |
| `recipient_invalid` | 422 `invalid_recipient` | no |
| `permanent` | any other 4xx (`unknown_sku`, bad request) | no |
| `ambiguous` | sent and not answered (timeout, dropped), a 5xx but 503, an unreadable answer | perhaps |

Only an `ambiguous` failure may have bought something; the delivery job
never repeats such a call without an operator (SPEC 3.1). An exception that
is not a GoodsFailure is the job's `adapter_error`, as ambiguous as they come.
Each call has a 10 s timeout and a 64 KiB answer cap; redirects are not
followed; the token and the payload never reach an error or a log.
"""

import json
import threading
from dataclasses import dataclass

import requests

from integrations.transport import ConnectFailed, keepalive_session

REQUEST_TIMEOUT_S = 10
MAX_BODY_BYTES = 64 << 10

RETRYABLE = "retryable"
PERMANENT = "permanent"
RECIPIENT_INVALID = "recipient_invalid"
PROVIDER_BALANCE = "provider_balance"
PROVIDER_UNAVAILABLE = "provider_unavailable"
AMBIGUOUS = "ambiguous"
ADAPTER_ERROR = "adapter_error"  # what the job calls an exception that is none of these
FAILURE_CLASSES = (RETRYABLE, PERMANENT, RECIPIENT_INVALID, PROVIDER_BALANCE, PROVIDER_UNAVAILABLE, AMBIGUOUS,
                   ADAPTER_ERROR)  # fmt: skip
_BY_ERROR_CODE = {
    "retry_later": RETRYABLE,
    "insufficient_balance": PROVIDER_BALANCE,
    "invalid_recipient": RECIPIENT_INVALID,
}


@dataclass(frozen=True)
class Delivered:
    provider_reference: str  # the provider's id of the purchase
    payload: dict  # what the customer gets: {"code": …} and/or {"link": …}; a secret


class GoodsFailure(Exception):
    """A classified failure; `code` is short and machine-readable (never a provider body)."""

    def __init__(self, failure_class, code):
        super().__init__(f"{failure_class}: {code}")
        self.failure_class = failure_class
        self.code = code


class GoodsClient:
    def __init__(self, base_url, token, timeout=REQUEST_TIMEOUT_S):
        self._base_url = base_url.rstrip("/")
        self._token = token
        self._timeout = timeout
        self._local = threading.local()

    def submit(self, reference, sku, recipient):
        """Buy `sku` for `recipient` once under `reference`; Delivered or GoodsFailure."""
        body = {"reference": reference, "sku": sku, "recipient": recipient}
        request = requests.PreparedRequest()
        request.prepare_method("POST")
        request.prepare_url(self._base_url + "/v1/orders", None)
        request.prepare_headers(
            {"Authorization": f"Bearer {self._token}", "Idempotency-Key": reference, "Accept": "application/json"}
        )
        request.prepare_body(None, None, json=body)
        session = self._session()
        try:
            response = session.get_adapter(request.url).send(
                request, timeout=(self._timeout, self._timeout), stream=True, verify=session.verify
            )
        except (ConnectFailed, requests.ConnectTimeout):
            raise GoodsFailure(PROVIDER_UNAVAILABLE, "goods_provider_unreachable") from None
        except requests.RequestException:
            raise GoodsFailure(AMBIGUOUS, "goods_no_answer") from None
        try:
            status = response.status_code
            raw = self._read_capped(response)
        finally:
            response.close()
        return _outcome(status, raw)

    def _session(self):
        session = getattr(self._local, "session", None)
        if session is None:
            session = self._local.session = keepalive_session(self._base_url)
        return session

    @staticmethod
    def _read_capped(response):
        try:
            raw = response.raw.read(MAX_BODY_BYTES + 1)
        except Exception:  # a timeout or a dropped socket mid-body: it may have been bought
            raise GoodsFailure(AMBIGUOUS, "goods_answer_unreadable") from None
        if len(raw) > MAX_BODY_BYTES:
            raise GoodsFailure(AMBIGUOUS, "goods_answer_oversized")
        return raw


def _outcome(status, raw):
    try:
        answer = json.loads(raw) if raw else None
    except (ValueError, UnicodeDecodeError):
        answer = None
    if 200 <= status < 300:
        order = answer.get("order") if isinstance(answer, dict) else None
        payload = order.get("payload") if isinstance(order, dict) else None
        if not isinstance(payload, dict) or not isinstance(order.get("id"), str) or order.get("status") != "delivered":
            raise GoodsFailure(AMBIGUOUS, "goods_answer_unreadable")
        kept = {key: payload[key] for key in ("code", "link") if isinstance(payload.get(key), str)}
        if not kept:
            raise GoodsFailure(AMBIGUOUS, "goods_answer_unreadable")
        return Delivered(order["id"], kept)
    error = answer.get("error") if isinstance(answer, dict) else None
    code = error.get("code") if isinstance(error, dict) and isinstance(error.get("code"), str) else None
    if (code in _BY_ERROR_CODE and status < 500) or (code == "retry_later" and status == 503):
        return _raise(_BY_ERROR_CODE[code], f"goods_{code}")
    if status == 429:
        return _raise(RETRYABLE, "goods_http_429")
    if status in (401, 403):
        return _raise(PROVIDER_UNAVAILABLE, f"goods_http_{status}")
    if 400 <= status < 500 and status not in (408,):
        return _raise(
            PERMANENT, f"goods_{code}" if code in ("unknown_sku", "invalid_request") else f"goods_http_{status}"
        )
    return _raise(AMBIGUOUS, f"goods_http_{status}")


def _raise(failure_class, code):
    raise GoodsFailure(failure_class, code)
