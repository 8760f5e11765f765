"""SPEC 15.6, 2.19 with real worker processes: a confirmed bulk extend by 3 days, the worker SIGKILLed in the
middle of a `bulk_actions` run and another started → every subscription extended exactly once (the panel moved
each user's expiry once, by 3 days), one operation per item, progress that adds up.

Two workers run from the start; the one running the pass is killed once half the items are applied and while
its run has applied some of its 50 items but not all, and the other carries on (it becomes the leader, the dead
worker's run is rescued, the next run takes the items still pending).

SUBSCRIBERS is 100, not the issue's 1 000: at 50 items a run the pass needs N / 50 runs, and even with the test
worker's pass every second (tests/support/slow_bulk.py; 15 s in production) 1 000 subscribers take about a
minute per database on the shared test machine, past this test's share of the suite's time. 100 is two runs,
killed inside the second: the guarantee (one transaction per item, keyed `bulk:<id>:<position>`) does not
depend on the count.
"""

import datetime
import signal
import time

import pytest

from fulfillment import bulk
from jobs.passes.bulk_actions import NAME
from models.bulk import BulkAction, BulkActionItem
from models.fulfillment import FulfillmentOperation
from models.jobs import Job
from tests.conftest import TEST_DATA_KEY
from tests.fulfillment.conftest import PANEL_TOKEN
from tests.support import commerce, subscribers
from tests.support.processes import wait_for

pytestmark = pytest.mark.processes

SUBSCRIBERS = 100
WORKER_OPTIONS = ("--app-kinds", "--fast-takeover", "--fast-rescue", "--slow-bulk")


def mid_run(bulk_id):
    """(items applied, the pass's running job) once half the items are applied and a run is under way
    with part of its batch done; else None."""
    count = applied(bulk_id)
    if count < SUBSCRIBERS // 2 or count % bulk.BATCH == 0:
        return None
    running = Job.get_or_none(Job.kind == "periodic_task", Job.state == "running", Job.args.contains(NAME))
    return (count, running) if running else None


def applied(bulk_id):
    return (
        BulkActionItem.select().where(BulkActionItem.bulk_action == bulk_id, BulkActionItem.status == "applied").count()
    )


def test_a_bulk_extend_whose_worker_is_killed_mid_run_extends_every_subscription_exactly_once(panel, workers):
    plan = commerce.limited_plan()
    chosen = subscribers.provisioned(panel, plan, SUBSCRIBERS)
    action = bulk.preview("extend", "operator:alice", plan_id=plan.id, days=3)
    bulk.change_state(action.id, "confirm", "operator:alice", "panel outage on 1 December")
    env = {
        "APP_DATA_ENCRYPTION_KEY": TEST_DATA_KEY,
        "APP_REMNAWAVE_URL": panel.base_url,
        "APP_REMNAWAVE_TOKEN": PANEL_TOKEN,
    }

    started = time.monotonic()
    pair = [workers.start(*WORKER_OPTIONS, env=env) for _ in range(2)]
    # Halfway, and inside a run: some of the run's 50 items applied, the rest not yet.
    at_kill, running = wait_for(
        lambda: mid_run(action.id), timeout=90, interval=0.01, message="half the items applied, in a run"
    )
    victim = next(process for process in pair if process.pid == int(running.attempted_by.split(":")[1]))
    victim.send_signal(signal.SIGKILL)
    victim.wait(10)
    print(f"killed after {time.monotonic() - started:.1f} s at {at_kill} items")
    assert applied(action.id) < SUBSCRIBERS

    wait_for(lambda: BulkAction.get_by_id(action.id).status == "done", timeout=90, message="every item applied")
    print(f"every item applied after {time.monotonic() - started:.1f} s")
    wait_for(
        lambda: bulk.progress(action.id)["operations"]["succeeded"] == SUBSCRIBERS,
        timeout=90,
        message="every extend at the panel",
    )
    print(f"every extend at the panel after {time.monotonic() - started:.1f} s")

    assert bulk.progress(action.id) == {
        "items": {"pending": 0, "applied": SUBSCRIBERS, "skipped": 0, "cancelled": 0},
        "operations": {"pending": 0, "running": 0, "succeeded": SUBSCRIBERS, "retrying": 0, "failed": 0,
                       "cancelled": 0},
    }  # fmt: skip
    operations = FulfillmentOperation.select().where(FulfillmentOperation.correlation_id == f"bulk:{action.id}")
    assert sorted(op.idempotency_key for op in operations) == sorted(
        f"bulk:{action.id}:{position}" for position in range(1, SUBSCRIBERS + 1)
    )
    items = BulkActionItem.select().where(BulkActionItem.bulk_action == action.id)
    assert sorted(item.subscription_id for item in items) == chosen
    for subscription_id in chosen:
        moves = panel.expiry_moves(subscriber_username(subscription_id))
        assert [after - before for before, after in moves] == [datetime.timedelta(days=3)], subscription_id
    # The killed run was rescued from the dead worker and ended there; a later run on the other finished the items.
    [killed] = Job.select().where(Job.id == running.id)
    assert any("rescued" in error["error"] for error in killed.error_list), killed.error_list


def subscriber_username(subscription_id):
    from fulfillment.usernames import username_for

    return username_for(subscription_id)
