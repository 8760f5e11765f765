"""The Remnawave panel adapter: every call Omniflow makes to the panel's HTTP API (SPEC 2.22, 2.23).

Routes, request bodies and answers follow the official contract package
`@remnawave/backend-contract` 3.4.15 (pinned in tests/contract, whose test
checks every body this module sends against the package's zod schemas).
Users are addressed by their numeric `id`.

Every call has a 10 s deadline, reads at most 1 MiB of answer, never follows a
redirect (the bearer token must never be carried to another host) and sends
`x-forwarded-for` / `x-forwarded-proto: https` (a panel outside its development
mode closes the socket without them). Every failure becomes a RemnawaveError
whose `code` is one of:

- `remote_user_not_found`: 404
- `remnawave_http_<status>`: any other non-2xx answer, redirects included
  (`panel_error_code` keeps the panel's `errorCode`, e.g. A019, never the
  body; a redirect keeps `detail="redirect"` and is never followed)
- `remnawave_unavailable`: transport error, timeout, undecodable or
  oversized answer

No message, repr or log line of this module carries the token, a response
body, a URL path or a subscription link.
"""

import dataclasses
import datetime
import json
import logging
import re
import threading
import time
from urllib.parse import quote, urlsplit

import requests

from integrations.transport import keepalive_session
from security.redactor import register_secret

logger = logging.getLogger("omniflow.remnawave")

CONTRACT_PACKAGE = "@remnawave/backend-contract"
CONTRACT_VERSION = "3.4.15"

CONNECT_TIMEOUT = 10  # seconds (SPEC 2.21)
REQUEST_TIMEOUT_S = 10  # seconds, the whole call: connect, answer, body (SPEC 2.21)
MAX_BODY_BYTES = 1 << 20  # 1 MiB answer cap (SPEC 2.21)
DEFAULT_FORWARDED_FOR = "127.0.0.1"
_CHUNK = 64 * 1024

# Classified error codes (SPEC 2.22): the only texts a failure may carry.
REMOTE_USER_NOT_FOUND = "remote_user_not_found"
REMNAWAVE_UNAVAILABLE = "remnawave_unavailable"
REMNAWAVE_HTTP_PREFIX = "remnawave_http_"

# Panel error codes the adapter acts on (contract constants/errors).
PANEL_USERNAME_EXISTS = "A019"
PANEL_USER_NOT_FOUND = "A025"
PANEL_USER_NOT_FOUND_BY_FIELDS = "A063"
PANEL_USER_ALREADY_DISABLED = "A029"
PANEL_USER_ALREADY_ENABLED = "A030"
_PANEL_ERROR_CODE = re.compile(r"^[A-Z][0-9]{3,4}$")

# Why a call was classified unavailable: a fixed word kept as `detail`, for
# diagnostics that carry nothing from the answer itself.
DETAIL_TIMEOUT = "timeout"
DETAIL_TRANSPORT = "transport"
DETAIL_REDIRECT = "redirect"
DETAIL_OVERSIZED = "oversized"
DETAIL_UNDECODABLE = "undecodable"

USER_STATUSES = ("ACTIVE", "DISABLED", "LIMITED", "EXPIRED")
WRITABLE_STATUSES = ("ACTIVE", "DISABLED")  # PATCH refuses LIMITED/EXPIRED (contract)

# Route templates (method + path), as the fake panel counts them too.
ROUTE_CREATE = "POST /api/users"
ROUTE_UPDATE = "PATCH /api/users"
ROUTE_GET_BY_USERNAME = "GET /api/users/by-username/{username}"
ROUTE_GET_BY_ID = "GET /api/users/{id}"
ROUTE_ENABLE = "POST /api/users/{id}/actions/enable"
ROUTE_DISABLE = "POST /api/users/{id}/actions/disable"
ROUTE_RESET_TRAFFIC = "POST /api/users/{id}/actions/reset-traffic"
ROUTE_DELETE = "DELETE /api/users/{id}"
ROUTE_HEALTH = "GET /api/system/health"
USER_ROUTES = (
    ROUTE_CREATE,
    ROUTE_UPDATE,
    ROUTE_GET_BY_USERNAME,
    ROUTE_GET_BY_ID,
    ROUTE_ENABLE,
    ROUTE_DISABLE,
    ROUTE_RESET_TRAFFIC,
    ROUTE_DELETE,
)
WRITE_ROUTES = (ROUTE_CREATE, ROUTE_UPDATE, ROUTE_ENABLE, ROUTE_DISABLE, ROUTE_RESET_TRAFFIC, ROUTE_DELETE)


