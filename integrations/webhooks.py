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
- `webhook_address_refused`: the host resolved only to addresses signed
  events may not go to

Unless private destinations are allowed (`WebhookSender(allow_private=True)`,
APP_OUTBOX_ALLOW_PRIVATE_DESTINATIONS for on-premises receivers), a
connection goes only to a public address: the host is resolved as the
connection opens and the address connected to is the one checked (the Host
header and TLS name stay the URL's host), so a name that later resolves to
loopback, a private network or the cloud metadata address is refused then.
Through a proxy, the proxy connects: the host's addresses are checked before
the request is handed to it.

No code, message or log line of this module carries the secret, a body or a
URL path.
"""

import datetime
import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

import requests
from requests.utils import select_proxy
from standardwebhooks import Webhook

from integrations.transport import KeepAliveAdapter

TIMEOUT_S = 10
MAX_ANSWER_BYTES = 64 * 1024
USER_AGENT = "Omniflow-Outbox/1"

HTTP_PREFIX = "webhook_http_"
WEBHOOK_REDIRECT = "webhook_redirect"
WEBHOOK_TIMEOUT = "webhook_timeout"
WEBHOOK_UNAVAILABLE = "webhook_unavailable"
WEBHOOK_ADDRESS_REFUSED = "webhook_address_refused"


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


class AddressRefused(OSError):
    """The host resolved only to addresses that signed events may not go to."""


def refused_address(address):
    """Why signed events may not go to this IP address ("loopback", "private", …), or None for a public one."""
    ip = ipaddress.ip_address(address)
    if ip.version == 6 and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    for kind in ("loopback", "unspecified", "link_local", "multicast", "private"):
        if getattr(ip, f"is_{kind}"):
            return kind.replace("_", "-")  # link-local: the cloud metadata address 169.254.169.254 among them
    return None if ip.is_global else "non-public"


def public_addresses(host, port):
    """The socket addresses `host` resolves to that signed events may go to; AddressRefused when there is none."""
    found, refusals = [], []
    for _, _, _, _, sockaddr in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM):
        refusal = refused_address(sockaddr[0])
        if refusal:
            refusals.append(f"{sockaddr[0]} ({refusal})")
        else:
            found.append(sockaddr[:2])
    if not found:
        raise AddressRefused(
            f"{host} resolves only to addresses outbox destinations may not use: {', '.join(refusals)}"
        )
    return found


def connect_public(address, timeout=None, source_address=None):
    """socket.create_connection, to the first of the host's public addresses that answers."""
    error = None
    for sockaddr in public_addresses(*address):
        try:
            return socket.create_connection(sockaddr, timeout, source_address)
        except OSError as failed:
            error = failed
    raise error


class PublicAddressAdapter(KeepAliveAdapter):
    """KeepAliveAdapter whose connections go only to public addresses, checked as they are connected to."""

    def send(self, request, stream=False, timeout=None, verify=True, cert=None, proxies=None):
        if select_proxy(request.url, proxies):
            parts = urlsplit(request.url)
            port = parts.port or (443 if parts.scheme == "https" else 80)
            try:
                public_addresses(parts.hostname, port)
            except OSError as refused:  # AddressRefused, or a name that does not resolve
                raise requests.ConnectionError(refused, request=request) from refused
        return super().send(request, stream=stream, timeout=timeout, verify=verify, cert=cert, proxies=proxies)

    def _new_connection(self, parts, verify, cert, connect_timeout):
        connection = super()._new_connection(parts, verify, cert, connect_timeout)
        connection._create_connection = connect_public  # http.client's hook: how it opens the socket
        return connection


class WebhookSender:
    """Thread-safe: each worker thread keeps its own kept-alive connection per
    destination (integrations/transport.py). Requests go straight to the
    transport adapter, as the Remnawave adapter's do: no cookies, hooks or
    redirects apply, and the environment's proxy and CA settings are read once
    per origin, not on every call."""

    def __init__(self, timeout=TIMEOUT_S, allow_private=False):
        self.timeout = timeout
        self._adapter = KeepAliveAdapter() if allow_private else PublicAddressAdapter()
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
        except requests.RequestException as error:
            refused = isinstance(error.__cause__, AddressRefused)
            return Answer(False, WEBHOOK_ADDRESS_REFUSED if refused else WEBHOOK_UNAVAILABLE)
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
