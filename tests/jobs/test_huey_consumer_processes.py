"""SPEC 1.10 with real processes: `huey_consumer omniflow.huey` (Huey's own console
script) is the production worker. It fulfils paid orders against a (fake) panel,
a SIGTERM in the middle of the burn loses nothing and runs nothing twice, an
option it cannot honour stops it naming the option, and a database it cannot
reach is one line naming the host, never a traceback or the password."""

import os
import socket
import subprocess
import sys

import pytest

from commerce.settlement import settle_order
from fakes.remnawave import FakeRemnawave, api_token
from models.fulfillment import Entitlement, FulfillmentHistory, FulfillmentOperation
from models.jobs import Job, JobWorker
from tests.support import commerce
from tests.support.processes import HUEY_CONSUMER, ROOT, wait_for

pytestmark = pytest.mark.processes

PANEL_TOKEN = api_token("consumer-test")
ORDERS = 300
PANEL_LATENCY_MS = 150  # a burn of several seconds, so the SIGTERM lands in the middle of it


@pytest.fixture
def panel():
    server = FakeRemnawave(token=PANEL_TOKEN, latency_ms=PANEL_LATENCY_MS)
    server.start()
    yield server
    server.stop()


def panel_env(panel):
    return {"APP_REMNAWAVE_URL": panel.base_url, "APP_REMNAWAVE_TOKEN": PANEL_TOKEN}


def jobs_in(*states):
    return Job.select().where(Job.kind == "fulfillment", Job.state.in_(states)).count()


def test_huey_consumer_fulfils_orders_and_a_sigterm_mid_burn_loses_none_and_runs_none_twice(database, workers, panel):
    plan = commerce.limited_plan()
    for _ in range(ORDERS):
        settle_order(commerce.order(commerce.customer(), plan).id, "provider_webhook")

    first = workers.start_huey_consumer(env=panel_env(panel))
    wait_for(lambda: jobs_in("completed") >= ORDERS // 5, timeout=60, interval=0.1, message="the burn to start")
    first.terminate()  # SIGTERM
    assert first.wait(40) == 0
    done_before_restart = jobs_in("completed")
    assert done_before_restart < ORDERS, "the burn ended before the SIGTERM; nothing was tested"
    assert jobs_in("running") == 0, "a job was left running by a graceful stop"
    assert jobs_in("completed", "available", "scheduled") == ORDERS  # finished or handed back, none lost
    assert JobWorker.select().count() == 0

    workers.start_huey_consumer(env=panel_env(panel))
    wait_for(lambda: jobs_in("completed") == ORDERS, timeout=120, interval=0.5, message="every order fulfilled")

    assert Entitlement.select().where(Entitlement.status == "active").count() == ORDERS
    creates = panel.stats()["creates_applied"]
    assert len(creates) == ORDERS and set(creates.values()) == {1}, "a user was created twice"
    assert {op.attempt_count for op in FulfillmentOperation.select()} == {1}, "an operation ran twice"
    assert FulfillmentHistory.select().count() == ORDERS
    assert {job.attempt for job in Job.select().where(Job.kind == "fulfillment")} == {1}

    log = workers.logs()
    assert "worker started" in log and "INFO:huey" not in log  # the worker's own redacted log lines only
    assert PANEL_TOKEN not in log


@pytest.mark.parametrize(
    "options, flag",
    [(["-w", "4"], "-w/--workers"), (["-w", "1"], "-w/--workers"), (["-k", "process"], "-k/--worker-type")],
)
def test_huey_consumer_refuses_an_option_it_cannot_honour_naming_it(options, flag):
    finished = subprocess.run(
        [HUEY_CONSUMER, "omniflow.huey", *options], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert finished.returncode != 0
    lines = finished.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"worker: {flag} is not supported"), finished.stderr


def closed_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.parametrize(
    "command",
    [[HUEY_CONSUMER, "omniflow.huey"], [sys.executable, "omniflow.py", "worker"]],
    ids=["huey_consumer", "omniflow.py worker"],
)
def test_a_worker_whose_database_is_unreachable_says_so_in_one_line_naming_the_host(command):
    port = closed_port()
    password = "never-print-this-pw"
    env = dict(os.environ, DATABASE_URL=f"postgresql://omniflow:{password}@127.0.0.1:{port}/omniflow")
    finished = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert finished.returncode == 2
    lines = finished.stderr.strip().splitlines()
    assert len(lines) == 1, finished.stderr
    assert f"127.0.0.1:{port}" in lines[0] and "cannot connect to the database" in lines[0]
    assert password not in finished.stderr + finished.stdout


def test_a_worker_whose_direct_database_url_is_unreachable_says_so_in_one_line_naming_it(pg_url):
    port = closed_port()
    password = "never-print-this-pw"
    env = dict(
        os.environ, DATABASE_URL=pg_url, DATABASE_DIRECT_URL=f"postgresql://omniflow:{password}@127.0.0.1:{port}/x"
    )
    finished = subprocess.run(
        [sys.executable, "omniflow.py", "worker"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert finished.returncode == 2
    lines = finished.stderr.strip().splitlines()
    assert len(lines) == 1, finished.stderr
    assert f"127.0.0.1:{port}" in lines[0] and "cannot connect to DATABASE_DIRECT_URL" in lines[0]
    assert password not in finished.stderr + finished.stdout