def http_error_code(status):
    return f"{REMNAWAVE_HTTP_PREFIX}{int(status)}"


class RemnawaveError(Exception):
    """A classified panel failure. `str()` is the code, plus the panel's error code when it sent one."""

    def __init__(self, code, status=None, panel_error_code=None, detail=None):
        self.code = code
        self.status = status
        self.panel_error_code = panel_error_code
        self.detail = detail
        super().__init__(f"{code} ({panel_error_code})" if panel_error_code else code)

    def __repr__(self):
        return (
            f"RemnawaveError(code={self.code!r}, status={self.status!r}, "
            f"panel_error_code={self.panel_error_code!r}, detail={self.detail!r})"
        )

    @property
    def is_not_found(self):
        return self.code == REMOTE_USER_NOT_FOUND


@dataclasses.dataclass(frozen=True)
class RemoteUser:
    """A panel user as Omniflow reads it back (SPEC 2.23, contract ExtendedUsersSchema)."""

    id: int  # the panel's numeric user id: what every per-user route is addressed by
    # The short uuid is the secret part of the subscription link: kept out of reprs.
    short_uuid: str = dataclasses.field(repr=False)
    username: str
    status: str  # ACTIVE | DISABLED | LIMITED | EXPIRED, as the panel says
    expire_at: datetime.datetime  # aware, UTC
    traffic_limit_bytes: int  # 0 = unlimited
    hwid_device_limit: int | None  # 0 = no limit; None = the panel's HWID_FALLBACK_DEVICE_LIMIT applies
    squad_uuids: tuple[str, ...]
    subscription_url: str = dataclasses.field(repr=False)
    used_traffic_bytes: int


def format_expire_at(value):
    """An aware (or naive-UTC) datetime → the panel's ISO form with milliseconds and Z."""
    if not isinstance(value, datetime.datetime):
        raise TypeError("expire_at must be a datetime")
    if value.tzinfo is not None:
        value = value.astimezone(datetime.timezone.utc).replace(tzinfo=None)
    # The panel stores milliseconds; sending more would read back as drift.
    return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"


def parse_panel_time(text):
    value = datetime.datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
    if value.tzinfo is None:
        value = value.replace(tzinfo=datetime.timezone.utc)
    return value.astimezone(datetime.timezone.utc)


