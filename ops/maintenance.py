"""The maintenance switch (SPEC 9): one row; while active, fulfillment is held
and purchases are refused; settlements, refunds and order history go on."""

from models.base import utcnow
from models.ops import MaintenanceState
from ops.records import record_audit

MAINTENANCE_ROW = 1


def is_active():
    state = MaintenanceState.get_or_none(MaintenanceState.id == MAINTENANCE_ROW)
    return bool(state and state.active)


def set_mode(active, reason, actor):
    """Turn maintenance on or off (audited); returns False when it already was."""
    state = MaintenanceState.get_by_id(MAINTENANCE_ROW)
    if bool(state.active) == bool(active):
        return False
    now = utcnow()
    MaintenanceState.update(
        active=bool(active), since=now if active else None, reason=reason, set_by=actor, updated_at=now
    ).where(MaintenanceState.id == MAINTENANCE_ROW).execute()
    record_audit("system", "maintenance.enabled" if active else "maintenance.disabled", actor, reason=reason)
    return True
