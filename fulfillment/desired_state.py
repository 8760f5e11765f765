"""The desired state of an entitlement on the panel (SPEC 2.24), what each
operation changes of it (SPEC 2.19), and the narrow summaries that history
rows keep of it (SPEC 2.20).

JSON shape: {"endsAt", "trafficAllowanceBytes" (null = unlimited),
"deviceLimit" (null = unlimited), "squadIds", optional "effectiveAt",
optional "resetTraffic", optional "resume"}. The panel is sent expireAt =
endsAt + the plan's grace period, and 0 for an unlimited limit.

An entitlement row holds what was last applied to the panel. An operation
owns only the fields it changes (`OWNED_FIELDS`): when it runs, the rest of
its desired state is read from the entitlement as it is then, and only its
success writes its own fields to the entitlement. A change that is
cancelled or fails therefore leaves the entitlement where it was, and never
travels to the panel inside a later operation or a reconcile.
"""

import datetime
import json
from dataclasses import dataclass, field, replace


class InvalidDesiredState(ValueError):
    """The stored desired state cannot be understood; retrying cannot help."""


def _iso(value):
    return value.isoformat(timespec="seconds") + "Z"


def _second(value):
    return value.replace(microsecond=0) if value is not None else None


def _parse_time(value, name):
    if not isinstance(value, str):
        raise InvalidDesiredState(f"{name} must be an ISO-8601 time")
    try:
        parsed = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidDesiredState(f"{name} is not an ISO-8601 time") from None
    if parsed.tzinfo is not None:
        parsed = parsed.astimezone(datetime.timezone.utc).replace(tzinfo=None)
    return parsed


def _limit(value, name):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidDesiredState(f"{name} must be null or a non-negative integer")
    return value


LIMIT_FIELDS = ("traffic_allowance_bytes", "device_limit")
STATE_FIELDS = ("ends_at", *LIMIT_FIELDS, "squad_ids")
# The fields of the desired state each operation sets; the others it reads
# from the entitlement when it runs. A create provisions its whole state.
OWNED_FIELDS = {
    "create": STATE_FIELDS,
    "extend": ("ends_at",),
    "set_limits": LIMIT_FIELDS,
    "set_squads": ("squad_ids",),
}


def owned_fields(operation):
    return OWNED_FIELDS.get(operation, ())


