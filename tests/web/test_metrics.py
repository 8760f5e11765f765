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
from tests.web.conftest import OPERATOR_TOKEN, serving
from tests.web.test_admin_api import assert_problem

METRICS_TOKEN = "metrics-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {METRICS_TOKEN}"}


def samples(text, name):
    """{labels tuple: value} of one metric's samples."""
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                found[tuple(sorted(sample.labels.items()))] = sample.value
    return found


@pytest.fixture
def web(database):
    with serving({"APP_METRICS_TOKEN": METRICS_TOKEN}) as base:
        yield base


def test_metrics_open_to_the_metrics_token_only_and_it_opens_nothing_else(web):
    for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": f"Bearer {OPERATOR_TOKEN}"}):
        assert_problem(requests.get(web + "/metrics", headers=headers, timeout=10), 401, "unauthorized")
    for scheme in ("Bearer", "bearer", "BEARER"):
        headers = {"Authorization": f"{scheme} {METRICS_TOKEN}"}
        assert requests.get(web + "/metrics", headers=headers, timeout=10).status_code == 200
    assert_problem(requests.get(web + "/v1/admin/jobs", headers=AUTH, timeout=10), 401, "unauthorized")


def test_without_a_metrics_token_metrics_are_closed(database):
    with serving() as base:
        headers = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
        assert_problem(requests.get(base + "/metrics", headers=headers, timeout=10), 401, "unauthorized")


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


def scrape(port, headers=None, host="127.0.0.1"):
    try:
        return requests.get(f"http://{host}:{port}/metrics", headers=headers, timeout=10)
    except requests.ConnectionError:
        return None


def this_hosts_outer_address():
    """The address this host reaches others from (no packet is sent), if it has one besides loopback."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.254", 9))
        except OSError:
            return None
        address = probe.getsockname()[0]
    return None if address.startswith("127.") else address


@pytest.mark.processes
def test_job_counters_summed_over_worker_processes_count_every_run_once(database, workers):
    insert_many([JobInsert("t_record", {"n": n}) for n in range(300)])
    local, shared = free_port(), free_port()
    workers.start(env={"APP_WORKER_METRICS_PORT": str(local)})
    workers.start(
        env={
            "APP_WORKER_METRICS_PORT": str(shared),
            "APP_WORKER_METRICS_ADDRESS": "0.0.0.0",
            "APP_METRICS_TOKEN": METRICS_TOKEN,
        }
    )
    wait_for(
        lambda: Job.select().where(Job.state == "completed").count() == 300, timeout=120, message="300 completed jobs"
    )
    total, runs = 0, 0
    for port, headers in ((local, None), (shared, AUTH)):
        # A worker slow to start may have run nothing yet and still be opening its port.
        text = wait_for(lambda: scrape(port, headers), timeout=30, message=f"metrics on port {port}").text
        total += samples(text, "omniflow_jobs_total").get((("kind", "t_record"), ("outcome", "completed")), 0)
        runs += samples(text, "omniflow_job_duration_seconds_count").get((("kind", "t_record"),), 0)
    assert total == 300 and runs == 300

    # By default a worker's metrics are this host's only; served wider, they ask for the metrics token.
    outer = this_hosts_outer_address()
    if outer is not None:
        assert scrape(local, host=outer) is None
        assert scrape(shared, AUTH, host=outer).status_code == 200
    for headers in (None, {"Authorization": f"Bearer {OPERATOR_TOKEN}"}):
        assert scrape(shared, headers).status_code == 401
