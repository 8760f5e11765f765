"""The queue keeps its pace through a long burn-down on PostgreSQL with autovacuum
off for `jobs`: the leader vacuums the table itself once dead row versions pile up,
so the claim does not slow job after job (the figures: bench.sustained)."""

import itertools
import signal
import threading
import time

import pytest

from jobs import OmniflowHuey
from models.base import db
from tests.support.processes import wait_for

JOBS = 200_000
TENTH = JOBS // 10
# The last tenth's rate against the first's: generous, the machine's load moves under
# a test (the measured figure is bench.sustained's). Without the leader's ANALYZE the
# claim sorts every due row and the burn-down does not end within BURN_DOWN_WITHIN_S;
# without its VACUUM the rate falls tenth after tenth as dead index entries pile up.
LAST_TO_FIRST_AT_LEAST = 0.4
BURN_DOWN_WITHIN_S = 300

sustained = OmniflowHuey("sustained")
_done = itertools.count(1)
_marks = {}  # jobs done -> monotonic time, at 1 and every tenth
_lock = threading.Lock()


@sustained.job("t_sustained_noop", queue="default", max_attempts=1)
def t_sustained_noop():
    n = next(_done)
    if n == 1 or n % TENTH == 0:
        with _lock:
            _marks[n] = time.monotonic()


def insert_noops(count):
    """The rows a bulk insert of `count` no-op jobs writes, in one statement."""
    db.execute_sql(
        "INSERT INTO jobs (kind, queue, state, args, max_attempts, priority, unique_states, created_at, scheduled_at) "
        "SELECT 't_sustained_noop', 'default', 'available', '{}', 1, 0, 0, "
        "now() AT TIME ZONE 'UTC' - interval '1 second', now() AT TIME ZONE 'UTC' - interval '1 second' "
        "FROM generate_series(1, %s)",
        [count],
    )


@pytest.fixture
def jobs_without_autovacuum(database):
    database.execute_sql("ALTER TABLE jobs SET (autovacuum_enabled = false)")
    yield database
    database.execute_sql("ALTER TABLE jobs RESET (autovacuum_enabled)")


@pytest.mark.parametrize("backend", ["postgres"])
def test_the_last_tenth_of_a_long_burn_down_runs_near_the_pace_of_the_first(jobs_without_autovacuum):
    insert_noops(JOBS)
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    consumer = sustained.consumer(concurrency={"default": 4}, shutdown_timeout=5)
    consumer.start()
    try:
        wait_for(lambda: JOBS in _marks, timeout=BURN_DOWN_WITHIN_S, interval=0.5, message=f"{JOBS} no-op jobs run")
    finally:
        consumer.stop(graceful=True)
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    first = (TENTH - 1) / (_marks[TENTH] - _marks[1])
    last = TENTH / (_marks[JOBS] - _marks[JOBS - TENTH])
    assert last >= LAST_TO_FIRST_AT_LEAST * first, f"first tenth {first:.0f} jobs/s, last {last:.0f} jobs/s"
