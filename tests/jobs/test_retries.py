"""SPEC 1.6: retry with growing backoff until max attempts, then discarded;
snooze without spending an attempt; self-cancel; errors stored redacted."""

import datetime
import logging

from config.logging import RedactingFormatter
from jobs import client, huey, insert
from jobs.engine.executor import ClaimedJob, job_sql
from jobs.engine.kinds import DeclaredWork, river_backoff
from models.base import utcnow
from models.jobs import Job
from security.redactor import register_secret
from tests.support.direct import make_due, run_next


def test_failing_job_is_retryable_with_growing_backoff_then_discarded(database):
    job_id = insert("t_fail", {}).job_id
    delays = []
    for attempt in (1, 2):
        before = utcnow()
        assert run_next() == job_id
        row = Job.get_by_id(job_id)
        assert row.state == "retryable"
        assert row.attempt == attempt
        delays.append((row.scheduled_at - before).total_seconds())
        make_due(job_id)
    assert delays[1] > delays[0] > 0
    assert run_next() == job_id
    row = Job.get_by_id(job_id)
    assert row.state == "discarded"
    assert row.attempt == row.max_attempts == 3
    assert row.finalized_at is not None
    assert [e["attempt"] for e in row.error_list] == [1, 2, 3]
    assert job_id in [job.id for job in client.dead_letter()]


def test_default_backoff_grows_with_each_attempt():
    medians = [sorted(river_backoff(attempt) for _ in range(51))[25] for attempt in range(1, 6)]
    assert medians == sorted(medians) and len(set(medians)) == 5


def test_snooze_runs_again_later_and_keeps_the_attempt_count(database):
    job_id = insert("t_snooze", {"seconds": 120}).job_id
    for _ in range(5):  # more snoozes than max_attempts (2): none of them counts
        assert run_next() == job_id
        row = Job.get_by_id(job_id)
        assert row.state == "scheduled"
        assert row.attempt == 0
        assert row.scheduled_at > utcnow() + datetime.timedelta(seconds=100)
        assert run_next() is None  # not due yet
        make_due(job_id)


def test_job_can_cancel_itself_and_is_never_retried(database):
    job_id = insert("t_cancel", {"reason": "order was refunded"}).job_id
    assert run_next() == job_id
    row = Job.get_by_id(job_id)
    assert row.state == "cancelled"
    assert row.finalized_at is not None
    assert row.error_list[-1]["error"] == "order was refunded"
    make_due(job_id)
    assert run_next() is None


def test_errors_stored_on_the_row_pass_through_the_redactor(database):
    register_secret("sk_live_0123456789abcdef")
    message = (
        "panel said no: Authorization: Bearer sk_live_0123456789abcdef "
        "link https://panel.example.com/api/sub/Zx81kd9aQ squad 3f2504e0-4f89-41d3-9a0c-0305e82c3301"
    )
    job_id = insert("t_fail", {"message": message}).job_id
    run_next()
    stored = Job.get_by_id(job_id).errors
    for secret in ("sk_live_0123456789abcdef", "/api/sub/Zx81kd9aQ", "3f2504e0-4f89-41d3-9a0c-0305e82c3301"):
        assert secret not in stored
    assert "RuntimeError" in stored and "panel.example.com" in stored


def test_a_failed_jobs_log_line_names_the_error_class_and_its_redacted_message(database, caplog):
    register_secret("sk_live_0123456789abcdef")
    job_id = insert("t_fail", {"message": "panel refused token sk_live_0123456789abcdef\nsecond line"}).job_id
    with caplog.at_level(logging.WARNING, logger="omniflow.jobs"):
        run_next()
    [record] = [r for r in caplog.records if r.getMessage() == "job retryable" and r.job_id == job_id]
    assert record.error == "RuntimeError: panel refused token [redacted]"
    line = RedactingFormatter().format(record)
    assert "error=RuntimeError: panel refused token [redacted]" in line
    assert "sk_live_0123456789abcdef" not in line


def test_job_of_a_kind_this_worker_has_not_declared_is_left_waiting_never_failed(database):
    from models.base import db

    now = utcnow()
    db.execute_sql(
        "INSERT INTO jobs (kind, queue, state, args, max_attempts, created_at, scheduled_at) VALUES "
        "('retired_kind', 'critical', 'available', '{}', 2, {p}, {p})".replace("{p}", db.obj.param),
        [now, now],
    )
    job_id = Job.select().get().id
    assert run_next() is None
    row = Job.get_by_id(job_id)
    assert (row.state, row.attempt, row.error_list) == ("available", 0, [])

    # Reached anyway (claimed for a declared set the runner's process does not have): it goes
    # back to the queue with its attempt refunded, for a worker that runs it.
    sql = job_sql()
    [claimed] = sql.claim(None, 1, "worker-a", utcnow(), DeclaredWork(("retired_kind",), ()))
    huey.runner.run_claimed(ClaimedJob.from_row(claimed, "worker-a", sql))
    row = Job.get_by_id(job_id)
    assert (row.state, row.attempt, row.error_list) == ("scheduled", 0, [])
    assert row.scheduled_at > utcnow()


def test_scheduled_job_waits_for_its_time(database):
    job_id = insert("t_record", {"n": 1}, scheduled_at=utcnow() + datetime.timedelta(hours=1)).job_id
    assert Job.get_by_id(job_id).state == "scheduled"
    assert run_next() is None
    make_due(job_id)
    assert run_next() == job_id
    assert Job.get_by_id(job_id).state == "completed"


def test_higher_priority_runs_first(database):
    low = insert("t_record", {"n": 1}, priority=0).job_id
    high = insert("t_record", {"n": 2}, priority=5).job_id
    assert [run_next(), run_next()] == [high, low]
