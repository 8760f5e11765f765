"""SPEC 13.10, 13.6: YooKassa's `refund.succeeded` (fake YooKassa, a real server, delivering to the web's
webhook route) is only a hint: the refund is fetched from the API, and what the API says finishes our
pending refund as the provider_refund job's poll would; replays and refunds that are not ours change nothing."""

import json
import time

import pytest

from commerce.provider_refund import (
    NOTIFIED_ALREADY_RECORDED,
    NOTIFIED_RECORDED,
    NOTIFIED_UNMATCHED,
)
from commerce.refunds import refund_order
from commerce.webhooks import PROVIDER_UNAVAILABLE, UNCONFIRMED
from models.jobs import Job
from models.ledger import LedgerTransaction
from models.ops import OperatorNotice
from models.payments import ProviderWebhookEvent, Refund
from tests.commerce.test_refunds import paid_at, refund_jobs, run_refund_jobs
from tests.support.direct import make_due
from tests.support.shop import settle_deliveries

pytestmark = pytest.mark.usefixtures("ledger_invariant")

REFUND_ROUTE = "POST /v3/refunds"


def refund_events():
    events = ProviderWebhookEvent.select().order_by(ProviderWebhookEvent.id)
    return [event for event in events if (event.provider_event_id or "").startswith("refund.")]


def wait_for(condition, timeout=10.0):
    """The fake delivers a notification once its API answer is out, from its own thread: wait for its effect."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError("the notification's effect did not show within the timeout")


def settled_when_delivered():
    """Wait for the fake's refund notification to be stored (with its job), then run the job."""
    wait_for(lambda: bool(refund_events()))
    return settle_deliveries()


def provider_accepts(shop, refund):
    """What the job's call does at YooKassa — the same Idempotence-Key — without the job recording the answer
    (as if its worker died right after). Returns YooKassa's refund."""
    return shop.providers["yookassa"].refund(
        payment_id=refund.provider_payment_id,
        amount_minor=refund.amount_minor,
        currency=refund.currency,
        idempotence_key=refund.idempotence_key,
        description=f"Refund of order {refund.order_id}",  # the job's body: YooKassa refuses a key's other body
    )


def snapshot(refund_id):
    row = Refund.get_by_id(refund_id)
    return (row.status, row.provider_refund_id, row.updated_at, row.completed_at, row.last_error_code)


def test_the_notification_finishes_a_refund_whose_job_never_recorded_the_answer(shop):
    order, _ = paid_at(shop)
    refund = refund_order(order.id, 5000).refunds.get()
    accepted = provider_accepts(shop, refund)

    assert settled_when_delivered() == [NOTIFIED_RECORDED]
    done = Refund.get_by_id(refund.id)
    assert (done.provider_refund_id, done.last_error_code, done.completed_at is not None) == (
        accepted.refund_id, None, True,
    )  # fmt: skip
    (event,) = refund_events()
    assert (event.outcome, event.processed_at is not None) == (NOTIFIED_RECORDED, True)
    assert (event.signature_ok, event.verdict) == (False, "confirmed")  # YooKassa signs nothing: its API said so
    assert event.provider_event_id == f"refund.succeeded:{accepted.refund_id}"

    (job,) = run_refund_jobs()  # the job finds it done: no second call to YooKassa
    assert Job.get_by_id(job.id).state == "completed"
    assert shop.yookassa.stats()["calls"][REFUND_ROUTE] == 1 and shop.yookassa.stats()["refunds"] == 1
    assert LedgerTransaction.select().where(LedgerTransaction.kind == "refund").count() == 1


