"""One HTTP exchange with a payment provider: a deadline, an answer cap, no redirect, transport failures classified.

Both provider adapters send through here (YooKassa's SDK hands its requests to
it, integrations/payments/yookassa.py says why). The call has one deadline for
connect, answer and body; the answer is read up to MAX_ANSWER_BYTES; a 3xx is
never followed (credentials must never be carried to another host). Every
transport failure becomes ProviderError(provider_unavailable) with a fixed
`detail`; an HTTP answer of any status comes back for the adapter to classify.
Sessions are per thread, over the kept-alive transport of integrations/transport.py.
"""

import dataclasses
import threading
import time
from urllib.parse import urlsplit

import requests

from integrations.payments import (
    DETAIL_OVERSIZED,
    DETAIL_REDIRECT,
    DETAIL_TIMEOUT,
    DETAIL_TRANSPORT,
    PROVIDER_UNAVAILABLE,
    ProviderError,
)
from integrations.transport import keepalive_session

CONNECT_TIMEOUT_S = 5
REQUEST_TIMEOUT_S = 10  # the whole call
MAX_ANSWER_BYTES = 1 << 20
_CHUNK = 64 * 1024


@dataclasses.dataclass(frozen=True)
class Answer:
    status: int
    body: bytes = dataclasses.field(repr=False)


def validate_base_url(base_url):
    """An http(s) base URL without credentials, query or fragment; ValueError otherwise (the message names no part)."""
    text = str(base_url or "").strip()
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("the provider API URL must be an http:// or https:// URL")
    if parts.username or parts.password or parts.query or parts.fragment:
        raise ValueError("the provider API URL must carry no credentials, query or fragment")
    return text.rstrip("/")


class ProviderHttp:
    """Sends requests to one provider's API base URL; thread-safe."""

    def __init__(self, provider, base_url, timeout=REQUEST_TIMEOUT_S):
        self.provider = provider
        self.base_url = validate_base_url(base_url)
        parts = urlsplit(self.base_url)
        self.origin = f"{parts.scheme}://{parts.hostname}" + (f":{parts.port}" if parts.port else "")
        self.timeout = float(timeout)
        self._local = threading.local()

    def send(self, method, path, headers, json_body=None, params=None):
        """One call → Answer(status, body) for any HTTP status; ProviderError(provider_unavailable) otherwise."""
        started = time.monotonic()
        deadline = started + self.timeout
        try:
            session = self._session()
            request = requests.PreparedRequest()
            request.prepare_method(method)
            request.prepare_url(self.base_url + path, params)
            request.prepare_headers(headers)
            request.prepare_body(None, None, json=json_body)
            # Straight to the transport adapter: the session layer would follow redirects.
            response = session.get_adapter(request.url).send(
                request,
                timeout=(min(CONNECT_TIMEOUT_S, self.timeout), self.timeout),
                stream=True,
                verify=session.verify,
                cert=session.cert,
                proxies=session.proxies,
            )
        except requests.Timeout:
            raise self._unavailable(DETAIL_TIMEOUT) from None
        except requests.RequestException:
            raise self._unavailable(DETAIL_TRANSPORT) from None
        try:
            if 300 <= response.status_code < 400:
                raise self._unavailable(DETAIL_REDIRECT, response.status_code)
            body = self._read_capped(response, deadline)
        finally:
            response.close()
        return Answer(response.status_code, body)

    def _session(self):
        session = getattr(self._local, "session", None)
        if session is None:
            session = self._local.session = keepalive_session(self.base_url)
        return session

    def _unavailable(self, detail, status=None):
        return ProviderError(PROVIDER_UNAVAILABLE, provider=self.provider, status=status, detail=detail)

    def _read_capped(self, response, deadline):
        declared = response.headers.get("Content-Length")
        if declared and declared.isascii() and declared.isdigit() and int(declared) > MAX_ANSWER_BYTES:
            raise self._unavailable(DETAIL_OVERSIZED, response.status_code)
        chunks, size = [], 0
        try:
            for chunk in response.iter_content(chunk_size=_CHUNK):
                size += len(chunk)
                if size > MAX_ANSWER_BYTES:
                    raise self._unavailable(DETAIL_OVERSIZED, response.status_code)
                if time.monotonic() > deadline:
                    raise self._unavailable(DETAIL_TIMEOUT, response.status_code)
                chunks.append(chunk)
        except requests.Timeout:
            raise self._unavailable(DETAIL_TIMEOUT) from None
        except requests.RequestException:
            raise self._unavailable(DETAIL_TRANSPORT) from None
        return b"".join(chunks)
