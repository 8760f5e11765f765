"""The maintenance controller (SPEC 6, 9): a loop in every web replica that
samples dependency health — the database always, the Remnawave panel when one
is configured — and moves the maintenance switch.

- A dependency failing FAIL_PROBES probes in a row turns maintenance on (set
  by `controller`); PASS_PROBES probes in a row in which everything answers,
  counted from then, turn it off again — but only when the controller turned
  it on. A switch an operator set is never moved by the controller.
- The switch lives in the database. While the database does not answer
  there is nothing to write, so the controller keeps the outage in mind and
  turns maintenance on as soon as the database takes the write; the count
  of healthy probes that turns it off starts there. A database that has
  just come back after failing three probes is held in maintenance until it
  has answered PASS_PROBES more.
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
DATABASE = "the database"
PANEL = "the Remnawave panel"
REASON_DOWN = "{what} failed {n} health probes in a row"
REASON_UP = "every dependency answers its health probe again"


def database_healthy():
    """True when the bound database answers a query; never raises."""
    try:
        db.execute_sql("SELECT 1")
        return True
    except Exception as error:  # a health probe must never take its caller down
        logger.warning("database health probe failed: %s", _one_line(error))
        return False
    finally:
        if not db.is_closed() and not db.in_transaction():
            db.close()


class MaintenanceController:
    def __init__(self, panel=None, fail_probes=FAIL_PROBES, pass_probes=PASS_PROBES):
        """`panel`: a client with `healthy()`, or None when no panel is configured."""
        self.probes = {DATABASE: database_healthy}
        if panel is not None:
            self.probes[PANEL] = panel.healthy
        self.fail_probes = fail_probes
        self.pass_probes = pass_probes
        self.failures = dict.fromkeys(self.probes, 0)
        self.passes = 0
        self.outage = None  # the reason to turn maintenance on, until it is written

    def probe_once(self):
        """One sample of every dependency; returns what it did: 'enabled', 'disabled' or None."""
        healthy = {name: bool(probe()) for name, probe in self.probes.items()}
        for name, ok in healthy.items():
            self.failures[name] = 0 if ok else self.failures[name] + 1
        self.passes = self.passes + 1 if all(healthy.values()) else 0
        down = [name for name, count in self.failures.items() if count >= self.fail_probes]
        if down:
            count = max(self.failures[name] for name in down)
            self.outage = REASON_DOWN.format(what=" and ".join(down), n=count)
        try:
            if self.outage is not None:
                changed = self._move(True, self.outage)
                self.outage = None
                if changed:
                    self.passes = 0
                    return "enabled"
                return None
            if self.passes >= self.pass_probes:
                return "disabled" if self._move(False, REASON_UP) else None
        except Exception as error:
            logger.warning("maintenance controller could not write the switch: %s", _one_line(error))
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


def _one_line(error):
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0]}" if text else type(error).__name__


def start(panel, interval_s):
    """Run the controller in a daemon thread of this process; returns its stop event.
    `panel` is None when no panel is configured: the database is sampled alone."""
    stop = threading.Event()
    controller = MaintenanceController(panel)
    logger.info("maintenance controller: sampling %s every %s s", " and ".join(controller.probes), interval_s)

    def loop():
        while not stop.wait(interval_s):
            controller.probe_once()

    threading.Thread(target=loop, name="MaintenanceController", daemon=True).start()
    return stop