def _non_negative_int(name, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be a non-negative integer")
    return value


def _device_limit(value):
    """None (no device limit) is sent as 0: null would mean the panel's fallback limit."""
    return 0 if value is None else _non_negative_int("hwid_device_limit", value)


def _squads(squad_uuids):
    if isinstance(squad_uuids, str):
        raise TypeError("squad_uuids must be a list of UUID strings, not one string")
    return [str(squad) for squad in squad_uuids]


def _user_id(user_id):
    if isinstance(user_id, bool) or not isinstance(user_id, int) or user_id <= 0:
        raise ValueError("user_id must be the panel's positive integer id")
    return user_id


def _as_int(value):
    if isinstance(value, bool):
        raise TypeError("boolean where a number was expected")
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueError("fractional number where an integer was expected")
        return int(value)
    if not isinstance(value, int):
        raise TypeError("not a number")
    return value


def parse_user(payload):
    """`{"response": user}` → RemoteUser; anything else is an undecodable answer."""
    try:
        user = payload["response"]
        hwid = user.get("hwidDeviceLimit")
        traffic = user.get("userTraffic") or {}
        return RemoteUser(
            id=_as_int(user["id"]),
            short_uuid=str(user["shortUuid"]),
            username=str(user["username"]),
            status=str(user["status"]),
            expire_at=parse_panel_time(str(user["expireAt"])),
            traffic_limit_bytes=_as_int(user["trafficLimitBytes"]),
            hwid_device_limit=None if hwid is None else _as_int(hwid),
            squad_uuids=tuple(str(squad["uuid"]) for squad in (user.get("activeInternalSquads") or ())),
            subscription_url=str(user["subscriptionUrl"]),
            used_traffic_bytes=_as_int(traffic.get("usedTrafficBytes") or 0),
        )
    except (KeyError, TypeError, ValueError, AttributeError):
        raise RemnawaveError(REMNAWAVE_UNAVAILABLE, detail=DETAIL_UNDECODABLE) from None


def build_create_body(username, expire_at, traffic_limit_bytes, hwid_device_limit, squad_uuids):
    """The POST /api/users body (contract CreateUserCommand.RequestBodySchema).

    Both limits are always sent, 0 meaning unlimited (SPEC 2.5; a device
    limit of None is sent as 0): the panel reads an absent or null
    hwidDeviceLimit as "use HWID_FALLBACK_DEVICE_LIMIT", and the contract
    refuses null on create anyway.
    """
    return {
        "username": str(username),
        "expireAt": format_expire_at(expire_at),
        "trafficLimitBytes": _non_negative_int("traffic_limit_bytes", traffic_limit_bytes),
        "hwidDeviceLimit": _device_limit(hwid_device_limit),
        "activeInternalSquads": _squads(squad_uuids),
    }


def build_update_body(user_id, expire_at, traffic_limit_bytes, hwid_device_limit, squad_uuids, status=None):
    """The PATCH /api/users body (contract UpdateUserCommand.RequestBodySchema).

    Both limits are always explicit, 0 meaning unlimited (a device limit of
    None is sent as 0): a missing field means "leave as is" to the panel,
    which would keep an old plan's limit on a user moved to unlimited, and
    null means the panel's fallback device limit (SPEC 2.5). expire_at=None
    and squad_uuids=None leave those fields as they are (the contract
    refuses an expireAt in the past).
    """
    body = {
        "id": _user_id(user_id),
        "trafficLimitBytes": _non_negative_int("traffic_limit_bytes", traffic_limit_bytes),
        "hwidDeviceLimit": _device_limit(hwid_device_limit),
    }
    if expire_at is not None:
        body["expireAt"] = format_expire_at(expire_at)
    if squad_uuids is not None:
        body["activeInternalSquads"] = _squads(squad_uuids)
    if status is not None:
        if status not in WRITABLE_STATUSES:
            raise ValueError("status can only be set to ACTIVE or DISABLED")
        body["status"] = status
    return body


class RemnawaveClient:
    """The panel's users API, one method per call; thread-safe (one HTTP session per thread)."""

    def __init__(
        self,
        base_url,
        token,
        forwarded_for=DEFAULT_FORWARDED_FOR,
        session=None,
        timeout=REQUEST_TIMEOUT_S,
    ):
        parts = urlsplit(str(base_url or "").strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("base_url must be an http:// or https:// URL")
        if parts.username or parts.password or parts.query or parts.fragment:
            # Credentials in the URL would replace the bearer token with basic auth.
            raise ValueError("base_url must carry no credentials, query or fragment")
        if not token:
            raise ValueError("a Remnawave API token is required")
        register_secret(token)
        self._base_url = str(base_url).strip().rstrip("/")
        self._origin = f"{parts.scheme}://{parts.hostname}" + (f":{parts.port}" if parts.port else "")
        self._token = token
        self._forwarded_for = forwarded_for or DEFAULT_FORWARDED_FOR
        self._session = session
        self._timeout = float(timeout)
        self._local = threading.local()

    def __repr__(self):
        # Scheme and host only: no token, no credentials or path from the URL.
        return f"RemnawaveClient({self._origin!r})"

    # --- users -------------------------------------------------------------

    def get_user_by_username(self, username):
        """The user with this username, or None when the panel has none."""
        path = "/api/users/by-username/" + quote(str(username), safe="")
        return self._get_user(ROUTE_GET_BY_USERNAME, path)

    def get_user(self, user_id):
        """The user with this numeric id, or None when the panel has none."""
        return self._get_user(ROUTE_GET_BY_ID, f"/api/users/{_user_id(user_id)}")

    def create_user(self, username, expire_at, traffic_limit_bytes, hwid_device_limit, squad_uuids):
        body = build_create_body(username, expire_at, traffic_limit_bytes, hwid_device_limit, squad_uuids)
        return parse_user(self._call(ROUTE_CREATE, "/api/users", body))

    def update_user(self, user_id, expire_at, traffic_limit_bytes, hwid_device_limit, squad_uuids, status=None):
        body = build_update_body(user_id, expire_at, traffic_limit_bytes, hwid_device_limit, squad_uuids, status)
        return parse_user(self._call(ROUTE_UPDATE, "/api/users", body))

    def enable_user(self, user_id):
        """Enable; a user already enabled (A030) is a success and comes back as it is."""
        return self._action(ROUTE_ENABLE, user_id, "enable", PANEL_USER_ALREADY_ENABLED)

    def disable_user(self, user_id):
        """Disable; a user already disabled (A029) is a success and comes back as it is."""
        return self._action(ROUTE_DISABLE, user_id, "disable", PANEL_USER_ALREADY_DISABLED)

    def reset_traffic(self, user_id):
        return parse_user(self._call(ROUTE_RESET_TRAFFIC, f"/api/users/{_user_id(user_id)}/actions/reset-traffic"))

    def delete_user(self, user_id):
        """Delete; a user already gone raises remote_user_not_found (the caller decides)."""
        self._call(ROUTE_DELETE, f"/api/users/{_user_id(user_id)}", expect_json=False)

    def healthy(self):
        """True when an authenticated GET of the panel's health answers 2xx; never raises."""
        try:
            self._call(ROUTE_HEALTH, "/api/system/health", expect_json=False)
        except RemnawaveError:
            return False
        except Exception:  # a health probe must never take its caller down
            logger.warning("remnawave health probe failed unexpectedly", exc_info=True)
            return False
        return True

    @property
    def last_request_summary(self):
        """This thread's last call: method, route template, status, outcome, elapsed ms. No bodies, no ids."""
        summary = getattr(self._local, "summary", None)
        return dict(summary) if summary else None

    # --- internals ---------------------------------------------------------

    def _get_user(self, route, path):
        try:
            return parse_user(self._call(route, path))
        except RemnawaveError as error:
            # Only the panel's own "user not found" means no user. A 404 without
            # a panel error code is a wrong URL or a proxy: treating it as "no
            # user" would make the worker create users it cannot see.
            if error.code == REMOTE_USER_NOT_FOUND and error.panel_error_code:
                return None
            raise

    def _action(self, route, user_id, action, already_code):
        user_id = _user_id(user_id)
        try:
            return parse_user(self._call(route, f"/api/users/{user_id}/actions/{action}"))
        except RemnawaveError as error:
            if error.status == 400 and error.panel_error_code == already_code:
                user = self.get_user(user_id)
                if user is None:
                    raise RemnawaveError(REMOTE_USER_NOT_FOUND, status=404) from None
                return user
            raise

    def _session_for_thread(self):
        if self._session is not None:
            return self._session
        session = getattr(self._local, "session", None)
        if session is None:
            # One kept-alive connection per worker thread instead of urllib3's
            # pool (integrations/transport.py says why).
            session = self._local.session = keepalive_session(self._base_url)
        return session

    def _headers(self):
        return {
            "Authorization": f"Bearer {self._token}",
            "Accept": "application/json",
            "x-forwarded-for": self._forwarded_for,
            "x-forwarded-proto": "https",
        }

    def _call(self, route, path, body=None, expect_json=True):
        method = route.split(" ", 1)[0]
        started = time.monotonic()
        status = None
        try:
            status, payload = self._exchange(method, path, body, started, expect_json)
        except RemnawaveError as error:
            self._remember(method, route, error.status, error.code, started)
            logger.debug("remnawave call failed route=%s status=%s code=%s", route, error.status, error.code)
            raise
        self._remember(method, route, status, "ok", started)
        return payload

    def _exchange(self, method, path, body, started, expect_json):
        deadline = started + self._timeout
        try:
            session = self._session_for_thread()
            # Only the steps that apply: no cookies, auth objects or hooks here.
            request = requests.PreparedRequest()
            request.prepare_method(method)
            request.prepare_url(self._base_url + path, None)
            request.prepare_headers(self._headers())
            request.prepare_body(None, None, json=body)
            # Straight to the session's transport adapter: the session layer
            # would merge cookies, hooks and settings on every call (none
            # apply here) and follow redirects (a redirect must never carry
            # the token elsewhere, so none is followed).
            response = session.get_adapter(request.url).send(
                request,
                timeout=(min(CONNECT_TIMEOUT, self._timeout), self._timeout),
                stream=True,  # read the answer ourselves, up to the cap
                verify=session.verify,
                cert=session.cert,
                proxies=session.proxies,
            )
        except requests.Timeout:
            raise RemnawaveError(REMNAWAVE_UNAVAILABLE, detail=DETAIL_TIMEOUT) from None
        except requests.RequestException:
            raise RemnawaveError(REMNAWAVE_UNAVAILABLE, detail=DETAIL_TRANSPORT) from None
        try:
            status = response.status_code
            if 300 <= status < 400:
                # Classified like any other non-2xx answer (SPEC 2.22); never followed.
                raise RemnawaveError(http_error_code(status), status=status, detail=DETAIL_REDIRECT)
            raw = self._read_capped(response, deadline)
        finally:
            response.close()
        if not 200 <= status < 300:
            panel_code = _panel_error_code(raw)
            code = REMOTE_USER_NOT_FOUND if status == 404 else http_error_code(status)
            raise RemnawaveError(code, status=status, panel_error_code=panel_code)
        if not expect_json:
            return status, None
        try:
            return status, json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            raise RemnawaveError(REMNAWAVE_UNAVAILABLE, status=status, detail=DETAIL_UNDECODABLE) from None

    def _read_capped(self, response, deadline):
        declared = response.headers.get("Content-Length")
        if declared and declared.isascii() and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
            raise RemnawaveError(REMNAWAVE_UNAVAILABLE, status=response.status_code, detail=DETAIL_OVERSIZED)
        chunks, size = [], 0
        try:
            for chunk in response.iter_content(chunk_size=_CHUNK):
                size += len(chunk)
                if size > MAX_BODY_BYTES:
                    raise RemnawaveError(REMNAWAVE_UNAVAILABLE, status=response.status_code, detail=DETAIL_OVERSIZED)
                if time.monotonic() > deadline:
                    raise RemnawaveError(REMNAWAVE_UNAVAILABLE, status=response.status_code, detail=DETAIL_TIMEOUT)
                chunks.append(chunk)
        except requests.Timeout:
            raise RemnawaveError(REMNAWAVE_UNAVAILABLE, detail=DETAIL_TIMEOUT) from None
        except requests.RequestException:
            raise RemnawaveError(REMNAWAVE_UNAVAILABLE, detail=DETAIL_TRANSPORT) from None
        return b"".join(chunks)

    def _remember(self, method, route, status, outcome, started):
        self._local.summary = {
            "method": method,
            "route": route,
            "status": status,
            "outcome": outcome,
            "elapsed_ms": round((time.monotonic() - started) * 1000, 1),
        }


def _panel_error_code(raw):
    """The panel's errorCode (e.g. A019) from an error answer; never anything else from the body."""
    try:
        payload = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    code = payload.get("errorCode") if isinstance(payload, dict) else None
    if isinstance(code, str) and _PANEL_ERROR_CODE.match(code):
        return code
    return None
