"""SPEC 1.11: a job a worker cannot run because of its own version or configuration (a kind it
has not declared, a periodic pass it does not register) did not fail: the worker does not
claim it, the row waits at attempt 0 for a worker that runs it, and work that no running
worker declares for 10 minutes raises one operator notice."""

import datetime
import json
import time
from types import SimpleNamespace

import pytest

import omniflow
from bot import texts
from jobs import huey, insert
from jobs.engine.executor import job_sql
from jobs.engine.kinds import PERIODIC_KIND, DeclaredWork
from jobs.engine.maintenance import UNDECLARED_AFTER_S, Maintenance
from models.base import db, utcnow
from models.jobs import Job, JobWorker
from models.ops import OperatorNotice
from tests.support import newer_kinds  # noqa: F401  (so this process can insert what a newer web would)
from tests.support.processes import wait_for

OLDER_WORKER_WAITS_S = 15


def ran(tag):
    cursor = db.execute_sql(f"SELECT job_id, attempt FROM test_executions WHERE tag = {db.obj.param}", [tag])
    return cursor.fetchall()


@pytest.mark.processes
def test_rows_a_worker_cannot_run_wait_unspent_for_a_worker_that_declares_them(database, workers):
    newer = insert("t_newer", {"n": 1}).job_id
    unregistered_pass = insert(PERIODIC_KIND, {"task": "t_tick"}).job_id
    older = workers.start()  # neither t_newer nor the t_tick pass declared
    started = time.time()
    known = insert("t_record", {"n": 1}).job_id
    wait_for(lambda: Job.get_by_id(known).state == "completed", timeout=30, message="the worker to run its own kind")
    [row] = JobWorker.select()
    assert "t_record" in json.loads(row.kinds) and "t_newer" not in json.loads(row.kinds)
    assert "t_tick" not in json.loads(row.passes)
    time.sleep(max(0.0, OLDER_WORKER_WAITS_S - (time.time() - started)))

    assert older.poll() is None
    for job_id in (newer, unregistered_pass):
        job = Job.get_by_id(job_id)
        assert (job.state, job.attempt, job.attempted_by, job.error_list) == ("available", 0, None, [])
    assert ran("newer-1") == [] and ran("tick") == []

    workers.start("--newer-kinds", "--periodic")
    for job_id in (newer, unregistered_pass):
        wait_for(lambda: Job.get_by_id(job_id).state == "completed", timeout=60, message=f"job {job_id} to run")
        assert Job.get_by_id(job_id).attempt == 1
    assert ran("newer-1") == [(newer, 1)]
    assert (unregistered_pass, 1) in ran("tick")


def leader():
    return Maintenance(huey, SimpleNamespace(worker_id="worker-a", runner=huey.runner), register=lambda: None)


def waited(job_ids, seconds):
    Job.update(scheduled_at=utcnow() - datetime.timedelta(seconds=seconds)).where(Job.id.in_(job_ids)).execute()


def notices():
    rows = OperatorNotice.select().where(OperatorNotice.kind == omniflow.NOTICE_UNDECLARED_WORK)
    return sorted((json.loads(row.payload)["work"], json.loads(row.payload)["jobId"]) for row in rows)


def test_work_no_running_worker_declares_for_ten_minutes_raises_one_operator_notice(database):
    sql = job_sql()
    sql.register_worker("older", "host", 1, "critical:16", DeclaredWork(("t_record",), ("t_other",)), utcnow())
    newer = [insert("t_newer", {"n": n}).job_id for n in range(2)]
    unregistered_pass = insert(PERIODIC_KIND, {"task": "t_tick"}).job_id
    known = insert("t_record", {"n": 1}).job_id
    waiting = [*newer, unregistered_pass, known]

    waited(waiting, UNDECLARED_AFTER_S - 60)
    leader().report_undeclared()
    assert notices() == []

    waited(waiting, UNDECLARED_AFTER_S + 60)
    leader().report_undeclared()
    leader().report_undeclared()
    assert notices() == [("job kind t_newer", newer[0]), ("periodic pass t_tick", unregistered_pass)]
    sentence = texts.notice_text(omniflow.NOTICE_UNDECLARED_WORK, {"work": "job kind t_newer", "jobId": newer[0]})
    assert sentence.startswith(f"Jobs of job kind t_newer (the oldest: job {newer[0]}) have waited over 10 minutes")

    # A worker of the newer release arrives: its kind is declared again, and nothing more is raised.
    OperatorNotice.delete().execute()
    sql.register_worker("newer", "host", 2, "critical:16", DeclaredWork(("t_newer",), ("t_tick",)), utcnow())
    leader().report_undeclared()
    assert notices() == []