@dataclass(frozen=True)
class DesiredState:
    ends_at: datetime.datetime
    traffic_allowance_bytes: int = None
    device_limit: int = None
    squad_ids: tuple = field(default_factory=tuple)
    effective_at: datetime.datetime = None
    reset_traffic: bool = False
    resume: bool = False  # an `enable` that ends a pause: gives the paused time back (SPEC 2.25)

    @classmethod
    def from_entitlement(cls, entitlement, reset_traffic=False, ends_at=None, resume=False):
        return cls(
            ends_at=ends_at or entitlement.ends_at,
            traffic_allowance_bytes=entitlement.traffic_allowance_bytes,
            device_limit=entitlement.device_limit,
            squad_ids=tuple(entitlement.squads),
            reset_traffic=reset_traffic,
            resume=resume,
        )

    def to_json(self):
        data = {
            "endsAt": _iso(self.ends_at),
            "trafficAllowanceBytes": self.traffic_allowance_bytes,
            "deviceLimit": self.device_limit,
            "squadIds": list(self.squad_ids),
        }
        if self.effective_at is not None:
            data["effectiveAt"] = _iso(self.effective_at)
        if self.reset_traffic:
            data["resetTraffic"] = True
        if self.resume:
            data["resume"] = True
        return json.dumps(data, sort_keys=True)

    @classmethod
    def parse(cls, text):
        try:
            data = json.loads(text)
        except (TypeError, ValueError):
            raise InvalidDesiredState("desired state is not JSON") from None
        if not isinstance(data, dict):
            raise InvalidDesiredState("desired state is not an object")
        squads = data.get("squadIds", [])
        if not isinstance(squads, list) or not all(isinstance(s, str) for s in squads):
            raise InvalidDesiredState("squadIds must be a list of ids")
        reset, resume = data.get("resetTraffic", False), data.get("resume", False)
        if not isinstance(reset, bool) or not isinstance(resume, bool):
            raise InvalidDesiredState("resetTraffic and resume must be booleans")
        return cls(
            ends_at=_parse_time(data.get("endsAt"), "endsAt"),
            traffic_allowance_bytes=_limit(data.get("trafficAllowanceBytes"), "trafficAllowanceBytes"),
            device_limit=_limit(data.get("deviceLimit"), "deviceLimit"),
            squad_ids=tuple(squads),
            effective_at=_parse_time(data["effectiveAt"], "effectiveAt") if data.get("effectiveAt") else None,
            reset_traffic=reset,
            resume=resume,
        )

    def same_parameters(self, other, operation):
        """What an idempotency key promises: the same effective time and the same
        values of the fields `operation` sets (period, limits, squad set). The
        fields it reads from the entitlement may have moved on since the key was
        first used, and a replay must still find the first operation."""
        same = {
            "ends_at": lambda: _second(self.ends_at) == _second(other.ends_at),
            "traffic_allowance_bytes": lambda: self.traffic_allowance_bytes == other.traffic_allowance_bytes,
            "device_limit": lambda: self.device_limit == other.device_limit,
            "squad_ids": lambda: set(self.squad_ids) == set(other.squad_ids),
        }
        return (
            _second(self.effective_at) == _second(other.effective_at)
            and self.resume == other.resume
            and all(same[name]() for name in owned_fields(operation))
        )

    def applied_to(self, applied, operation):
        """This operation's desired state on top of the entitlement as last applied:
        its own fields from here, the rest from `applied`. An extend never shortens
        the period (an extend queued earlier may have been applied after it)."""
        values = {name: getattr(applied, name) for name in STATE_FIELDS}
        values.update({name: getattr(self, name) for name in owned_fields(operation)})
        if operation == "extend":
            values["ends_at"] = max(self.ends_at, applied.ends_at)
        return replace(self, **values)

    def entitlement_columns(self, operation):
        """What a success of `operation` writes to the entitlement: the fields it owns
        (a create's were written with the entitlement by its settlement)."""
        if operation == "create":
            return {}
        columns = {name: getattr(self, name) for name in owned_fields(operation)}
        if "squad_ids" in columns:
            columns["squad_ids"] = json.dumps(list(self.squad_ids))
        return columns

    def remote_expire_at(self, grace_period_hours):
        return self.ends_at + datetime.timedelta(hours=grace_period_hours)

    @property
    def traffic_limit_bytes(self):
        """What the panel is sent: 0 means unlimited there."""
        return self.traffic_allowance_bytes or 0

    @property
    def hwid_device_limit(self):
        """What the panel is sent and must hold: 0 means no limit there; null would
        mean its HWID_FALLBACK_DEVICE_LIMIT (SPEC 2.5)."""
        return self.device_limit or 0

    def request_summary(self, grace_period_hours):
        """What a history row may keep of a request: never squad ids or links."""
        return {
            "endsAt": _iso(self.ends_at),
            "remoteExpireAt": _iso(self.remote_expire_at(grace_period_hours)),
            "trafficLimitConfigured": self.traffic_allowance_bytes is not None,
            "deviceLimitConfigured": self.device_limit is not None,
            "squadCount": len(self.squad_ids),
        }


def observed_summary(remote):
    """Observed state (SPEC 2.24) of a panel user: status, expiry, limits. No link, no squads."""
    expire_at = remote.expire_at
    if expire_at.tzinfo is not None:
        expire_at = expire_at.astimezone(datetime.timezone.utc).replace(tzinfo=None)
    return {
        "status": remote.status,
        "expireAt": _iso(expire_at),
        "trafficLimitBytes": remote.traffic_limit_bytes,
        "deviceLimit": remote.hwid_device_limit,
    }
