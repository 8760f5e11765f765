"""SPEC 11: /metrics in Prometheus' format, right with several processes.

The database-wide series come from the web's /metrics; each worker process
serves its own job counters, and their sum over the processes is the truth."""

import socket

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from jobs import JobInsert, insert_many
from models.base import utcnow
from models.jobs import Job
from ops.records import emit_event
from tests.support.processes import wait_for
from tests.web.conftest import OPERATOR_TOKEN
from tests.web.test_admin_api import assert_problem

AUTH = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}


def samples(text, name):
    """{labels tuple: value} of one metric's samples."""
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                found[tuple(sorted(sample.labels.items()))] = sample.value
    return found


def test_metrics_need_the_operator_token(web):
    assert_problem(requests.get(web + "/metrics", timeout=10), 401, "unauthorized")
    assert_problem(
        requests.get(web + "/metrics", headers={"Authorization": "Bearer nope"}, timeout=10), 401, "unauthorized"
    )


def test_queue_depth_and_pending_outbox_events_come_from_the_database(web):
    insert_many([JobInsert("t_record", {"n": n}) for n in range(3)])
    first = Job.select().order_by(Job.id).first()
    Job.update(state="discarded", finalized_at=utcnow()).where(Job.id == first.id).execute()
    emit_event("order.paid", {"orderId": 1})
    emit_event("order.paid", {"orderId": 2})
    answer = requests.get(web + "/metrics", headers=AUTH, timeout=10)
    assert answer.status_code == 200 and answer.headers["Content-Type"].startswith("text/plain")
    depth = samples(answer.text, "omniflow_queue_jobs")
    queue = Job.select().first().queue
    assert depth[(("queue", queue), ("state", "available"))] == 2
    assert depth[(("queue", queue), ("state", "discarded"))] == 1
    assert samples(answer.text, "omniflow_outbox_pending_events") == {(): 2}


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def scrape(port):
    try:
        return requests.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    except requests.ConnectionError:
        return None


@pytest.mark.processes
def test_job_counters_summed_over_worker_processes_count_every_run_once(database, workers):
    insert_many([JobInsert("t_record", {"n": n}) for n in range(300)])
    ports = [free_port(), free_port()]
    for port in ports:
        workers.start(env={"APP_WORKER_METRICS_PORT": str(port)})
    wait_for(
        lambda: Job.select().where(Job.state == "completed").count() == 300, timeout=120, message="300 completed jobs"
    )
    total, runs = 0, 0
    for port in ports:
        # A worker slow to start may have run nothing yet and still be opening its port.
        text = wait_for(lambda: scrape(port), timeout=30, message=f"metrics on port {port}")
        total += samples(text, "omniflow_jobs_total").get((("kind", "t_record"), ("outcome", "completed")), 0)
        runs += samples(text, "omniflow_job_duration_seconds_count").get((("kind", "t_record"),), 0)
    assert total == 300 and runs == 300
