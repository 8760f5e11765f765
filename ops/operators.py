"""Operator accounts, permissions and sessions (SPEC 4.5, 12.1).

A session token is 32 random bytes shown to the browser once (in its
cookie); the database keeps only its SHA-256, and a lookup by that hash
never compares secrets in Python. A session ends after `idle` without use
(APP_OPERATOR_IDLE_MINUTES) and SESSION_TTL after sign-in whatever the
activity: its `expires_at` is the earlier of the two, moved on as it is used
(written at most once per RENEW_STEP, not on every request).

Disabling an operator, resetting a password and revoking sessions (the CLI
and the panel's Operators page) each end the operator's sessions at once and
write an audit event with the reason, in one transaction.
"""

import datetime
import functools
import hashlib
import ipaddress
import json
import secrets
import zoneinfo

from peewee import IntegrityError, fn

from models.base import db, utcnow
from models.operators import LoginFailure, Operator, OperatorSession
from ops.records import record_audit
from security.passwords import DECOY_HASH, hash_password, verify_password

SYSTEM_READ = "system.read"
SYSTEM_WRITE = "system.write"
SUBSCRIPTIONS_READ = "subscriptions.read"
SUBSCRIPTIONS_WRITE = "subscriptions.write"
# The shop's back office (SPEC 13.14): customers and their subscriptions are
# subscriptions.read; orders, payments and wallets payments.read; refunds payments.write.
PAYMENTS_READ = "payments.read"
PAYMENTS_WRITE = "payments.write"
# Campaigns and announcements through the bot: creating one and following its delivery (SPEC 6, 14.6).
CAMPAIGNS_WRITE = "campaigns.write"
# Support tickets: reading them (with the customers' words) and replying.
SUPPORT_READ = "support.read"
SUPPORT_WRITE = "support.write"
# Operator accounts: disabling one, resetting a password, revoking sessions. Whoever holds it can act as
# anyone (a reset password signs in), so it is a permission of its own, not part of system.write.
OPERATORS_WRITE = "operators.write"
PERMISSIONS = (
    SYSTEM_READ, SYSTEM_WRITE, SUBSCRIPTIONS_READ, SUBSCRIPTIONS_WRITE, PAYMENTS_READ, PAYMENTS_WRITE, CAMPAIGNS_WRITE,
    SUPPORT_READ, SUPPORT_WRITE, OPERATORS_WRITE,
)  # fmt: skip

SESSION_TTL = datetime.timedelta(hours=12)
SESSION_IDLE = datetime.timedelta(minutes=30)  # APP_OPERATOR_IDLE_MINUTES' default
RENEW_STEP = datetime.timedelta(minutes=1)
USERNAME_MAX = 64
# Five wrong passwords for one username from one client address within 15
# minutes: that name is refused from that address (without hashing anything)
# until the oldest of them is 15 minutes old. Other addresses are not
# affected, so whoever types wrong passwords elsewhere cannot lock the
# operator out; the README says why there is no cap across addresses.
MAX_FAILURES = 5
FAILURE_WINDOW = datetime.timedelta(minutes=15)
# An IPv6 subscriber gets at least a /64: counted per address, one client would
# have 2**64 fresh addresses to guess from.
IPV6_CLIENT_PREFIX = 64


class OperatorError(ValueError):
    pass


class TooManyAttempts(Exception):
    """Sign-ins for this username are throttled for now."""


def create_operator(username, password, permissions, actor="cli"):
    username = (username or "").strip()
    if not username or len(username) > USERNAME_MAX or not username.isprintable():
        raise OperatorError(f"a username is 1 to {USERNAME_MAX} printable characters")
    unknown = sorted(set(permissions) - set(PERMISSIONS))
    if unknown:
        raise OperatorError(f"unknown permissions: {', '.join(unknown)} (known: {', '.join(PERMISSIONS)})")
    password_hash = hash_password(password)
    try:
        with db.atomic():
            operator = Operator.create(
                username=username, password_hash=password_hash, permissions=json.dumps(sorted(set(permissions)))
            )
            record_audit(
                "system",
                "operator.created",
                actor,
                subject_type="operator",
                subject_id=operator.id,
                details={"permissions": sorted(set(permissions))},
            )
    except IntegrityError:
        raise OperatorError(f"an operator named {username!r} already exists") from None
    return operator


def throttle_address(client_address):
    """What sign-in failures are counted under: the client's IPv4 address, or the
    /64 network of an IPv6 one (an IPv4-mapped IPv6 address counts as the IPv4)."""
    try:
        address = ipaddress.ip_address(client_address)
    except ValueError:
        return client_address[:64]
    if address.version == 6 and address.ipv4_mapped:
        return str(address.ipv4_mapped)
    if address.version == 6:
        return str(ipaddress.ip_network(f"{address}/{IPV6_CLIENT_PREFIX}", strict=False))
    return str(address)


def authenticate(username, password, client_address, now=None):
    """The operator for these credentials, or None (an unknown name costs as long as
    a wrong password). Raises TooManyAttempts while the name is throttled from this
    client address, known name or not."""
    now = now or utcnow()
    since = now - FAILURE_WINDOW
    pair = (LoginFailure.username == username) & (LoginFailure.client_address == throttle_address(client_address))
    if LoginFailure.select().where(pair, LoginFailure.failed_at > since).count() >= MAX_FAILURES:
        raise TooManyAttempts(username)
    operator = Operator.get_or_none(Operator.username == username)
    if operator is None:
        verify_password(password, DECOY_HASH)
    elif verify_password(password, operator.password_hash) and operator.disabled_at is None:
        # Only this address's count: a success must not reset what is counted against other addresses.
        LoginFailure.delete().where(pair).execute()
        return operator
    with db.atomic():
        LoginFailure.delete().where(LoginFailure.failed_at <= since).execute()  # the table keeps one window
        LoginFailure.create(username=username, client_address=throttle_address(client_address), failed_at=now)
    return None


