"""SPEC 13.10, 0.2 with a real worker process: the worker running a provider_refund job is SIGKILLed after
YooKassa (the fake, a real server) accepted the refund and before the answer was recorded; after a restart
the refund is finished exactly once — one refund at YooKassa (the rescued job's call carries the same
Idempotence-Key, so YooKassa answers its first refund again) and one ledger reversal. When YooKassa's
refund.succeeded gets through meanwhile, it finishes the refund and the rescued job calls nothing."""

import signal

import pytest

from commerce.provider_refund import NOTICE_REFUND_FAILED, NOTIFIED_RECORDED
from commerce.refunds import refund_order
from models.commerce import Order
from models.jobs import Job
from models.ledger import LedgerEntry, LedgerTransaction
from models.ops import OperatorNotice
from models.payments import Refund
from tests.commerce.test_refunds import paid_at
from tests.support.processes import wait_for
from tests.support.shop import PANEL_TOKEN, due_deliveries, environ, settle_deliveries

pytestmark = [pytest.mark.processes, pytest.mark.usefixtures("ledger_invariant")]

REFUND_ROUTE = "POST /v3/refunds"
# YooKassa does the refund and holds its answer this long: less than the worker's 10 s deadline, so the worker
# is still waiting for it when it is killed, and the held call is over before the test ends.
HOLD_S = 8
WORKER_OPTIONS = ("--app-kinds", "--fast-takeover", "--fast-rescue")


def test_a_worker_killed_after_yookassa_accepted_a_refund_finishes_it_once_after_its_restart(shop, workers):
    order, intent = paid_at(shop)
    # The refund's notification is lost: only the rescued job can finish it (test_refund_notifications.py
    # shows the notification finishing it on its own).
    shop.yookassa.set_faults(timeout_rate=1.0, routes=[REFUND_ROUTE], hold_seconds=HOLD_S, webhook_lost_rate=1.0)
    refund_order(order.id)
    refund = Refund.get(Refund.order == order.id)
    (job,) = Job.select().where(Job.kind == "provider_refund")
    env = {
        **environ(shop.yookassa, shop.cryptobot),
        "APP_REMNAWAVE_URL": shop.panel.base_url,
        "APP_REMNAWAVE_TOKEN": PANEL_TOKEN,
    }

    victim = workers.start(*WORKER_OPTIONS, env=env)
    wait_for(lambda: shop.yookassa.stats()["refunds"] == 1, timeout=60, interval=0.02, message="YooKassa's refund")
    # YooKassa has refunded; the worker waits for an answer it will not live to record.
    running = Job.get_by_id(job.id)
    assert (running.state, running.attempt) == ("running", 1)
    assert Refund.get_by_id(refund.id).status == "pending"
    victim.send_signal(signal.SIGKILL)
    victim.wait(10)

    shop.yookassa.set_faults(timeout_rate=0.0)  # YooKassa answers the next call at once
    workers.start(*WORKER_OPTIONS, env=env)
    wait_for(lambda: Refund.get_by_id(refund.id).status == "succeeded", timeout=120, message="the refund recorded")
    wait_for(lambda: Job.get_by_id(job.id).state == "completed", timeout=30, message="the job completed")

    done = Refund.get_by_id(refund.id)
    refunds_at_yookassa = shop.yookassa.refunds()
    assert [r["id"] for r in refunds_at_yookassa] == [done.provider_refund_id]  # one refund, and it is ours
    assert shop.yookassa.stats()["calls"][REFUND_ROUTE] == 2  # the killed call and the rescued job's repeat
    payment = shop.providers["yookassa"].fetch_payment(intent.provider_payment_id)
    assert payment.refunded_minor == order.amount_minor

    finished = Job.get_by_id(job.id)
    assert finished.attempt == 2
    assert any("rescued" in error["error"] for error in finished.error_list)
    (reversal,) = LedgerTransaction.select().where(LedgerTransaction.kind == "refund")
    assert done.ledger_transaction_id == reversal.id
    legs = {e.account.name: e.amount_minor for e in LedgerEntry.select().where(LedgerEntry.transaction == reversal)}
    assert legs == {"revenue": -order.amount_minor, "provider_clearing:yookassa": order.amount_minor}
    assert Order.get_by_id(order.id).status == "refunded" and Order.get_by_id(order.id).refunded_amount_minor == (
        order.amount_minor
    )
    assert OperatorNotice.select().where(OperatorNotice.kind == NOTICE_REFUND_FAILED).count() == 0

    # The killed call's held answer is over (its notification drawn lost) before the shared fake moves on.
    wait_for(
        lambda: any(d["event_id"].startswith("refund.") for d in shop.yookassa.deliveries()),
        timeout=HOLD_S + 5,
        message="the held call's end",
    )


def test_a_refund_whose_worker_was_killed_is_finished_by_its_notification_and_the_rescued_job_calls_nothing(
    shop, workers
):
    order, _ = paid_at(shop)
    shop.yookassa.set_faults(timeout_rate=1.0, routes=[REFUND_ROUTE], hold_seconds=HOLD_S)
    refund_order(order.id)
    refund = Refund.get(Refund.order == order.id)
    (job,) = Job.select().where(Job.kind == "provider_refund")
    env = {**environ(shop.yookassa, shop.cryptobot), "APP_REMNAWAVE_URL": shop.panel.base_url,
           "APP_REMNAWAVE_TOKEN": PANEL_TOKEN}  # fmt: skip

    victim = workers.start(*WORKER_OPTIONS, env=env)
    wait_for(lambda: shop.yookassa.stats()["refunds"] == 1, timeout=60, interval=0.02, message="YooKassa's refund")
    victim.send_signal(signal.SIGKILL)
    victim.wait(10)
    # The held call ends and YooKassa's refund.succeeded reaches the web, which stores it with its job; the job
    # (run here, while no worker is up) confirms and records it.
    wait_for(lambda: due_deliveries().exists(), timeout=HOLD_S + 20, message="the notice")
    assert settle_deliveries() == [NOTIFIED_RECORDED]
    assert Refund.get_by_id(refund.id).status == "succeeded"
    assert Job.get_by_id(job.id).state == "running"  # the dead worker's job, not yet rescued

    workers.start(*WORKER_OPTIONS, env=env)
    wait_for(lambda: Job.get_by_id(job.id).state == "completed", timeout=120, message="the rescued job done")
    assert shop.yookassa.stats()["calls"][REFUND_ROUTE] == 1  # the rescued job found it done and called nothing
    assert [r["id"] for r in shop.yookassa.refunds()] == [Refund.get_by_id(refund.id).provider_refund_id]
    assert LedgerTransaction.select().where(LedgerTransaction.kind == "refund").count() == 1
    assert OperatorNotice.select().where(OperatorNotice.kind == NOTICE_REFUND_FAILED).count() == 0
