"""How the engine's threads live through a database that stops answering.

The database layer drops a connection the server cut (config/database.py),
so each loop only has to try again: producers keep claiming, the completer
keeps the outcomes it could not write and writes them once the database
answers, the maintenance steps run again at their next turn, the LISTEN
connection reconnects and re-listens. Between attempts a loop backs off
(Backoff) and reports the failure through `report_failure`, which logs an
identical failure once per window, not once per attempt.

A worker whose database has answered none of its statements for
DATABASE_OUTAGE_LIMIT_S gives up: one line, exit status
EXIT_DATABASE_UNREACHABLE, so its supervisor restarts it. It hands nothing
back on the way out (it cannot); the jobs it held stay `running` under its
id until the leader rescues them.
"""

import logging
import os

from config.database import is_unavailable, server_name, unanswered_for
from config.logging import log_repeated

DATABASE_OUTAGE_LIMIT_S = 300
# Tests only: a shorter bound, so a test can watch a worker give up.
OUTAGE_LIMIT_ENV = "OMNIFLOW_TEST_DB_OUTAGE_LIMIT_S"
EXIT_DATABASE_UNREACHABLE = 3
BACKOFF_FIRST_S = 0.25
BACKOFF_MAX_S = 5.0

logger = logging.getLogger("omniflow.jobs")


class Backoff:
    """Waits between a loop's failed attempts: doubling from `first` up to `maximum`, reset by a success."""

    def __init__(self, first=BACKOFF_FIRST_S, maximum=BACKOFF_MAX_S):
        self.first = first
        self.maximum = maximum
        self._next = first

    def next(self):
        delay = self._next
        self._next = min(delay * 2, self.maximum)
        return delay

    def reset(self):
        self._next = self.first


def report_failure(log, message, error, level=logging.ERROR, **fields):
    """A loop's failed attempt, rate-limited: the database not answering in one line, a bug with its traceback."""
    log_repeated(log, level, message, error=error, trace=not is_unavailable(error), **fields)


def outage_limit_s():
    return float(os.environ.get(OUTAGE_LIMIT_ENV) or DATABASE_OUTAGE_LIMIT_S)


def give_up_if_unreachable(limit_s):
    """Exit the worker once the database has not answered it for `limit_s` seconds."""
    silent_s = unanswered_for()
    if silent_s <= limit_s:
        return
    logger.critical(
        f"database unreachable for {silent_s:.0f} s ({server_name()}, limit {limit_s:.0f} s): "
        "exiting so the supervisor restarts this worker; rescue re-runs the jobs it held"
    )
    raise SystemExit(EXIT_DATABASE_UNREACHABLE)