def open_session(operator, now=None, idle=SESSION_IDLE):
    """A new session; returns the token (the only time it exists outside the browser)."""
    now = now or utcnow()
    token = secrets.token_urlsafe(32)
    OperatorSession.create(
        token_hash=_digest(token), operator=operator.id, created_at=now, expires_at=now + min(idle, SESSION_TTL)
    )
    return token


def session_operator(token, now=None, idle=SESSION_IDLE):
    """The operator of a live session, or None (unknown, ended, or the operator disabled); this use keeps the
    session alive for `idle` more, up to SESSION_TTL after sign-in."""
    if not token or len(token) > 128:
        return None
    now = now or utcnow()
    row = (
        OperatorSession.select(OperatorSession, Operator)
        .join(Operator)
        .where(OperatorSession.token_hash == _digest(token), OperatorSession.expires_at > now)
        .first()
    )
    if row is None or row.operator.disabled_at is not None:
        return None
    renewed = min(row.created_at + SESSION_TTL, now + idle)
    if renewed - row.expires_at >= RENEW_STEP:
        OperatorSession.update(expires_at=renewed).where(OperatorSession.token_hash == row.token_hash).execute()
    return row.operator


def set_time_zone(operator, time_zone):
    """An operator's own time zone (an IANA name such as Europe/Moscow), audited;
    OperatorError when it is not one."""
    if not is_time_zone(time_zone):
        raise OperatorError("a time zone is an IANA name such as UTC or Europe/Moscow")
    with db.atomic():
        Operator.update(time_zone=time_zone).where(Operator.id == operator.id).execute()
        record_audit(
            "system",
            "operator.time_zone_changed",
            f"operator:{operator.username}",
            subject_type="operator",
            subject_id=operator.id,
            details={"timeZone": time_zone},
        )


def is_time_zone(name):
    # Looked up in the list of names, so a path or a file name never reaches ZoneInfo.
    return isinstance(name, str) and name in time_zones()


@functools.cache
def time_zones():
    """Every IANA zone name this installation knows (tzdata), sorted."""
    return tuple(sorted(zoneinfo.available_timezones()))


def operator_named(username):
    """The operator of that username, or OperatorError."""
    operator = Operator.get_or_none(Operator.username == (username or "")[:USERNAME_MAX])
    if operator is None:
        raise OperatorError(f"no operator is named {str(username)[:USERNAME_MAX]!r}")
    return operator


def disable_operator(operator, actor, reason, now=None):
    """The operator can no longer sign in, and every session of theirs ends now."""
    if operator.disabled_at is not None:
        raise OperatorError(f"operator {operator.username} is already disabled")
    with db.atomic():
        Operator.update(disabled_at=now or utcnow()).where(Operator.id == operator.id).execute()
        ended = _end_sessions(operator)
        record_audit("system", "operator.disabled", actor, _required(reason), "operator", operator.id,
                     {"sessionsEnded": ended})  # fmt: skip


def enable_operator(operator, actor, reason):
    if operator.disabled_at is None:
        raise OperatorError(f"operator {operator.username} is not disabled")
    with db.atomic():
        Operator.update(disabled_at=None).where(Operator.id == operator.id).execute()
        record_audit("system", "operator.enabled", actor, _required(reason), "operator", operator.id)


def reset_password(operator, password, actor, reason):
    """A new password (WeakPassword when it is too weak); sessions opened with the old one end."""
    reason = _required(reason)
    password_hash = hash_password(password)
    with db.atomic():
        Operator.update(password_hash=password_hash).where(Operator.id == operator.id).execute()
        ended = _end_sessions(operator)
        record_audit("system", "operator.password_reset", actor, reason, "operator", operator.id,
                     {"sessionsEnded": ended})  # fmt: skip


def revoke_sessions(operator, actor, reason):
    """End every session of the operator (they sign in again); returns how many there were."""
    reason = _required(reason)
    with db.atomic():
        ended = _end_sessions(operator)
        record_audit("system", "operator.sessions_revoked", actor, reason, "operator", operator.id,
                     {"sessionsEnded": ended})  # fmt: skip
    return ended


def live_sessions(now=None):
    """{operator id: sessions not yet ended}."""
    rows = (
        OperatorSession.select(OperatorSession.operator, fn.COUNT(OperatorSession.token_hash))
        .where(OperatorSession.expires_at > (now or utcnow()))
        .group_by(OperatorSession.operator)
        .tuples()
    )
    return dict(rows)


def _end_sessions(operator):
    return OperatorSession.delete().where(OperatorSession.operator == operator.id).execute()


def _required(reason):
    reason = (reason or "").strip()
    if not reason:
        raise OperatorError("a reason is required: it is written to the audit log")
    return reason


def close_session(token):
    if token:
        OperatorSession.delete().where(OperatorSession.token_hash == _digest(token)).execute()


def _digest(token):
    return hashlib.sha256(token.encode()).hexdigest()
