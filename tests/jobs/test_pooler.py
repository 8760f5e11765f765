"""Workers behind a transaction-pooling PgBouncer (SPEC 1.12), on a PgBouncer the test starts.

Through the pooler a LISTEN succeeds and hears nothing. With
DATABASE_DIRECT_URL the worker LISTENs on a direct connection while every
pooled connection goes through PgBouncer: wake-ups arrive, and leadership
moves to a live worker when the leader dies. Without it the worker notices
that its own notification never comes back, says so once with what to set,
and keeps running jobs on its poll.
"""

import signal
import statistics
import time
from pathlib import Path

import pytest

from jobs import insert
from jobs.engine.executor import POLL_INTERVAL_POSTGRES_S
from jobs.engine.maintenance import LEADER_NAME
from models.base import db
from models.jobs import JobLeader, JobWorker
from tests.support.processes import WorkerProcesses, wait_for

pytestmark = pytest.mark.processes(seconds=15)

DEAF_WARNING = "wake-ups are not arriving"
PROBES = 7
IDLE_BEFORE_PROBE_S = 0.3


@pytest.fixture
def pooled_workers(pg_database, pg_url, pgbouncer, tmp_path):
    """Worker processes whose DATABASE_URL is the test database through PgBouncer; models.db too."""
    pooled = pgbouncer.pooled(pg_url)
    database = pg_database.__class__(pooled, max_connections=4)
    db.initialize(database)
    processes = WorkerProcesses(pooled, tmp_path)
    yield processes
    processes.stop_all()
    print(processes.logs())
    print(pgbouncer.log())
    database.close_all()


def started_at(job_id):
    row = db.execute_sql("SELECT started_at FROM test_executions WHERE job_id = %s", [job_id]).fetchone()
    db.close()
    return row and row[0]


def idle_pickup_delays(count):
    """Seconds from each insert (into an idle queue, one at a time) to the start of its run."""
    delays = []
    for n in range(count):
        time.sleep(IDLE_BEFORE_PROBE_S)
        inserted = time.time()
        job_id = insert("t_record", {"n": n}).job_id
        db.close()
        delays.append(wait_for(lambda: started_at(job_id), timeout=10, interval=0.01, message=f"job {n}") - inserted)
    return delays


def leader_pid():
    leader = JobLeader.get_or_none(JobLeader.name == LEADER_NAME)
    db.close()
    return int(leader.leader_id.split(":")[1]) if leader else None


def live_workers():
    return {worker.pid for worker in JobWorker.select()}


def log_of(process):
    return Path(process.log_path).read_text()


def test_behind_the_pooler_with_a_direct_listen_wake_ups_arrive_and_a_dead_leader_is_replaced(
    pooled_workers, pg_url, pgbouncer
):
    direct = {"DATABASE_DIRECT_URL": pg_url}
    first, second = (pooled_workers.start("--fast-takeover", env=direct) for _ in range(2))
    wait_for(lambda: live_workers() >= {first.pid, second.pid}, timeout=20, message="both workers heartbeating")
    old_leader = wait_for(leader_pid, timeout=10, message="a leader")

    before = idle_pickup_delays(PROBES)
    # A wake-up, not the poll (a 1 s poll would put the median near half a second).
    assert statistics.median(before) < POLL_INTERVAL_POSTGRES_S / 5, before

    leader = first if old_leader == first.pid else second
    survivor = second if leader is first else first
    leader.send_signal(signal.SIGKILL)
    leader.wait()
    wait_for(lambda: leader_pid() == survivor.pid, timeout=15, message="the surviving worker to lead")

    after = idle_pickup_delays(3)
    print(f"idle pickup through the pooler, direct LISTEN: before {before}, after the failover {after}")
    assert statistics.median(after) < POLL_INTERVAL_POSTGRES_S / 5, after
    assert DEAF_WARNING not in log_of(survivor)
    assert pgbouncer.transactions(pg_url) > 0


def test_behind_the_pooler_without_a_direct_listen_the_worker_warns_once_and_runs_jobs_on_its_poll(pooled_workers):
    worker = pooled_workers.start("--fast-listen-check")
    wait_for(lambda: DEAF_WARNING in log_of(worker), timeout=20, message="the warning")
    # Several more checks (one every 3 s) go unanswered: still the one warning.
    delays = idle_pickup_delays(4)
    time.sleep(max(0.0, 7 - sum(delays) - 4 * IDLE_BEFORE_PROBE_S))

    print(f"idle pickup through the pooler on the poll: {delays}")
    assert log_of(worker).count(DEAF_WARNING) == 1
    assert "DATABASE_DIRECT_URL" in log_of(worker)
    assert max(delays) < POLL_INTERVAL_POSTGRES_S + 1, delays
