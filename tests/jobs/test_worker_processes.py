"""SPEC 1.7, 1.9 with real worker processes: jobs shared by several workers run
exactly once, a killed worker's job is rescued, a live worker's long job is
not, and SIGTERM/SIGINT finish or hand back running jobs."""

import signal
import time

import pytest

from jobs import JobInsert, insert, insert_many
from models.base import db
from models.jobs import Job, JobWorker
from tests.support.processes import wait_for

pytestmark = pytest.mark.processes


def executions(tag=None):
    sql = "SELECT job_id, attempt, pid, started_at, finished_at FROM test_executions"
    params = []
    if tag is not None:
        sql += " WHERE tag = " + db.obj.param
        params.append(tag)
    return db.execute_sql(sql + " ORDER BY id", params).fetchall()


def count_in_state(state):
    return Job.select().where(Job.state == state).count()


def test_two_thousand_jobs_on_three_worker_processes_run_exactly_once(database, workers):
    insert_many([JobInsert("t_record", {"n": n}) for n in range(2000)])
    for _ in range(3):
        workers.start()
    wait_for(lambda: count_in_state("completed") == 2000, timeout=180, message="2000 completed jobs")
    rows = executions()
    assert len(rows) == 2000, "a job ran twice or not at all"
    assert len({job_id for job_id, *_ in rows}) == 2000
    retried = [job.error_list for job in Job.select().where(Job.attempt > 1).limit(3)]
    assert all(attempt == 1 for _, attempt, *_ in rows), f"jobs ran again after: {retried}"
    assert len({pid for _, _, pid, *_ in rows}) >= 2, "the jobs were not shared between processes"
    assert Job.select().where(Job.state != "completed").count() == 0


def worker_pid(job_id):
    attempted_by = Job.get_by_id(job_id).attempted_by
    return int(attempted_by.split(":")[1])


@pytest.mark.processes(seconds=55)
def test_killed_worker_job_is_rescued_and_live_worker_long_job_is_not(database, workers):
    first = workers.start()
    victim = insert("t_sleep", {"seconds": 8, "tag": "victim"}).job_id
    wait_for(lambda: executions("victim"), timeout=30, message="victim job to start")
    assert worker_pid(victim) == first.pid
    workers.start()
    wait_for(lambda: JobWorker.select().count() == 2, timeout=30, message="second worker to register")

    first.send_signal(signal.SIGKILL)
    killed_at = time.time()
    long_job = insert("t_sleep", {"seconds": 50, "tag": "long"}).job_id

    wait_for(lambda: Job.get_by_id(victim).state == "completed", timeout=75, interval=0.5, message="rescued victim")
    rescued_in = time.time() - killed_at
    assert rescued_in < 60, f"rescue plus re-run took {rescued_in:.0f}s"
    row = Job.get_by_id(victim)
    assert row.attempt == 2
    assert "rescued" in row.error_list[-1]["error"]
    assert [pid for _, _, pid, _, finished in executions("victim") if finished] != [first.pid]

    # The long job ran on the surviving worker through several rescue passes
    # (its 50 s are longer than the 30 s after which a silent worker counts
    # as dead): it must finish on its first and only attempt.
    wait_for(lambda: Job.get_by_id(long_job).state == "completed", timeout=90, interval=0.5, message="long job")
    row = Job.get_by_id(long_job)
    assert row.attempt == 1 and row.error_list == []
    assert len(executions("long")) == 1


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signal_lets_the_running_job_finish_before_the_worker_exits(database, workers, signum):
    worker = workers.start()
    job_id = insert("t_sleep", {"seconds": 3, "tag": "graceful"}).job_id
    wait_for(lambda: executions("graceful"), timeout=30, message="job to start")
    worker.send_signal(signum)
    assert worker.wait(30) == 0
    row = Job.get_by_id(job_id)
    assert row.state == "completed"
    assert executions("graceful")[0][4] is not None  # it finished
    assert JobWorker.select().count() == 0  # the worker deregistered


@pytest.mark.processes(seconds=30)
def test_job_still_running_at_shutdown_timeout_is_handed_back_and_completes_later(database, workers):
    worker = workers.start("--shutdown-timeout", "1")
    job_id = insert("t_sleep", {"seconds": 15, "tag": "interrupted"}).job_id
    queued = insert("t_record", {"n": 1}, scheduled_at=None).job_id
    wait_for(lambda: executions("interrupted"), timeout=30, message="job to start")
    wait_for(lambda: Job.get_by_id(queued).state == "completed", timeout=30, message="other job")
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(30) == 0
    row = Job.get_by_id(job_id)
    assert row.state == "scheduled" and row.attempt == 0, "the interrupted job must be handed back, attempt refunded"

    workers.start()
    wait_for(lambda: Job.get_by_id(job_id).state == "completed", timeout=60, interval=0.5, message="handed-back job")
    assert Job.get_by_id(job_id).attempt == 1
