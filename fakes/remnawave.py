"""A fake Remnawave panel: a real HTTP server with the users API of contract 3.4.15, and injectable faults.

It serves the routes the adapter uses (integrations/remnawave.py) with the
panel's validation rules, error bodies and status rules, keeps users in memory,
counts calls per route and applied writes, and on demand misbehaves the ways a
real panel or the network in front of it does: latency, 500s, answers later
than the client waits, dropped connections, writes applied whose answer is
lost, oversized answers and redirects. Tests drive it from Python; another
process drives it over HTTP (`/_fake/...`); developers run it with
`python omniflow.py fake-remnawave`.

Like a real panel outside its development mode, it closes the socket of any
API request without `x-forwarded-for` and `x-forwarded-proto: https`; like
the real panel, a user's `hwidDeviceLimit` of 0 is no limit and null is the
panel's fallback limit (`effective_device_limit`). It remembers when each
request about a user arrived and was answered (`requests_of`).
"""

import base64
import collections
import datetime
import hashlib
import hmac
import json
import math
import os
import random
import re
import secrets
import socket
import string
import threading
import time
import uuid
from urllib.parse import unquote, urlsplit

from fakes.http_server import FakeHandler, ServedFake
from fakes.state_file import KeepsState
from integrations.remnawave import (
    MAX_BODY_BYTES,
    PANEL_USER_ALREADY_DISABLED,
    PANEL_USER_ALREADY_ENABLED,
    PANEL_USER_NOT_FOUND,
    PANEL_USER_NOT_FOUND_BY_FIELDS,
    PANEL_USERNAME_EXISTS,
    REQUEST_TIMEOUT_S,
    ROUTE_CREATE,
    ROUTE_DELETE,
    ROUTE_DISABLE,
    ROUTE_ENABLE,
    ROUTE_GET_BY_ID,
    ROUTE_GET_BY_USERNAME,
    ROUTE_HEALTH,
    ROUTE_RESET_TRAFFIC,
    ROUTE_UPDATE,
    USER_STATUSES,
    WRITABLE_STATUSES,
    WRITE_ROUTES,
)


def api_token(subject):
    """A token shaped like the ones a panel issues (an HS256 JWT), signed with a key only the fakes use."""

    def part(raw):
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")

    head = part(json.dumps({"alg": "HS256", "typ": "JWT"}, separators=(",", ":")).encode())
    body = part(json.dumps({"uuid": str(uuid.uuid5(uuid.NAMESPACE_URL, subject)), "username": subject}).encode())
    signature = hmac.new(b"omniflow-fake-panel", f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{part(signature)}"


DEV_TOKEN = api_token("omniflow-dev")
DEFAULT_PORT = 3010
# Longer than the adapter's 10 s deadline, so a held call is a timeout to it.
DEFAULT_HOLD_SECONDS = REQUEST_TIMEOUT_S + 2.0
OVERSIZED_BYTES = MAX_BODY_BYTES + 64 * 1024
MAX_REQUEST_BYTES = MAX_BODY_BYTES
# The panel's HWID_FALLBACK_DEVICE_LIMIT: what a user whose hwidDeviceLimit is null may use.
DEFAULT_FALLBACK_DEVICE_LIMIT = 1
TIMELINE_ENTRIES = 10_000  # per-user request timing kept for tests (the oldest go first)
REDIRECT_TARGET = "http://127.0.0.2:9"  # another host; nothing listens there

# Faults drawn per call, in this order, from one uniform draw: their rates add up to at most 1.
FAULT_KINDS = ("fail", "timeout", "drop", "lost_response", "oversized", "redirect")
RATE_FIELDS = tuple(f"{kind}_rate" for kind in FAULT_KINDS)
FAULT_SETTINGS = ("latency_ms", *RATE_FIELDS, "hold_seconds", "writes_only", "routes", "seed")

RESET_PERIODS = ("NO_RESET", "DAY", "WEEK", "MONTH", "MONTH_ROLLING")
USERNAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]+$")
TAG_PATTERN = re.compile(r"^[A-Z0-9_]+$")
# zod 4's z.uuid(): RFC 9562 versions 1-8 and variant 10xx, plus the nil and max UUIDs.
UUID_PATTERN = re.compile(
    r"^(?:[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[1-8][0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}"
    r"|00000000-0000-0000-0000-000000000000|ffffffff-ffff-ffff-ffff-ffffffffffff)$"
)
# zod 4's z.iso.datetime({offset: true, local: true}).
DATETIME_PATTERN = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:\d{2})?$")
EMAIL_PATTERN = re.compile(r"^[^\s@]+@[^\s@]+\.[^\s@]+$")
MAX_SAFE_INTEGER = 2**53 - 1

# The panel's error bodies (contract constants/errors).
ERROR_MESSAGES = {
    "A001": "Server error",
    PANEL_USERNAME_EXISTS: "User username already exists",
    PANEL_USER_NOT_FOUND: "User not found",
    PANEL_USER_NOT_FOUND_BY_FIELDS: "User with specified params not found",
    PANEL_USER_ALREADY_DISABLED: "User already disabled",
    PANEL_USER_ALREADY_ENABLED: "User already enabled",
}