def test_a_replayed_notification_changes_nothing(shop):
    order, _ = paid_at(shop)
    refund_order(order.id)
    run_refund_jobs()
    refund = Refund.get(Refund.order == order.id)
    settled_when_delivered()
    assert len(refund_events()) == 1 and refund_events()[0].processed_at is not None
    before, ledger_before = snapshot(refund.id), LedgerTransaction.select().count()

    for _ in range(3):
        shop.yookassa.notify_refund(refund.provider_refund_id)
    assert settle_deliveries() == []  # a replay of an applied event gets no job
    first, *replays = refund_events()
    assert first.outcome in (NOTIFIED_RECORDED, NOTIFIED_ALREADY_RECORDED)  # the job or the notification first
    assert [event.outcome for event in replays] == ["replayed"] * 3
    assert snapshot(refund.id) == before and LedgerTransaction.select().count() == ledger_before
    assert OperatorNotice.select().where(OperatorNotice.kind.startswith("refund")).count() == 0
    assert shop.yookassa.stats()["refunds"] == 1


def test_a_refund_yookassa_holds_is_finished_by_its_notification_before_the_next_poll(shop):
    order, _ = paid_at(shop)
    shop.yookassa.hold_refunds = True
    refund_order(order.id, 2000)
    run_refund_jobs()
    refund = Refund.get(Refund.order == order.id)
    assert refund.status == "processing"
    fetches = shop.yookassa.stats()["calls"].get("GET /v3/refunds/{id}", 0)

    shop.yookassa.settle_refund(refund.provider_refund_id)  # delivers refund.succeeded
    assert settle_deliveries() == [NOTIFIED_RECORDED]
    done = Refund.get_by_id(refund.id)
    assert (done.status, done.completed_at is not None) == ("succeeded", True)
    assert refund_events()[0].outcome == NOTIFIED_RECORDED
    # Confirmed by one fetch of the refund, the webhook's own.
    assert shop.yookassa.stats()["calls"]["GET /v3/refunds/{id}"] == fetches + 1

    (job,) = refund_jobs()
    make_due(job.id)
    run_refund_jobs()
    assert Job.get_by_id(job.id).state == "completed"
    assert shop.yookassa.stats()["calls"]["GET /v3/refunds/{id}"] == fetches + 1  # nothing left to poll


def test_a_forged_notification_of_a_refund_the_api_does_not_know_changes_nothing(shop):
    order, intent = paid_at(shop)
    refund = refund_order(order.id).refunds.get()
    forged = {
        "type": "notification",
        "event": "refund.succeeded",
        "object": {
            "id": "2f1c0f3e-0000-5000-8000-000000000000",
            "payment_id": intent.provider_payment_id,
            "status": "succeeded",
            "amount": {"value": "199.00", "currency": "RUB"},
            "created_at": "2026-12-01T10:00:00.000Z",
        },
    }
    before = snapshot(refund.id)
    answer = shop.webhook("yookassa", json.dumps(forged).encode())
    assert answer.status_code == 200
    assert settle_deliveries() == [UNCONFIRMED]
    (event,) = refund_events()
    assert (event.outcome, event.verdict, event.signature_ok) == (UNCONFIRMED, "unknown", False)
    assert event.processed_at is not None  # ended, not left open
    assert snapshot(refund.id) == before


def test_a_notification_that_cannot_be_confirmed_now_is_tried_again_by_its_job(shop):
    order, _ = paid_at(shop)
    refund = refund_order(order.id).refunds.get()
    shop.yookassa.set_faults(webhook_lost_rate=1.0)
    accepted = provider_accepts(shop, refund)
    wait_for(
        lambda: [d["outcome"] for d in shop.yookassa.deliveries() if d["event_id"].startswith("refund.")] == ["lost"]
    )
    shop.yookassa.set_faults(webhook_lost_rate=0.0, fail_rate=1.0, routes=["GET /v3/refunds/{id}"])

    (delivery,) = shop.yookassa.notify_refund(accepted.refund_id)
    assert delivery["status"] == 200  # stored with its job: YooKassa need not deliver it again
    assert settle_deliveries() == [PROVIDER_UNAVAILABLE]
    assert Refund.get_by_id(refund.id).status == "pending"
    (job,) = Job.select().where(Job.kind == "webhook_delivery")
    assert Job.get_by_id(job.id).state == "retryable"

    shop.yookassa.clear_faults()
    make_due(job.id)
    assert settle_deliveries() == [NOTIFIED_RECORDED]
    assert Refund.get_by_id(refund.id).status == "succeeded"
    assert [event.outcome for event in refund_events()] == [NOTIFIED_RECORDED]


