"""The maintenance controller (SPEC 6, 9): a loop in every web replica that
samples dependency health and moves the maintenance switch.

- The panel failing FAIL_PROBES probes in a row turns maintenance on (set by
  `controller`); PASS_PROBES healthy probes in a row turn it off again — but
  only when the controller turned it on. A switch an operator set is never
  moved by the controller.
- The database is probed too, but the switch lives there: while it does not
  answer there is nothing to write, and fulfillment cannot run anyway.
- Every change reads the switch under a row lock first and writes only a
  real change, so replicas probing at the same time neither fight nor write
  the audit event twice.
"""

import logging
import threading

from models.base import db
from models.ops import MaintenanceState
from models.transactions import locked
from ops import maintenance

logger = logging.getLogger("omniflow.maintenance")

ACTOR = "controller"
FAIL_PROBES = 3
PASS_PROBES = 2
REASON_DOWN = "the Remnawave panel failed {n} health probes in a row"
REASON_UP = "the Remnawave panel answers its health probe again"


class MaintenanceController:
    def __init__(self, panel, fail_probes=FAIL_PROBES, pass_probes=PASS_PROBES):
        self.panel = panel
        self.fail_probes = fail_probes
        self.pass_probes = pass_probes
        self.failures = 0
        self.passes = 0

    def probe_once(self):
        """One sample; returns what it did: 'enabled', 'disabled' or None."""
        healthy = bool(self.panel.healthy())
        self.failures = 0 if healthy else self.failures + 1
        self.passes = self.passes + 1 if healthy else 0
        try:
            if self.failures >= self.fail_probes:
                return "enabled" if self._move(True, REASON_DOWN.format(n=self.failures)) else None
            if self.passes >= self.pass_probes:
                return "disabled" if self._move(False, REASON_UP) else None
        except Exception:
            logger.warning("maintenance controller could not reach the database", exc_info=True)
        finally:
            if not db.is_closed() and not db.in_transaction():
                db.close()
        return None

    def _move(self, active, reason):
        with db.atomic():
            state = locked(MaintenanceState.select().where(MaintenanceState.id == maintenance.MAINTENANCE_ROW)).get()
            if bool(state.active) == active:
                return False
            if not active and state.set_by != ACTOR:
                return False  # an operator turned it on: only an operator turns it off
            changed = maintenance.set_mode(active, reason, actor=ACTOR)
        if changed:
            logger.warning("maintenance mode %s by the controller: %s", "on" if active else "off", reason)
        return changed


def start(panel, interval_s):
    """Run the controller in a daemon thread of this process; returns its stop event."""
    stop = threading.Event()
    controller = MaintenanceController(panel)

    def loop():
        while not stop.wait(interval_s):
            controller.probe_once()

    threading.Thread(target=loop, name="MaintenanceController", daemon=True).start()
    return stop
