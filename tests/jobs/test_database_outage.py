"""SPEC 1 (issue 9, 5a), the engine in this process: a late outcome never
touches a later attempt of the same job."""

from jobs import insert
from jobs.engine.executor import ClaimedJob, Outcome, job_sql, write_outcomes
from jobs.engine.states import COMPLETED, RETRYABLE
from models.base import utcnow
from models.jobs import Job


def claim(worker_id, queue="critical"):
    sql = job_sql()
    (row,) = sql.claim(queue, 1, worker_id, utcnow())
    return ClaimedJob.from_row(row, worker_id, sql)


def test_a_late_outcome_of_an_earlier_attempt_changes_nothing_once_the_same_worker_runs_the_job_again(database):
    job_id = insert("t_record", {"n": 1}).job_id
    first = claim("worker-a")
    failed = Outcome(RETRYABLE, "retryable", scheduled_at=utcnow(), errors=[{"attempt": 1, "error": "boom"}])
    write_outcomes(job_sql(), [(first, failed)])
    second = claim("worker-a")
    assert second.attempt == 2

    # The first attempt's outcomes once more: a batch written again after its
    # COMMIT's answer was lost, or held through an outage.
    write_outcomes(job_sql(), [(first, failed)])
    write_outcomes(job_sql(), [(first, Outcome(COMPLETED, "completed"))])
    row = Job.get_by_id(job_id)
    assert (row.state, row.attempt, row.attempted_by) == ("running", 2, "worker-a")

    write_outcomes(job_sql(), [(second, Outcome(COMPLETED, "completed"))])
    assert Job.get_by_id(job_id).state == "completed"