def test_a_refund_made_at_the_dashboard_is_not_taken_for_ours(shop):
    order, intent = paid_at(shop)
    refund = refund_order(order.id, 1000).refunds.get()
    before = snapshot(refund.id)
    # Someone refunded another amount at YooKassa: its notification matches no refund of ours.
    shop.providers["yookassa"].refund(
        payment_id=intent.provider_payment_id, amount_minor=3000, currency="RUB", idempotence_key="dashboard"
    )
    assert settled_when_delivered() == [NOTIFIED_UNMATCHED]
    assert refund_events()[0].outcome == NOTIFIED_UNMATCHED
    assert snapshot(refund.id) == before
    # Money left that the ledger knows nothing of: an operator is told, once.
    (notice,) = OperatorNotice.select().where(OperatorNotice.kind == "refund_unmatched")
    payload = json.loads(notice.payload)
    told = (payload["paymentId"], payload["amountMinor"], payload["currency"])
    assert told == (intent.provider_payment_id, 3000, "RUB")


def test_two_pending_refunds_of_the_same_amount_are_left_to_their_jobs(shop):
    order, _ = paid_at(shop)
    first = refund_order(order.id, 1000).refunds.order_by(Refund.id).get()
    refund_order(order.id, 1000)
    second = Refund.select().where(Refund.order == order.id).order_by(Refund.id.desc()).get()
    accepted = provider_accepts(shop, second)
    assert settled_when_delivered() == [NOTIFIED_UNMATCHED]
    assert refund_events()[0].outcome == NOTIFIED_UNMATCHED  # which of the two it is cannot be told
    assert [Refund.get_by_id(r.id).status for r in (first, second)] == ["pending", "pending"]
    assert not OperatorNotice.select().where(OperatorNotice.kind == "refund_unmatched").exists()  # ours, not news

    run_refund_jobs()  # each job's call, with its own key: the second one gets YooKassa's first answer back
    done = {r.id: Refund.get_by_id(r.id) for r in (first, second)}
    assert [row.status for row in done.values()] == ["succeeded", "succeeded"]
    assert done[second.id].provider_refund_id == accepted.refund_id
    assert shop.yookassa.stats()["refunds"] == 2


def test_the_answer_to_a_refund_notification_is_the_one_described_in_openapi(shop):
    from tests.web.test_openapi import check

    order, _ = paid_at(shop)
    shop.yookassa.hold_refunds = True
    refund = refund_order(order.id).refunds.get()
    accepted = provider_accepts(shop, refund)  # pending at YooKassa
    body = {
        "type": "notification",
        "event": "refund.succeeded",
        "object": {**{k: v for k, v in shop.yookassa.refunds()[0].items()}, "status": "succeeded"},
    }  # a hint that claims more than the API holds: what the API says is recorded
    answer = shop.webhook("yookassa", json.dumps(body).encode())
    check(answer, "/v1/webhooks/yookassa", "post")
    assert answer.json()["outcome"] == "accepted"
    assert settle_deliveries() == ["refund_processing"]
    assert (Refund.get_by_id(refund.id).status, Refund.get_by_id(refund.id).provider_refund_id) == (
        "processing",
        accepted.refund_id,
    )
    shop.yookassa.settle_refund(accepted.refund_id)
    assert settle_deliveries() == [NOTIFIED_RECORDED]
    (_, delivered) = refund_events()
    assert delivered.outcome == NOTIFIED_RECORDED and Refund.get_by_id(refund.id).status == "succeeded"
