"""The consumer in this process: cooperative cancellation of runs that
outlive their timeout or are cancelled by an operator, a pass past its
timeout keeping its unique key until it has returned, and the job metrics."""

import signal
import time

import pytest
from prometheus_client import REGISTRY

from jobs import OmniflowHuey, client, every, huey, insert
from models.base import db
from models.jobs import Job
from tests.support.direct import run_next
from tests.support.kinds import record_finish, record_start
from tests.support.processes import wait_for

SLOW_PASS_S = 3.5
overdue = OmniflowHuey("overdue-pass")


@overdue.periodic_task(every(seconds=1), name="slow_pass", timeout=1)
def slow_pass():
    # One long batch: the pass only looks at should_stop() after it.
    record_start("slow")
    time.sleep(SLOW_PASS_S)
    record_finish("slow")


@pytest.fixture
def run_consumer(database):
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    started = []

    def run(queue_huey):
        running = queue_huey.consumer(concurrency={"critical": 2, "default": 2, "bulk": 0}, shutdown_timeout=5)
        running.start()
        started.append(running)
        return running

    yield run
    for running in started:
        running.stop(graceful=True)
    for signum, handler in handlers.items():
        signal.signal(signum, handler)


@pytest.fixture
def consumer(run_consumer):
    return run_consumer(huey)


def finished_runs(tag):
    return db.execute_sql(
        f"SELECT COUNT(*) FROM test_executions WHERE tag = {db.obj.param} AND finished_at IS NOT NULL", [tag]
    ).fetchone()[0]


def test_run_past_its_timeout_is_cancelled_and_stops_cooperatively(consumer):
    job_id = insert("t_cooperative", {"seconds": 20}).job_id
    wait_for(lambda: Job.get_by_id(job_id).state == "cancelled", timeout=10, message="timeout cancel")
    row = Job.get_by_id(job_id)
    assert "timed out after 1s" in row.error_list[-1]["error"]
    assert finished_runs("cooperative") == 0


def test_operator_cancel_reaches_a_running_job(consumer):
    job_id = insert("t_sleep", {"seconds": 6, "tag": "cancel-me"}).job_id
    wait_for(lambda: Job.get_by_id(job_id).state == "running", timeout=10, message="job running")
    client.cancel(job_id, reason="operator: not needed")
    wait_for(
        lambda: any(run.id == job_id and run.cancelled for run in consumer.executor.runner.in_flight()),
        timeout=5,
        message="the running job to be told to stop",
    )
    assert Job.get_by_id(job_id).state == "cancelled"


def test_jobs_inserted_while_idle_are_picked_up_without_waiting_for_a_poll(consumer):
    job_id = insert("t_record", {"n": 5}).job_id
    wait_for(lambda: Job.get_by_id(job_id).state == "completed", timeout=5, interval=0.05, message="pickup")


def slow_runs():
    return db.execute_sql(
        "SELECT started_at, finished_at FROM test_executions WHERE tag = 'slow' ORDER BY started_at"
    ).fetchall()


def test_a_pass_past_its_timeout_keeps_its_key_until_it_returns_and_never_has_a_twin(run_consumer):
    running = run_consumer(overdue)
    wait_for(
        lambda: any(context.cancelled for context in running.executor.runner.in_flight()),
        timeout=15,
        interval=0.05,
        message="the first run to be asked to stop",
    )
    # Asked to stop but still running: its row holds the key, so the leader's
    # attempts every second (the interval) insert nothing beside it.
    time.sleep(1.1)
    rows = list(Job.select().where(Job.kind == "periodic_task"))
    assert [row.state for row in rows] == ["running"], [(row.id, row.state) for row in rows]

    wait_for(lambda: len([run for run in slow_runs() if run[1]]) >= 2, timeout=20, message="two finished runs")
    runs = slow_runs()
    for (_, finished), (next_started, _) in zip(runs, runs[1:]):
        assert finished is not None and next_started >= finished, f"a run started beside another: {runs}"
    first = Job.get_by_id(min(row.id for row in Job.select().where(Job.kind == "periodic_task")))
    assert first.state == "cancelled" and "timed out after 1s" in first.error_list[-1]["error"]


def sample(name, **labels):
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_job_metrics_count_outcomes_by_kind_and_time_runs(database):
    cases = [
        ("t_record", {"n": 1}, "completed"),
        ("t_fail", {}, "retryable"),
        ("t_snooze", {}, "snoozed"),
        ("t_cancel", {}, "cancelled"),
    ]
    before = {kind: sample("omniflow_jobs_total", kind=kind, outcome=outcome) for kind, _, outcome in cases}
    timed_before = sample("omniflow_job_duration_seconds_count", kind="t_record")
    for kind, args, _ in cases:
        insert(kind, args)
    while run_next() is not None:
        pass
    for kind, _, outcome in cases:
        assert sample("omniflow_jobs_total", kind=kind, outcome=outcome) == before[kind] + 1
    assert sample("omniflow_job_duration_seconds_count", kind="t_record") == timed_before + 1
