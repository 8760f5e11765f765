"""SPEC 3, 15.4: a paid goods order is handed to its provider at most once, whatever fails.

The job runs in this process against the fake goods provider (a real HTTP
server); the provider's own count of purchase calls per order is the
witness of "at most once"."""

import datetime
import json
import socket

import pytest

from bot.customer_notices import render
from fakes.goods import FakeGoodsProvider
from goods import delivery, schedule
from goods.delivery import GoodsRetry, goods_delivery
from jobs import JobSnooze, huey
from models.base import db, utcnow
from models.commerce import Order
from models.goods import GoodsDelivery
from models.jobs import Job
from models.ledger import LedgerTransaction
from models.ops import CustomerNotice, OperatorNotice
from tests.support.goods import TOKEN, paid_orders, product
from tests.support.ledger import ledger_problems


@pytest.fixture
def provider():
    fake = FakeGoodsProvider(token=TOKEN, seed=3).start()
    yield fake
    fake.stop()


@pytest.fixture
def voucher(database, data_key, provider):
    return product(provider.base_url)


def run(order_id):
    """One run of the job; what it ended with: its outcome, "retry" or "snooze"."""
    try:
        return goods_delivery(order_id)
    except GoodsRetry:
        return "retry"
    except JobSnooze:
        return "snooze"


def make_due(order_id):
    GoodsDelivery.update(next_attempt_at=utcnow() - datetime.timedelta(seconds=1)).where(
        GoodsDelivery.order == order_id
    ).execute()


def delivery_of(order_id):
    return GoodsDelivery.get(GoodsDelivery.order == order_id)


def submissions(provider, order_id):
    return provider.stats()["submissions"].get(delivery.reference(order_id), 0)


def test_settling_a_goods_order_writes_its_delivery_and_job_together_and_a_rollback_writes_neither(voucher):
    (order_id,) = paid_orders(voucher, 1)
    row = delivery_of(order_id)
    assert (row.status, row.attempt_count) == ("pending", 0)
    (job,) = Job.select().where(Job.kind == delivery.KIND)
    assert (job.queue, json.loads(job.args), job.max_attempts) == ("critical", {"orderId": order_id}, 12)

    class Abort(Exception):
        pass

    with pytest.raises(Abort), db.atomic():
        paid_orders(voucher, 1)
        raise Abort
    assert GoodsDelivery.select().count() == 1 and Job.select().where(Job.kind == delivery.KIND).count() == 1


def test_a_delivered_order_is_fulfilled_and_its_customer_gets_the_payload_sealed_in_a_notice(voucher, provider):
    (order_id,) = paid_orders(voucher, 1, telegram_from=5000)
    assert run(order_id) == "delivered"
    row = delivery_of(order_id)
    assert (row.status, row.attempt_count, row.provider_reference is not None) == ("delivered", 1, True)
    assert Order.get_by_id(order_id).status == "fulfilled"
    (notice,) = CustomerNotice.select().where(CustomerNotice.kind == delivery.NOTICE_CUSTOMER_DELIVERED)
    (bought,) = provider.orders()
    assert notice.secret == f"{bought['payload']['code']}\n{bought['payload']['link']}"
    stored = db.execute_sql("SELECT secret, payload FROM customer_notices WHERE id = " + str(notice.id)).fetchone()
    assert bought["payload"]["code"] not in stored[0] + stored[1]  # sealed at rest, not in the payload
    message = render(notice)  # what the bot sends: the code and the link, once
    assert bought["payload"]["code"] in message.text and bought["payload"]["link"] in message.text
    assert "Voucher 10" in message.text
    assert run(order_id) == "delivered"  # a second run finds it resolved and calls nothing
    assert submissions(provider, order_id) == 1


@pytest.mark.parametrize(
    "fault, failure_class, code",
    [("fail", "retryable", "goods_retry_later"), ("balance", "provider_balance", "goods_insufficient_balance")],
)
def test_a_refused_attempt_retries_with_backoff_and_a_later_one_delivers_it(voucher, provider, fault, failure_class,
                                                                            code):  # fmt: skip
    (order_id,) = paid_orders(voucher, 1)
    provider.set_faults(**{f"{fault}_rate": 1.0})
    assert run(order_id) == "retry"
    row = delivery_of(order_id)
    assert (row.status, row.failure_class, row.last_error_code) == ("retrying", failure_class, code)
    assert run(order_id) == "snooze"  # not due yet: the provider is not asked
    assert provider.stats()["calls"] == 1
    balance_notices = OperatorNotice.select().where(OperatorNotice.kind == delivery.NOTICE_BALANCE).count()
    assert balance_notices == (1 if fault == "balance" else 0)
    provider.clear_faults()
    make_due(order_id)
    assert run(order_id) == "delivered"
    assert delivery_of(order_id).attempt_count == 2 and submissions(provider, order_id) == 1