_ROUTES = (
    (re.compile(r"^/api/users/?$"), {"POST": ROUTE_CREATE, "PATCH": ROUTE_UPDATE}),
    (re.compile(r"^/api/users/by-username/(?P<username>[^/]+)$"), {"GET": ROUTE_GET_BY_USERNAME}),
    (re.compile(r"^/api/users/(?P<id>[^/]+)/actions/enable$"), {"POST": ROUTE_ENABLE}),
    (re.compile(r"^/api/users/(?P<id>[^/]+)/actions/disable$"), {"POST": ROUTE_DISABLE}),
    (re.compile(r"^/api/users/(?P<id>[^/]+)/actions/reset-traffic$"), {"POST": ROUTE_RESET_TRAFFIC}),
    (re.compile(r"^/api/users/(?P<id>[^/]+)$"), {"GET": ROUTE_GET_BY_ID, "DELETE": ROUTE_DELETE}),
    (re.compile(r"^/api/system/health$"), {"GET": ROUTE_HEALTH}),
)


def utcnow():
    return datetime.datetime.now(datetime.timezone.utc)


def iso(value):
    """The panel's timestamp form: UTC, milliseconds, Z (what the contract's response schema accepts)."""
    if value is None:
        return None
    value = value.astimezone(datetime.timezone.utc)
    return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"


def parse_datetime(text):
    """An ISO timestamp with an offset, or without one (read as UTC); None when not valid."""
    if not isinstance(text, str) or not DATETIME_PATTERN.match(text):
        return None
    normalized = text[:-1] + "+00:00" if text.endswith("Z") else text
    head, dot, tail = normalized.partition(".")
    if dot:  # Python parses at most microseconds; zod takes any precision
        digits = re.match(r"\d+", tail).group(0)
        normalized = f"{head}.{(digits + '000000')[:6]}{tail[len(digits) :]}"
    try:
        value = datetime.datetime.fromisoformat(normalized)
    except ValueError:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=datetime.timezone.utc)
    return value.astimezone(datetime.timezone.utc)


def default_token():
    """APP_REMNAWAVE_TOKEN from the environment or .env, else the fixed development token."""
    token = os.environ.get("APP_REMNAWAVE_TOKEN", "").strip()
    if token:
        return token, False
    dotenv_file = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".env")
    if os.path.exists(dotenv_file):
        from dotenv import dotenv_values

        token = (dotenv_values(dotenv_file).get("APP_REMNAWAVE_TOKEN") or "").strip()
        if token:
            return token, False
    return DEV_TOKEN, True


class _Reply(Exception):
    """Ends request handling with this status and JSON body."""

    def __init__(self, status, body):
        super().__init__(status)
        self.status = status
        self.body = body


class _Validation:
    """Collects zod-style issues; raises the panel's 400 "Validation failed" when any."""

    def __init__(self):
        self.issues = []

    def add(self, path, message, code="custom"):
        self.issues.append({"code": code, "path": list(path), "message": message})

    def check(self):
        if self.issues:
            raise _Reply(400, {"statusCode": 400, "message": "Validation failed", "errors": self.issues})

    # --- field rules ----------------------------------------------------------

    def number(self, body, key, minimum=None, integer=False, nullable=False, required=False):
        if key not in body:
            if required:
                self.add([key], "Invalid input: expected number, received undefined", "invalid_type")
            return
        value = body[key]
        if value is None:
            if not nullable:
                self.add([key], "Invalid input: expected number, received null", "invalid_type")
            return
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            self.add([key], f"Invalid input: expected {'int' if integer else 'number'}", "invalid_type")
            return
        if integer and (value != int(value) or abs(value) > MAX_SAFE_INTEGER):
            self.add([key], "Invalid input: expected int, received number", "invalid_type")
            return
        if minimum is not None and value < minimum:
            self.add([key], f"Too small: expected number to be >={minimum}", "too_small")

    def string(self, body, key, nullable=False):
        if key in body and not (isinstance(body[key], str) or (nullable and body[key] is None)):
            self.add([key], "Invalid input: expected string", "invalid_type")

    def enum(self, body, key, values):
        if key in body and body[key] not in values:
            options = "|".join(f'"{value}"' for value in values)
            self.add([key], f"Invalid option: expected one of {options}", "invalid_value")

    def squads(self, body, key):
        if key not in body:
            return
        value = body[key]
        if not isinstance(value, list):
            self.add([key], "Invalid input: expected array", "invalid_type")
            return
        for index, item in enumerate(value):
            if not isinstance(item, str) or not UUID_PATTERN.match(item):
                self.add([key, index], "Invalid UUID", "invalid_format")

    def uuid(self, body, key, nullable=False):
        if key not in body or (nullable and body[key] is None):
            return
        if not isinstance(body[key], str) or not UUID_PATTERN.match(body[key]):
            self.add([key], "Invalid UUID", "invalid_format")

    def datetime(self, body, key, required=False):
        if key not in body:
            if required:
                self.add([key], "Invalid input: expected string, received undefined", "invalid_type")
            return None
        value = parse_datetime(body[key])
        if value is None:
            self.add([key], "Invalid ISO datetime", "invalid_format")
        return value

    def tag(self, body, key):
        if key not in body or body[key] is None:
            return
        value = body[key]
        if not isinstance(value, str) or not TAG_PATTERN.match(value):
            self.add([key], "Tag can only contain uppercase letters, numbers, underscores", "invalid_format")
        elif len(value) > 16:
            self.add([key], "Tag must be less than 16 characters", "too_big")

    def email(self, body, key):
        if key in body and body[key] is not None:
            if not isinstance(body[key], str) or not EMAIL_PATTERN.match(body[key]):
                self.add([key], "Invalid email address", "invalid_format")


