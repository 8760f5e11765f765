"""SPEC 1 (issue 9, 5a) with real worker processes and a PostgreSQL server of
the test's own: a server restart in the middle of a burn is ridden out by the
running workers (every job completes once, no worker restarts, a short log),
and a server that stays down past the bound makes a worker exit non-zero."""

import time
from pathlib import Path

import pytest

from jobs import JobInsert, insert, insert_many
from jobs.engine.outage import EXIT_DATABASE_UNREACHABLE, OUTAGE_LIMIT_ENV
from models.base import db
from models.jobs import Job, JobWorker
from tests.support import backends, pgcluster
from tests.support.processes import WorkerProcesses, wait_for

pytestmark = pytest.mark.processes

JOBS = 1000
OUTAGE_S = 8
MAX_LOG_LINES = 300
SHORT_BOUND_S = 4


@pytest.fixture
def own_server():
    bin_dir = pgcluster.server_binaries()
    if bin_dir is None:
        pytest.skip(f"no PostgreSQL server binaries (initdb, pg_ctl) under {pgcluster.BIN_GLOB}")
    cluster = pgcluster.OwnCluster(bin_dir)
    try:
        cluster.start()
        url = cluster.create_database()
        backends.prepare(url, postgres=True)
        yield cluster
    finally:
        forget_test_connections()
        cluster.remove()


@pytest.fixture
def own_workers(own_server, tmp_path):
    processes = WorkerProcesses(own_server.url(), tmp_path)
    yield processes
    processes.stop_all()
    print(processes.logs())


def forget_test_connections():
    # The test's own connections are not under test: drop them before the
    # server goes away so the test reads through fresh ones afterwards.
    if not db.is_closed():
        db.close()
    db.obj.close_all()


def completed():
    return Job.select().where(Job.state == "completed").count()


def log_lines(process):
    return Path(process.log_path).read_text().splitlines()


def test_postgres_restart_mid_burn_is_ridden_out_by_two_workers_every_job_once(own_server, own_workers):
    insert_many([JobInsert("t_record", {"n": n, "sleep": 0.05}) for n in range(JOBS)])
    workers = [own_workers.start(), own_workers.start()]
    # Both workers must be past their start-up (a worker that cannot reach the
    # database while it starts exits at once, by design) before the outage.
    wait_for(lambda: JobWorker.select().count() == 2, timeout=60, interval=0.05, message="both workers registered")
    wait_for(lambda: completed() >= 100, timeout=60, interval=0.05, message="the burn to be under way")
    forget_test_connections()
    own_server.stop()
    time.sleep(OUTAGE_S)
    own_server.start()
    restarted_at = time.time()

    wait_for(lambda: completed() == JOBS, timeout=60, interval=0.5, message=f"{JOBS} completed jobs after the restart")
    assert [process.poll() for process in workers] == [None, None], "a worker exited"
    assert Job.select().where(Job.state != "completed").count() == 0
    finished = db.execute_sql(
        "SELECT job_id, COUNT(*) FROM test_executions WHERE finished_at IS NOT NULL GROUP BY job_id"
    ).fetchall()
    assert len(finished) == JOBS and all(count == 1 for _, count in finished), "a job ran to the end twice"
    after_restart = db.execute_sql(
        "SELECT DISTINCT pid FROM test_executions WHERE started_at > %s", [restarted_at]
    ).fetchall()
    assert {pid for (pid,) in after_restart} == {process.pid for process in workers}, "a worker never recovered"
    for process in workers:
        assert len(log_lines(process)) < MAX_LOG_LINES, f"{process.log_path}: the outage flooded the log"


def test_worker_exits_non_zero_with_one_line_when_the_database_stays_down_past_the_bound(own_server, own_workers):
    worker = own_workers.start(env={OUTAGE_LIMIT_ENV: str(SHORT_BOUND_S)})
    wait_for(lambda: JobWorker.select().count() == 1, timeout=30, message="the worker to register")
    long_job = insert("t_sleep", {"seconds": 120, "tag": "long"}).job_id
    wait_for(lambda: Job.get_by_id(long_job).state == "running", timeout=30, message="the long job to start")
    forget_test_connections()
    own_server.stop()
    stopped_at = time.time()

    wait_for(lambda: worker.poll() is not None, timeout=SHORT_BOUND_S + 20, message="the worker to give up")
    assert worker.returncode == EXIT_DATABASE_UNREACHABLE
    assert time.time() - stopped_at >= SHORT_BOUND_S
    lines = log_lines(worker)
    said = [line for line in lines if "database unreachable" in line]
    assert len(said) == 1 and f"127.0.0.1:{own_server.port}" in said[0], said
    assert len(lines) < 60, "the outage flooded the log"

    # Nothing was handed back on the way out: the job stays the dead worker's, for rescue.
    own_server.start()
    row = Job.get_by_id(long_job)
    assert row.state == "running" and f":{worker.pid}:" in row.attempted_by