@pytest.mark.parametrize("fault", ["lost_response", "ambiguous", "adapter_error"])
def test_an_answer_that_may_hide_a_purchase_goes_to_review_and_is_never_submitted_again(voucher, provider, fault,
                                                                                        monkeypatch):  # fmt: skip
    (order_id,) = paid_orders(voucher, 1)
    if fault == "adapter_error":  # an exception the adapter does not classify: as ambiguous as they come
        submit = delivery.GoodsClient.submit

        def broken(self, *args):
            submit(self, *args)
            raise KeyError("surprise")

        monkeypatch.setattr(delivery.GoodsClient, "submit", broken)
    else:
        provider.set_faults(**{f"{fault}_rate": 1.0})
    assert run(order_id) == "needs_review"
    row = delivery_of(order_id)
    assert (row.status, row.failure_class) == (
        "needs_review",
        "adapter_error" if fault == "adapter_error" else "ambiguous",
    )
    monkeypatch.undo()
    provider.clear_faults()
    make_due(order_id)
    assert run(order_id) == "needs_review"
    assert schedule.due_orders(utcnow() + datetime.timedelta(hours=1)) == []
    assert submissions(provider, order_id) == 1  # bought once, by the one call that lost its answer
    assert OperatorNotice.select().where(OperatorNotice.kind == delivery.NOTICE_REVIEW).count() == 1
    assert Order.get_by_id(order_id).status == "paid"


def test_a_run_that_died_between_claim_and_record_is_never_resubmitted_but_sent_to_review(voucher, provider):
    (order_id,) = paid_orders(voucher, 1)
    claim = delivery.in_transaction(lambda: delivery.claim(order_id))
    delivery.call(claim)  # bought; then the worker dies before recording it
    assert run(order_id) == "snooze"  # inside the claim's deadline: another run may be calling
    GoodsDelivery.update(next_attempt_at=utcnow() - datetime.timedelta(seconds=1)).execute()
    assert run(order_id) == "needs_review"
    assert delivery_of(order_id).last_error_code == delivery.INTERRUPTED
    assert delivery.in_transaction(lambda: delivery.record(claim, delivery.Failed("retryable", "x"))).outcome == (
        "stale"
    )
    assert submissions(provider, order_id) == 1


@pytest.mark.parametrize("fault, failure_class", [("recipient", "recipient_invalid"), (None, "permanent")])
def test_a_permanent_failure_refunds_the_order_to_the_wallet_and_tells_the_customer(voucher, provider, fault,
                                                                                     failure_class):  # fmt: skip
    if fault is None:
        voucher.provider_sku = "unknown-sku"
        voucher.save()
    else:
        provider.set_faults(**{f"{fault}_rate": 1.0})
    (order_id,) = paid_orders(voucher, 1)
    assert run(order_id) == "refunded"
    assert (delivery_of(order_id).status, delivery_of(order_id).failure_class) == ("refunded", failure_class)
    order = Order.get_by_id(order_id)
    assert (order.status, order.refunded_amount_minor) == ("refunded", 1000)
    assert LedgerTransaction.select().where(LedgerTransaction.idempotency_key.startswith("refund:")).count() == 1
    assert CustomerNotice.select().where(CustomerNotice.kind == "order_refunded_wallet").count() == 1
    assert ledger_problems() == []
    assert provider.stats()["submissions"] == {}  # nothing was bought


def test_an_order_refunded_before_its_delivery_ran_is_cancelled_without_calling(voucher, provider):
    from commerce.refunds import refund_order

    (order_id,) = paid_orders(voucher, 1)
    refund_order(order_id, to="wallet")
    assert run(order_id) == "cancelled"
    assert provider.stats()["calls"] == 0


def test_the_schedule_pass_enqueues_due_deliveries_without_a_job_and_skips_those_with_one(voucher):
    order_ids = paid_orders(voucher, 3)
    later = utcnow() + datetime.timedelta(minutes=1)
    assert schedule.dispatch(later) == (0, 3)  # settlement's jobs are still there
    Job.delete().where(Job.kind == delivery.KIND).execute()
    assert schedule.dispatch(later) == (3, 0)
    assert schedule.dispatch(utcnow()) == (0, 0)  # inside the grace period: not due for the pass
    assert sorted(json.loads(j.args)["orderId"] for j in Job.select().where(Job.kind == delivery.KIND)) == order_ids


def test_without_the_data_key_the_worker_leaves_goods_delivery_out_and_says_so(caplog):
    from config.settings import load_settings

    settings = load_settings(environ={}, dotenv_path="/nonexistent")
    with caplog.at_level("WARNING", logger="omniflow.passes.goods"):
        why = schedule.register(settings)
    assert why.startswith("digital goods delivery disabled")
    assert "digital goods delivery disabled" in caplog.text
    assert schedule.NAME not in huey.periodic_schedules
    assert huey.kinds.get(delivery.KIND).task_class is None  # inserted by settlement, run by no worker here


def test_a_provider_that_cannot_be_reached_is_unavailable_not_ambiguous_since_nothing_was_sent():
    from integrations.goods import GoodsClient, GoodsFailure

    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # nothing listens here once the socket is closed
    with pytest.raises(GoodsFailure) as failure:
        GoodsClient(f"http://127.0.0.1:{port}", TOKEN).submit("omniflow-order-1", "voucher-10", {})
    assert (failure.value.failure_class, failure.value.code) == ("provider_unavailable", "goods_provider_unreachable")