def _random_text(length, alphabet=string.ascii_letters + string.digits):
    return "".join(secrets.choice(alphabet) for _ in range(length))


class _Handler(FakeHandler):
    def parse_request(self):
        self.timed = None  # the timeline entry of a users-API request, until its answer goes out
        return super().parse_request()


class FakeRemnawave(KeepsState, ServedFake):
    """The fake panel. start() serves it on a background thread; base_url says where."""

    server_name = "FakeRemnawave"
    thread_name = "fake-remnawave"
    handler_class = _Handler

    def __init__(
        self,
        token=DEV_TOKEN,
        host="127.0.0.1",
        port=0,
        require_forwarded=True,
        seed=None,
        latency_ms=0,
        sub_domain=None,
        fallback_device_limit=DEFAULT_FALLBACK_DEVICE_LIMIT,
    ):
        if not token:
            raise ValueError("the fake panel needs a token")
        self.token = token
        self._init_served(host, port)
        self.require_forwarded = require_forwarded
        self.sub_domain = sub_domain
        self.fallback_device_limit = fallback_device_limit
        self._seed = seed
        self._default_latency_ms = latency_ms
        self._lock = threading.Lock()
        self._reset_state()
        self._faults = self._no_faults(latency_ms)
        self._rng = random.Random(seed)

    # --- test helpers ------------------------------------------------------

    def reset(self):
        """Forget every user, count and fault (the latency given at construction stays)."""
        with self._lock:
            self._reset_state()
            self._faults = self._no_faults(self._default_latency_ms)
            self._rng = random.Random(self._seed)

    def set_faults(self, **settings):
        """Change some fault settings; the others keep their value.

        latency_ms (every API call is answered this long after it arrived),
        fail_rate, timeout_rate, drop_rate, lost_response_rate, oversized_rate,
        redirect_rate (probabilities per call, adding up to at most 1),
        hold_seconds (how long a timeout-fault call is held before it is
        processed), writes_only, routes (route
        templates such as "POST /api/users"; empty = every API route), seed.
        """
        unknown = set(settings) - set(FAULT_SETTINGS)
        if unknown:
            raise ValueError(f"unknown fault settings: {', '.join(sorted(unknown))}")
        with self._lock:
            faults = dict(self._faults)
            for name in RATE_FIELDS:
                if name in settings:
                    rate = float(settings[name])
                    if not 0.0 <= rate <= 1.0:
                        raise ValueError(f"{name} must be between 0 and 1")
                    faults[name] = rate
            if sum(faults[name] for name in RATE_FIELDS) > 1.0 + 1e-9:
                raise ValueError("fault rates add up to more than 1")
            if "latency_ms" in settings:
                latency = float(settings["latency_ms"])
                if latency < 0:
                    raise ValueError("latency_ms must be >= 0")
                faults["latency_ms"] = latency
            if "hold_seconds" in settings:
                hold = float(settings["hold_seconds"])
                if hold < 0:
                    raise ValueError("hold_seconds must be >= 0")
                faults["hold_seconds"] = hold
            if "writes_only" in settings:
                faults["writes_only"] = bool(settings["writes_only"])
            if "routes" in settings:
                routes = settings["routes"] or ()
                if isinstance(routes, str):
                    routes = (routes,)
                faults["routes"] = tuple(routes)
            if "seed" in settings:
                self._rng = random.Random(settings["seed"])
            self._faults = faults
            return self._public_faults()

    def clear_faults(self):
        with self._lock:
            self._faults = self._no_faults(self._default_latency_ms)

    def faults(self):
        with self._lock:
            return self._public_faults()

    def requests_of(self, username):
        """Every users-API request about this user, in order of arrival: route, and when
        it arrived and was answered (time.monotonic() seconds). Tests check from it
        that two requests for one user never overlapped."""
        with self._lock:
            entries = [entry for entry in self._timeline if entry["username"] == username]
        timeline = [{key: entry[key] for key in ("route", "arrived", "done")} for entry in entries]
        return sorted(timeline, key=lambda entry: entry["arrived"])

    def expiry_moves(self, username):
        """Each update that moved this user's expireAt, as (before, after), in order: an update that sends
        the expiry the user already has moves nothing, so a repeated extend is one move, a doubled one two."""
        with self._lock:
            return list(self._expiry_moves.get(username, ()))

    def effective_device_limit(self, username):
        """The device limit the panel enforces for this user, as its subscription service
        does (`checkHwidDeviceLimit`): 0 is no limit (None here), null or absent is the
        panel's HWID_FALLBACK_DEVICE_LIMIT, anything else is itself."""
        with self._lock:
            record = self._by_username(username)
            if record is None:
                raise KeyError(username)
            limit = record["hwidDeviceLimit"]
            if limit == 0:
                return None
            return self.fallback_device_limit if limit is None else limit

    def stats(self):
        with self._lock:
            return {
                "calls": dict(self._calls),
                "creates_applied": dict(self._creates_applied),
                "writes_applied": dict(self._writes_applied),
                "faults_injected": dict(self._faults_injected),
                "rejected": dict(self._rejected),
                "users": len(self._users),
                "in_flight": self._in_flight,
                "max_in_flight": self._max_in_flight,
            }

    def users(self):
        """Every user, as the panel answers it."""
        with self._lock:
            now = utcnow()
            return [self._user_json(record, now) for record in sorted(self._users.values(), key=lambda r: r["id"])]

    def user(self, username):
        with self._lock:
            record = self._by_username(username)
            return self._user_json(record, utcnow()) if record else None

    def seed_user(
        self, username, expire_at, traffic_limit_bytes=0, hwid_device_limit=None, squad_uuids=(), status="ACTIVE"
    ):
        """A user that was on the panel before Omniflow looked (adoption tests); not counted as a write."""
        if expire_at.tzinfo is None:
            expire_at = expire_at.replace(tzinfo=datetime.timezone.utc)
        with self._lock:
            if self._by_username(username):
                raise ValueError("username exists")
            record = self._new_record(
                username, expire_at, traffic_limit_bytes, hwid_device_limit, list(squad_uuids), status
            )
            return self._user_json(record, utcnow())

    def create_concurrently(
        self, username, expire_at, traffic_limit_bytes=0, hwid_device_limit=None, squad_uuids=(), status="ACTIVE"
    ):
        """Another writer makes this user just before the next create of the same username arrives: lookups
        until then miss it, and that create answers "username exists" (A019)."""
        if expire_at.tzinfo is None:
            expire_at = expire_at.replace(tzinfo=datetime.timezone.utc)
        with self._lock:
            self._concurrent_creates[username] = (
                expire_at,
                traffic_limit_bytes,
                hwid_device_limit,
                list(squad_uuids),
                status,
            )

    def set_used_traffic(self, username, used_bytes):
        """Traffic the user has used; at or over a non-zero limit the panel reports LIMITED."""
        self.edit_user(username, usedTrafficBytes=used_bytes)

    def edit_user(self, username, **fields):
        """Change a user behind Omniflow's back (drift). Fields by their panel names:
        expireAt (datetime or ISO text), trafficLimitBytes, hwidDeviceLimit,
        activeInternalSquads, status (ACTIVE or DISABLED), usedTrafficBytes, username."""
        allowed = {
            "expireAt",
            "trafficLimitBytes",
            "hwidDeviceLimit",
            "activeInternalSquads",
            "status",
            "usedTrafficBytes",
            "username",
        }
        unknown = set(fields) - allowed
        if unknown:
            raise ValueError(f"unknown user fields: {', '.join(sorted(unknown))}")
        with self._lock:
            record = self._by_username(username)
            if record is None:
                raise KeyError(username)
            if "expireAt" in fields:
                value = fields["expireAt"]
                expire_at = value if isinstance(value, datetime.datetime) else parse_datetime(value)
                if expire_at is None:
                    raise ValueError("expireAt must be a datetime or an ISO timestamp")
                if expire_at.tzinfo is None:
                    expire_at = expire_at.replace(tzinfo=datetime.timezone.utc)
                record["expireAt"] = expire_at
            if "trafficLimitBytes" in fields:
                record["trafficLimitBytes"] = int(fields["trafficLimitBytes"])
            if "hwidDeviceLimit" in fields:
                value = fields["hwidDeviceLimit"]
                record["hwidDeviceLimit"] = None if value is None else int(value)
            if "activeInternalSquads" in fields:
                record["squads"] = [str(squad) for squad in fields["activeInternalSquads"]]
            if "status" in fields:
                if fields["status"] not in WRITABLE_STATUSES:
                    raise ValueError("status is ACTIVE or DISABLED; LIMITED and EXPIRED follow traffic and expireAt")
                record["status"] = fields["status"]
            if "usedTrafficBytes" in fields:
                used = int(fields["usedTrafficBytes"])
                record["lifetimeUsedTrafficBytes"] += max(0, used - record["usedTrafficBytes"])
                record["usedTrafficBytes"] = used
            if "username" in fields and fields["username"] != username:
                if self._by_username(fields["username"]):
                    raise ValueError("username exists")
                del self._usernames[username]
                record["username"] = fields["username"]
                self._usernames[fields["username"]] = record["id"]
            record["updatedAt"] = utcnow()
            return self._user_json(record, utcnow())

    def delete_user(self, username):
        """Delete a user behind Omniflow's back; True when there was one."""
        with self._lock:
            record = self._by_username(username)
            if record is None:
                return False
            del self._users[record["id"]]
            del self._usernames[username]
            return True

    # --- state -------------------------------------------------------------

    def _reset_state(self):
        self._users = {}
        self._usernames = {}
        self._next_id = 1
        self._calls = {}
        self._creates_applied = {}
        self._writes_applied = {}
        self._faults_injected = {}
        self._rejected = {}
        self._in_flight = 0
        self._max_in_flight = 0
        self._timeline = collections.deque(maxlen=TIMELINE_ENTRIES)
        self._concurrent_creates = {}
        self._expiry_moves = {}

    def _snapshot(self):
        return {"users": list(self._users.values()), "next_id": self._next_id}

    def _restore(self, state):
        self._users = {record["id"]: record for record in state["users"]}
        self._usernames = {record["username"]: record["id"] for record in state["users"]}
        self._next_id = state["next_id"]

    @staticmethod
    def _no_faults(latency_ms=0):
        faults = {name: 0.0 for name in RATE_FIELDS}
        faults.update(latency_ms=float(latency_ms), hold_seconds=DEFAULT_HOLD_SECONDS, writes_only=False, routes=())
        return faults

    def _public_faults(self):
        faults = dict(self._faults)
        faults["routes"] = list(faults["routes"])
        return faults

    @staticmethod
    def _bump(counter, key, n=1):
        counter[key] = counter.get(key, 0) + n

    def _by_username(self, username):
        user_id = self._usernames.get(username)
        return self._users.get(user_id) if user_id is not None else None

    def _new_record(self, username, expire_at, traffic_limit, hwid_limit, squads, status="ACTIVE", extra=None):
        now = utcnow()
        extra = extra or {}
        record = {
            "id": self._next_id,
            "shortUuid": extra.get("shortUuid") or _random_text(16),
            "username": username,
            "status": "DISABLED" if status == "DISABLED" else "ACTIVE",
            "expireAt": expire_at,
            "trafficLimitBytes": int(traffic_limit or 0),
            "trafficLimitStrategy": extra.get("trafficLimitStrategy") or "NO_RESET",
            "hwidDeviceLimit": hwid_limit,
            "squads": list(squads),
            "description": extra.get("description"),
            "tag": extra.get("tag"),
            "telegramId": extra.get("telegramId"),
            "email": extra.get("email"),
            "externalSquadUuid": extra.get("externalSquadUuid"),
            "trojanPassword": extra.get("trojanPassword") or _random_text(16),
            "vlessUuid": extra.get("vlessUuid") or str(uuid.uuid4()),
            "ssPassword": extra.get("ssPassword") or _random_text(32),
            "usedTrafficBytes": 0,
            "lifetimeUsedTrafficBytes": 0,
            "lastTrafficResetAt": None,
            "createdAt": now,
            "updatedAt": now,
        }
        self._next_id += 1
        self._users[record["id"]] = record
        self._usernames[username] = record["id"]
        return record

    @staticmethod
    def _status(record, now):
        # The panel's status as its own background jobs keep it: DISABLED is
        # set by hand; EXPIRED and LIMITED follow expireAt and used traffic.
        if record["status"] == "DISABLED":
            return "DISABLED"
        if record["expireAt"] <= now:
            return "EXPIRED"
        if record["trafficLimitBytes"] > 0 and record["usedTrafficBytes"] >= record["trafficLimitBytes"]:
            return "LIMITED"
        return "ACTIVE"

    def _user_json(self, record, now):
        domain = self.sub_domain or f"{self.host}:{self.port}"
        return {
            "id": record["id"],
            "shortUuid": record["shortUuid"],
            "username": record["username"],
            "status": self._status(record, now),
            "trafficLimitBytes": record["trafficLimitBytes"],
            "trafficLimitStrategy": record["trafficLimitStrategy"],
            "expireAt": iso(record["expireAt"]),
            "telegramId": record["telegramId"],
            "email": record["email"],
            "description": record["description"],
            "tag": record["tag"],
            "hwidDeviceLimit": record["hwidDeviceLimit"],
            "externalSquadUuid": record["externalSquadUuid"],
            "trojanPassword": record["trojanPassword"],
            "vlessUuid": record["vlessUuid"],
            "ssPassword": record["ssPassword"],
            "lastTriggeredThreshold": 0,
            "subRevokedAt": None,
            "lastTrafficResetAt": iso(record["lastTrafficResetAt"]),
            "createdAt": iso(record["createdAt"]),
            "updatedAt": iso(record["updatedAt"]),
            "subscriptionUrl": f"https://{domain}/api/sub/{record['shortUuid']}",
            "activeInternalSquads": [{"uuid": squad, "name": f"squad-{squad[:8]}"} for squad in record["squads"]],
            "userTraffic": {
                "usedTrafficBytes": record["usedTrafficBytes"],
                "lifetimeUsedTrafficBytes": record["lifetimeUsedTrafficBytes"],
                "onlineAt": None,
                "firstConnectedAt": None,
                "lastConnectedNodeUuid": None,
            },
        }

    # --- HTTP --------------------------------------------------------------

    def _serve(self, handler):
        with self._lock:
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)
        try:
            self._dispatch(handler)
        except OSError:
            handler.close_connection = True  # the client went away
        finally:
            with self._lock:
                self._in_flight -= 1
            if handler.command != "GET":
                self.save_state()

    def _dispatch(self, handler):
        method = handler.command
        path = urlsplit(handler.path).path
        length = handler.headers.get("Content-Length")
        if length and (not (length.isascii() and length.isdigit()) or int(length) > MAX_REQUEST_BYTES):
            self._respond(handler, 413, {"statusCode": 413, "message": "Payload Too Large"}, close=True)
            return
        raw = handler.rfile.read(int(length)) if length else b""

        if path.startswith("/_fake/"):
            self._control(handler, method, path, raw)
            return

        if self.require_forwarded and not self._forwarded_ok(handler):
            with self._lock:
                self._bump(self._rejected, "no_forwarded_headers")
            self._drop(handler)
            return

        route, params = self._match(method, path)
        with self._lock:
            self._bump(self._calls, route or f"{method} (unmatched)")
        if not self._authorized(handler):
            with self._lock:
                self._bump(self._rejected, "unauthorized")
            self._respond(handler, 401, {"message": "Unauthorized", "statusCode": 401})
            return
        if route is None:
            self._respond(handler, 404, {"message": f"Cannot {method} {path}", "error": "Not Found", "statusCode": 404})
            return

        subject = self._subject(route, params, raw)
        if subject is not None:
            handler.timed = {"username": subject, "route": route, "arrived": handler.arrived}
        try:
            self._answer(handler, route, params, path, raw)
        finally:
            self._answered(handler)

    def _answered(self, handler):
        """Close the request's timeline entry; called before the first byte of the answer
        goes out, so a client that has its answer finds the entry there."""
        entry, handler.timed = handler.timed, None
        if entry is not None:
            entry["done"] = time.monotonic()
            with self._lock:
                self._timeline.append(entry)

    def _answer(self, handler, route, params, path, raw):
        latency_ms, fault, hold = self._draw_fault(route)
        answer = None
        if fault in (None, "lost_response"):
            # The work is done inside the latency, not after it: a panel with
            # 20 ms of latency answers 20 ms after the request arrived.
            answer = self._process(route, params, path, raw)
        if latency_ms and self._stopping.wait(max(0.0, handler.arrived + latency_ms / 1000.0 - time.monotonic())):
            self._drop(handler)
            return
        if fault == "fail":
            self._respond(handler, 500, self._error_body(path, "A001", 500))
            return
        if fault == "drop":
            self._drop(handler)
            return
        if fault == "oversized":
            filler = "x" * OVERSIZED_BYTES
            self._respond(handler, 200, {"response": {"filler": filler}})
            return
        if fault == "redirect":
            self._answered(handler)
            handler.send_response(302)
            handler.send_header("Location", REDIRECT_TARGET + path)
            handler.send_header("Content-Length", "0")
            handler.end_headers()
            return
        if fault == "timeout" and self._stopping.wait(hold):
            self._drop(handler)
            return

        status, body = answer if answer is not None else self._process(route, params, path, raw)
        if fault == "lost_response":
            self._drop(handler)  # applied, never answered
            return
        self._respond(handler, status, body)

    def _subject(self, route, params, raw):
        """The username a users-API request is about, as far as it can be told before it runs."""
        if route == ROUTE_GET_BY_USERNAME:
            return params["username"]
        if route in (ROUTE_CREATE, ROUTE_UPDATE):
            try:
                body = json.loads(raw or b"{}")
            except (ValueError, UnicodeDecodeError):
                return None
            if not isinstance(body, dict):
                return None
            if route == ROUTE_CREATE or not body.get("id"):
                return body.get("username") if isinstance(body.get("username"), str) else None
            params = {"id": str(body["id"])}
        raw_id = params.get("id", "")
        if not raw_id.isascii() or not raw_id.isdigit():
            return None
        with self._lock:
            record = self._users.get(int(raw_id))
            return record["username"] if record else None

    def _forwarded_ok(self, handler):
        return bool(handler.headers.get("x-forwarded-for")) and handler.headers.get("x-forwarded-proto") == "https"

    def _authorized(self, handler):
        header = handler.headers.get("Authorization") or ""
        scheme, _, presented = header.partition(" ")
        return scheme.lower() == "bearer" and secrets.compare_digest(presented.strip(), self.token)

    @staticmethod
    def _match(method, path):
        for pattern, methods in _ROUTES:
            found = pattern.match(path)
            if found and method in methods:
                return methods[method], {key: unquote(value) for key, value in found.groupdict().items()}
        return None, {}

    def _draw_fault(self, route):
        with self._lock:
            faults = self._faults
            applies = (not faults["routes"] or route in faults["routes"]) and (
                not faults["writes_only"] or route in WRITE_ROUTES
            )
            kind = None
            if applies and any(faults[name] for name in RATE_FIELDS):
                draw, total = self._rng.random(), 0.0
                for name in FAULT_KINDS:
                    total += faults[f"{name}_rate"]
                    if draw < total:
                        kind = name
                        break
            if kind:
                self._bump(self._faults_injected, kind)
            return faults["latency_ms"], kind, faults["hold_seconds"]

    @staticmethod
    def _error_body(path, code, status=None):
        return {
            "timestamp": iso(utcnow()),
            "path": path,
            "message": ERROR_MESSAGES.get(code, "Error"),
            "errorCode": code,
        }

    def _respond(self, handler, status, body, close=False):
        data = json.dumps(body, separators=(",", ":")).encode()
        self._answered(handler)
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json; charset=utf-8")
        handler.send_header("Content-Length", str(len(data)))
        if close:
            handler.send_header("Connection", "close")
            handler.close_connection = True
        handler.end_headers()
        handler.wfile.write(data)

    def _drop(self, handler):
        """Close the socket without a byte of answer, like a panel refusing the request."""
        self._answered(handler)
        handler.close_connection = True
        try:
            handler.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    # --- the users API -----------------------------------------------------

    def _process(self, route, params, path, raw):
        try:
            body = self._json_body(raw) if route in (ROUTE_CREATE, ROUTE_UPDATE) else None
            with self._lock:
                return self._apply(route, params, path, body)
        except _Reply as reply:
            return reply.status, reply.body

    @staticmethod
    def _json_body(raw):
        try:
            body = json.loads(raw or b"{}")
        except (ValueError, UnicodeDecodeError):
            raise _Reply(400, {"message": "Unexpected token in JSON", "error": "Bad Request", "statusCode": 400})
        if not isinstance(body, dict):
            check = _Validation()
            check.add([], "Invalid input: expected object", "invalid_type")
            check.check()
        return body

    @staticmethod
    def _user_id_param(params):
        raw = params.get("id", "")
        if not re.fullmatch(r"\d+", raw) or int(raw) <= 0:
            check = _Validation()
            check.add(["userId"], "Too small: expected number to be >0", "too_small")
            check.check()
        return int(raw)

    def _apply(self, route, params, path, body):
        now = utcnow()
        if route == ROUTE_HEALTH:
            return 200, {"response": {"runtimeMetrics": []}}
        if route == ROUTE_GET_BY_USERNAME:
            record = self._by_username(params["username"])
            if record is None:
                raise _Reply(404, self._error_body(path, PANEL_USER_NOT_FOUND_BY_FIELDS))
            return 200, {"response": self._user_json(record, now)}
        if route == ROUTE_CREATE:
            return self._create(body, path, now)
        if route == ROUTE_UPDATE:
            return self._update(body, path, now)

        record = self._users.get(self._user_id_param(params))
        if route == ROUTE_GET_BY_ID:
            if record is None:
                raise _Reply(404, self._error_body(path, PANEL_USER_NOT_FOUND_BY_FIELDS))
            return 200, {"response": self._user_json(record, now)}
        if record is None:
            raise _Reply(404, self._error_body(path, PANEL_USER_NOT_FOUND))
        if route == ROUTE_ENABLE:
            if self._status(record, now) == "ACTIVE":
                raise _Reply(400, self._error_body(path, PANEL_USER_ALREADY_ENABLED))
            record["status"] = "ACTIVE"
        elif route == ROUTE_DISABLE:
            if self._status(record, now) == "DISABLED":
                raise _Reply(400, self._error_body(path, PANEL_USER_ALREADY_DISABLED))
            record["status"] = "DISABLED"
        elif route == ROUTE_RESET_TRAFFIC:
            record["usedTrafficBytes"] = 0
            record["lastTrafficResetAt"] = now
        elif route == ROUTE_DELETE:
            del self._users[record["id"]]
            del self._usernames[record["username"]]
            self._bump(self._writes_applied, route)
            return 200, {"response": {"isDeleted": True}}
        record["updatedAt"] = now
        self._bump(self._writes_applied, route)
        return 200, {"response": self._user_json(record, now)}

    def _create(self, body, path, now):
        check = _Validation()
        username = body.get("username")
        if not isinstance(username, str):
            check.add(["username"], "Invalid input: expected string", "invalid_type")
        else:
            if not USERNAME_PATTERN.match(username):
                check.add(
                    ["username"], "Username can only contain letters, numbers, underscores and dashes", "invalid_format"
                )
            if len(username) > 36:
                check.add(["username"], "Username must be less than 36 characters", "too_big")
            if len(username) < 3:
                check.add(["username"], "Username must be at least 3 characters", "too_small")
        check.enum(body, "status", USER_STATUSES)
        check.number(body, "trafficLimitBytes", minimum=0)
        check.enum(body, "trafficLimitStrategy", RESET_PERIODS)
        expire_at = check.datetime(body, "expireAt", required=True)
        check.number(body, "hwidDeviceLimit", minimum=0, integer=True)  # null refused on create
        check.squads(body, "activeInternalSquads")
        check.uuid(body, "externalSquadUuid", nullable=True)
        check.uuid(body, "vlessUuid")
        check.string(body, "description")
        check.string(body, "shortUuid")
        check.tag(body, "tag")
        check.number(body, "telegramId", nullable=True)
        check.email(body, "email")
        check.check()
        if username in self._concurrent_creates:
            self._new_record(username, *self._concurrent_creates.pop(username))
        if self._by_username(username):
            raise _Reply(400, self._error_body(path, PANEL_USERNAME_EXISTS))
        record = self._new_record(
            username,
            expire_at,
            body.get("trafficLimitBytes", 0),
            body.get("hwidDeviceLimit"),
            body.get("activeInternalSquads") or [],
            body.get("status") or "ACTIVE",
            extra=body,
        )
        self._bump(self._creates_applied, username)
        self._bump(self._writes_applied, ROUTE_CREATE)
        return 201, {"response": self._user_json(record, now)}

    def _update(self, body, path, now):
        check = _Validation()
        check.string(body, "username")
        check.number(body, "id")
        check.enum(body, "status", WRITABLE_STATUSES)
        check.number(body, "trafficLimitBytes", minimum=0)
        check.enum(body, "trafficLimitStrategy", RESET_PERIODS)
        expire_at = check.datetime(body, "expireAt")
        if expire_at is not None and expire_at <= now:
            check.add(["expireAt"], "Expiration date cannot be in the past")
        check.number(body, "hwidDeviceLimit", minimum=0, integer=True, nullable=True)
        check.squads(body, "activeInternalSquads")
        check.uuid(body, "externalSquadUuid", nullable=True)
        check.string(body, "description", nullable=True)
        check.tag(body, "tag")
        check.number(body, "telegramId", nullable=True)
        check.email(body, "email")
        if not (body.get("username") or body.get("id")):
            check.add([], "At least one of username, id must be provided")
        check.check()

        if body.get("id"):
            record = self._users.get(body["id"])
        else:
            record = self._by_username(body["username"])
        if record is None:
            raise _Reply(404, self._error_body(path, PANEL_USER_NOT_FOUND))
        if expire_at is not None:
            if expire_at != record["expireAt"]:
                self._expiry_moves.setdefault(record["username"], []).append((record["expireAt"], expire_at))
            record["expireAt"] = expire_at
        if "trafficLimitBytes" in body:
            record["trafficLimitBytes"] = int(body["trafficLimitBytes"])
        if "hwidDeviceLimit" in body:  # null clears the per-user limit; absent leaves it
            record["hwidDeviceLimit"] = body["hwidDeviceLimit"]
        if "activeInternalSquads" in body:
            record["squads"] = list(body["activeInternalSquads"])
        if "status" in body:
            record["status"] = body["status"]
        for key in ("trafficLimitStrategy", "description", "tag", "telegramId", "email", "externalSquadUuid"):
            if key in body:
                record[key] = body[key]
        record["updatedAt"] = now
        self._bump(self._writes_applied, ROUTE_UPDATE)
        return 200, {"response": self._user_json(record, now)}

    # --- control surface (/_fake/...) --------------------------------------

    def _control(self, handler, method, path, raw):
        if not self._authorized(handler):
            self._respond(handler, 401, {"message": "Unauthorized", "statusCode": 401})
            return
        try:
            payload = json.loads(raw) if raw else {}
        except (ValueError, UnicodeDecodeError):
            self._respond(handler, 400, {"error": "body is not JSON"})
            return
        try:
            status, body = self._control_action(method, path, payload)
        except (ValueError, TypeError) as error:
            status, body = 400, {"error": str(error)}
        except KeyError:
            status, body = 404, {"error": "no such user"}
        self._respond(handler, status, body)

    def _control_action(self, method, path, payload):
        if not isinstance(payload, dict):
            raise ValueError("body must be a JSON object")
        if method == "GET" and path == "/_fake/stats":
            return 200, self.stats()
        if method == "GET" and path == "/_fake/users":
            return 200, {"users": self.users()}
        if method == "GET" and path == "/_fake/faults":
            return 200, self.faults()
        if method == "POST" and path == "/_fake/faults":
            if payload.pop("clear", False):
                self.clear_faults()
            return 200, self.set_faults(**payload)
        if method == "POST" and path == "/_fake/reset":
            self.reset()
            return 200, {"reset": True}
        found = re.fullmatch(r"/_fake/users/([^/]+)", path)
        if found:
            username = unquote(found.group(1))
            if method == "PATCH":
                return 200, self.edit_user(username, **payload)
            if method == "DELETE":
                if not self.delete_user(username):
                    raise KeyError(username)
                return 200, {"deleted": True}
        return 404, {"error": "no such control route"}


