"""River's rules for changing a job by id: cancel any non-final job, retry any
job that is not running; anything else is rejected (an API answers 422)."""

import pytest

from jobs import JobMutationRejected, JobNotFound, client, insert
from models.base import utcnow
from models.jobs import Job

STATES = ["available", "scheduled", "running", "retryable", "completed", "discarded", "cancelled"]


def job_in_state(state):
    job_id = insert("t_record", {"n": 1}).job_id
    final = state in ("completed", "discarded", "cancelled")
    Job.update(state=state, finalized_at=utcnow() if final else None, attempt=1).where(Job.id == job_id).execute()
    return job_id


@pytest.mark.parametrize("state", STATES)
def test_cancel_is_allowed_only_before_a_job_finished(database, state):
    job_id = job_in_state(state)
    if state in ("completed", "discarded", "cancelled"):
        with pytest.raises(JobMutationRejected) as rejected:
            client.cancel(job_id)
        assert rejected.value.code == "job_mutation_rejected"
        assert Job.get_by_id(job_id).state == state
    else:
        view = client.cancel(job_id, reason="operator: customer asked")
        assert view.state == "cancelled"
        assert view.last_error == "operator: customer asked"


@pytest.mark.parametrize("state", STATES)
def test_retry_is_allowed_in_every_state_but_running(database, state):
    job_id = job_in_state(state)
    if state == "running":
        with pytest.raises(JobMutationRejected):
            client.retry(job_id)
        assert Job.get_by_id(job_id).state == "running"
    else:
        view = client.retry(job_id)
        assert view.state == "available"
        assert view.finalized_at is None
        assert view.scheduled_at <= utcnow()


def test_retry_of_an_exhausted_job_gives_it_one_more_attempt(database):
    job_id = insert("t_fail", {}).job_id
    Job.update(state="discarded", attempt=3, finalized_at=utcnow()).where(Job.id == job_id).execute()
    view = client.retry(job_id)
    assert view.max_attempts == 4


def test_unknown_job_id_is_not_found(database):
    with pytest.raises(JobNotFound):
        client.retry(12345)
    with pytest.raises(JobNotFound):
        client.cancel(12345)
