"""SPEC 15.2, 5.2 with real worker processes: 500 events reach a receiver that fails
30 % of requests and one that is down for a while, each at least once, in order
per aggregate, validly signed, and get published — while a worker is SIGKILLed
mid-publish and replaced. And the worker's start log says which passes it runs.

The receivers' fault durations are parameters: "down for a minute" is
DOWN_SECONDS here, and the retry base is 100 ms instead of 10 s
(APP_OUTBOX_RETRY_BASE_MS), so the run takes seconds of backoff, not hours.
"""

import signal
from pathlib import Path

import pytest

from fakes.webhook_receiver import FakeWebhookReceiver
from models.jobs import Job
from models.ops import OutboxEvent
from ops import outbox
from ops.records import emit_event
from tests.conftest import TEST_DATA_KEY
from tests.support.processes import wait_for
from web.metrics import DatabaseCollector

pytestmark = pytest.mark.processes(seconds=50)

EVENTS = 500
AGGREGATES = 100
DOWN_SECONDS = 10
# The receivers listen on 127.0.0.1.
WORKER_ENV = {
    "APP_DATA_ENCRYPTION_KEY": TEST_DATA_KEY,
    "APP_OUTBOX_RETRY_BASE_MS": "100",
    "APP_OUTBOX_ALLOW_PRIVATE_DESTINATIONS": "true",
}


def gauge():
    metric = next(m for m in DatabaseCollector().collect() if m.name == "omniflow_outbox_pending_events")
    return metric.samples[0].value


def arrived_out_of_order(receiver, aggregate_of, events_of):
    """Accepted requests that came before an earlier event of their aggregate had arrived."""
    seen, wrong = set(), []
    for item in receiver.accepted():
        event_id = int(item.webhook_id)
        earlier = [e for e in events_of[aggregate_of[event_id]] if e < event_id]
        if not seen.issuperset(earlier):
            wrong.append(event_id)
        seen.add(event_id)
    return wrong


def start_log(workers):
    return "".join(Path(process.log_path).read_text() for process in workers.processes)


def registered_passes(log):
    """The task names of the worker's "periodic passes registered" line (every process logs one)."""
    names = set()
    for line in log.splitlines():
        if "periodic passes registered task=" in line:
            names |= set(line.split("task=", 1)[1].split()[0].split(","))
    assert names, "no worker logged its periodic passes"
    return names


def running_outbox_jobs_by_pid():
    pids = {}
    for job in Job.select().where(Job.kind == "outbox_delivery", Job.state == "running"):
        pid = int(job.attempted_by.split(":")[1])
        pids[pid] = pids.get(pid, 0) + 1
    return pids


@pytest.fixture
def receivers():
    flaky = FakeWebhookReceiver(outbox.generate_secret(), seed=11).start()
    down = FakeWebhookReceiver(outbox.generate_secret(), seed=12).start()
    outbox.allow_private_destinations(True)
    yield flaky, down
    outbox.allow_private_destinations(None)
    flaky.stop()
    down.stop()


@pytest.mark.parametrize("down_seconds", [DOWN_SECONDS])
def test_500_events_reach_a_flaky_and_a_down_receiver_in_order_signed_and_published_through_a_killed_worker(
    database, workers, data_key, receivers, down_seconds
):
    flaky, down = receivers
    flaky.set_faults(fail_rate=0.3)
    for receiver in receivers:
        outbox.add_destination(receiver.url, "*", receiver.secret, "test", "a receiver")
    aggregate_of, events_of = {}, {}
    for n in range(EVENTS):
        aggregate = f"customer:{n % AGGREGATES}"
        event_id = emit_event("order.paid", {"n": n}, aggregate=aggregate).id
        aggregate_of[event_id] = aggregate
        events_of.setdefault(aggregate, []).append(event_id)
    assert gauge() == EVENTS
    # Down from before the first delivery until `down_seconds` after it first refused one,
    # however long the workers take to start on a busy machine.
    down.down_for(240)

    started = [workers.start("--app-kinds", env=WORKER_ENV) for _ in range(2)]
    wait_for(lambda: down.stats()["refused"] > 0, timeout=60, interval=0.05, message="the down receiver refusing")
    down.down_for(down_seconds)
    wait_for(lambda: flaky.stats()["distinct"] >= EVENTS // 4, timeout=60, message="a quarter delivered")
    busy = wait_for(running_outbox_jobs_by_pid, timeout=30, interval=0.05, message="deliveries in flight")
    victim = next(p for p in started if p.pid == max(busy, key=busy.get))
    victim.send_signal(signal.SIGKILL)
    victim.wait(10)
    workers.start("--app-kinds", env=WORKER_ENV)

    wait_for(
        lambda: OutboxEvent.select().where(OutboxEvent.published_at.is_null()).count() == 0,
        timeout=240,
        interval=0.5,
        message="every event published",
    )
    every_event = set(aggregate_of)
    for receiver in receivers:
        assert {int(item.webhook_id) for item in receiver.accepted()} == every_event
        assert arrived_out_of_order(receiver, aggregate_of, events_of) == []
        assert receiver.stats()["invalid_signatures"] == 0
    assert flaky.stats()["failed"] > 0 and down.stats()["refused"] > 0  # the faults happened
    rescued = [
        job.id
        for job in Job.select().where(Job.kind == "outbox_delivery")
        if any("rescued" in error["error"] for error in job.error_list)
    ]
    assert rescued, "the killed worker had no delivery in flight"
    assert gauge() == 0
    assert "outbox_publish" in registered_passes(start_log(workers))


def test_without_the_key_the_worker_leaves_the_publisher_out_and_says_why(database, workers):
    worker = workers.start("--app-kinds", env={"APP_DATA_ENCRYPTION_KEY": ""})
    line = "periodic pass left out task=outbox_publish reason=APP_DATA_ENCRYPTION_KEY is not set"
    wait_for(lambda: line in start_log(workers), timeout=30, message="the passes line")
    assert worker.poll() is None