def run_cli(
    host="127.0.0.1", port=DEFAULT_PORT, token=None, latency_ms=0, dev_mode=False, state_file=None, fresh=False
):
    """`python omniflow.py fake-remnawave`: serve in the foreground until Ctrl-C or SIGTERM."""
    import signal

    printed_token = None
    if not token:
        token, is_dev_token = default_token()
        if is_dev_token:
            printed_token = token  # the fixed development token is no secret; a configured one is never printed
    panel = FakeRemnawave(token=token, host=host, port=port, require_forwarded=not dev_mode, latency_ms=latency_ms)
    if state_file:
        panel.keep_state_in(state_file, fresh)

    def stop(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    panel.bind()
    print(f"fake Remnawave panel (contract 3.4.15 users API) on {panel.base_url}", flush=True)
    print(
        f"token: {printed_token}" if printed_token else "token: APP_REMNAWAVE_TOKEN (from the environment or .env)",
        flush=True,
    )
    if dev_mode:
        print("dev mode: x-forwarded-for / x-forwarded-proto not required", flush=True)
    print(panel.state_line(), flush=True)
    print("control: GET /_fake/stats, GET /_fake/users, POST /_fake/faults, POST /_fake/reset", flush=True)
    try:
        panel.serve_forever()
    except KeyboardInterrupt:
        pass
    panel.save_state()  # what a request changed just before the stop, whose own write may not have run yet
    print("fake Remnawave panel stopped", flush=True)
