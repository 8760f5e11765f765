"""Job kinds the tests insert and worker processes run.

Each run writes a row to test_executions (job id, attempt, pid, start and
end time), so a test can count how often and where a job really ran.
"""

import os
import time

from jobs import UNIQUE_THROUGH_COMPLETED, UNIQUE_WHILE_ACTIVE, JobCancel, JobSnooze, current_job, huey
from models.base import db


def _sql(statement):
    return statement.replace("?", db.obj.param)


def record_start(tag=""):
    job = current_job()
    db.execute_sql(
        _sql("INSERT INTO test_executions (job_id, attempt, tag, pid, started_at) VALUES (?, ?, ?, ?, ?)"),
        [job.id, job.attempt, tag, os.getpid(), time.time()],
    )


def record_finish(tag=""):
    job = current_job()
    db.execute_sql(
        _sql("UPDATE test_executions SET finished_at = ? WHERE job_id = ? AND attempt = ? AND pid = ?"),
        [time.time(), job.id, job.attempt, os.getpid()],
    )


@huey.job("t_record", queue="critical", max_attempts=12)
def t_record(n, sleep=0.0):
    record_start(str(n))
    if sleep:
        time.sleep(sleep)
    record_finish(str(n))


@huey.job("t_unique", queue="critical", max_attempts=12, unique_states=UNIQUE_THROUGH_COMPLETED)
def t_unique(operationId):
    record_start(str(operationId))


@huey.job("t_unique_active", queue="default", max_attempts=1, unique_states=UNIQUE_WHILE_ACTIVE)
def t_unique_active(task):
    record_start(task)


@huey.job("t_fail", queue="critical", max_attempts=3)
def t_fail(message="boom"):
    raise RuntimeError(message)


@huey.job("t_snooze", queue="critical", max_attempts=2)
def t_snooze(seconds=60):
    raise JobSnooze(seconds)


@huey.job("t_cancel", queue="critical", max_attempts=5)
def t_cancel(reason="not needed any more"):
    raise JobCancel(reason)


@huey.job("t_sleep", queue="critical", max_attempts=12)
def t_sleep(seconds, tag=""):
    record_start(tag)
    deadline = time.time() + seconds
    while time.time() < deadline:
        time.sleep(0.1)
    record_finish(tag)


@huey.job("t_cooperative", queue="default", max_attempts=1, timeout=1)
def t_cooperative(seconds):
    record_start("cooperative")
    deadline = time.time() + seconds
    job = current_job()
    while time.time() < deadline:
        job.raise_if_stopped()
        time.sleep(0.05)
    record_finish("cooperative")
