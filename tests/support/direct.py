"""Run queued jobs in the test process, one at a time, through Huey's own
dequeue/execute path (the same runner the worker threads use)."""

import datetime

from jobs import huey
from models.base import utcnow
from models.jobs import Job


def run_next(kind=None):
    """Claim and run the next due job (of `kind` if given); return its id, or None when nothing is due."""
    task = huey.dequeue(kind)
    if task is None:
        return None
    huey.execute(task)
    return task.job.id


def run_all(limit=1000):
    ran = []
    while len(ran) < limit:
        job_id = run_next()
        if job_id is None:
            return ran
        ran.append(job_id)
    return ran


def make_due(job_id):
    """Pull a job's scheduled_at into the past (instead of sleeping through a backoff)."""
    Job.update(scheduled_at=utcnow() - datetime.timedelta(seconds=1)).where(Job.id == job_id).execute()


def job(job_id):
    return Job.get_by_id(job_id)


def execution_count(job_id=None):
    from models.base import db

    if job_id is None:
        return db.execute_sql("SELECT COUNT(*) FROM test_executions").fetchone()[0]
    return db.execute_sql("SELECT COUNT(*) FROM test_executions WHERE job_id = " + db.obj.param, [job_id]).fetchone()[0]
