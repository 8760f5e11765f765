"""SPEC 13.7, 5.3: payment_reconcile finds the intents pending longest past two minutes and
inserts one `payment_poll` job each; the jobs ask the providers (the fakes, real HTTP servers),
so a payment whose webhook was lost is settled within one pass."""

import datetime
import logging

import pytest

from commerce.checkout import checkout
from commerce.passes import payment_reconcile
from jobs import insert
from models.base import utcnow
from models.commerce import Order
from models.fulfillment import Entitlement
from models.jobs import Job
from models.ledger import LedgerTransaction
from models.payments import PaymentIntent
from tests.support import commerce
from tests.support.direct import run_all, run_next
from tests.support.shop import PUBLIC_URL, rub_plan

pytestmark = pytest.mark.usefixtures("ledger_invariant")

MINUTE = datetime.timedelta(minutes=1)


def bought(shop, provider, key="cart-1"):
    result = checkout(
        shop.providers, PUBLIC_URL, commerce.customer().id, "purchase", provider, "RUB", plan_id=rub_plan().id, key=key
    )
    return result.order_id, PaymentIntent.get(PaymentIntent.order == result.order_id)


def waiting(intent, minutes):
    """The intent was made `minutes` ago and never polled."""
    created = utcnow() - minutes * MINUTE
    PaymentIntent.update(created_at=created, updated_at=created).where(PaymentIntent.id == intent.id).execute()


def run_pass():
    job_id = insert("periodic_task", {"task": payment_reconcile.NAME}).job_id
    assert run_next() == job_id
    assert Job.get_by_id(job_id).state == "completed"


def poll_jobs():
    return sorted(job.args_dict["intentId"] for job in Job.select().where(Job.kind == payment_reconcile.POLL_KIND))


@pytest.mark.parametrize("provider", ["yookassa", "cryptobot"])
def test_a_payment_whose_webhook_was_lost_is_settled_within_one_pass(shop, provider):
    order_id, intent = bought(shop, provider)
    shop.fake(provider).set_faults(webhook_lost_rate=1.0)
    shop.fake(provider).complete(intent.provider_payment_id)
    assert [delivery["outcome"] for delivery in shop.fake(provider).deliveries()] == ["lost"]
    waiting(intent, 3)

    run_pass()
    assert poll_jobs() == [intent.id]
    run_all()  # the poll, then the fulfillment it queued, against the fake panel

    order = Order.get_by_id(order_id)
    assert (order.status, order.settled_by) == ("fulfilled", "provider_poll")
    assert PaymentIntent.get_by_id(intent.id).status == "succeeded"
    assert LedgerTransaction.select().count() == 1
    subscription = Entitlement.get(Entitlement.order == order_id).subscription
    assert shop.panel.user(subscription.remote_username)["status"] == "ACTIVE"


def test_a_payment_the_provider_let_expire_expires_its_intent_and_order_through_the_pass(shop):
    order_id, intent = bought(shop, "cryptobot")
    shop.cryptobot.expire(intent.provider_payment_id)
    waiting(intent, 3)
    run_pass()
    run_all()
    assert PaymentIntent.get_by_id(intent.id).status == "expired"
    assert Order.get_by_id(order_id).status == "expired"


def test_a_provider_that_does_not_answer_leaves_the_intent_for_the_next_pass_and_says_so(shop, caplog):
    order_id, intent = bought(shop, "yookassa")
    shop.yookassa.set_faults(webhook_lost_rate=1.0)
    shop.yookassa.succeed(intent.provider_payment_id)
    shop.yookassa.set_faults(fail_rate=1.0)
    waiting(intent, 3)
    with caplog.at_level(logging.WARNING, logger="omniflow.passes.payments"):
        run_pass()
        run_all()
    assert Order.get_by_id(order_id).status == "pending"
    assert PaymentIntent.get_by_id(intent.id).status == "pending"
    [warning] = [record for record in caplog.records if record.name == "omniflow.passes.payments"]
    assert warning.reason == f"intent {intent.id} at yookassa: provider_http_500"

    shop.yookassa.clear_faults()
    assert payment_reconcile.dispatch() == (0, 0)  # just polled: not asked again within two minutes
    waiting_since = utcnow() - 3 * MINUTE
    PaymentIntent.update(last_polled_at=waiting_since).where(PaymentIntent.id == intent.id).execute()
    run_pass()
    run_all()
    assert Order.get_by_id(order_id).status == "fulfilled"


def stored_intent(order, n, status="pending", provider="yookassa", created_minutes=0, polled_minutes=None):
    now = utcnow()
    return PaymentIntent.create(
        order=order, provider=provider, provider_payment_id=f"pay-{n}", amount_minor=order.amount_minor,
        currency=order.currency, status=status, idempotence_key=f"key-{n}", created_at=now - created_minutes * MINUTE,
        updated_at=now, last_polled_at=None if polled_minutes is None else now - polled_minutes * MINUTE,
    )  # fmt: skip


def test_the_pass_dispatches_the_intents_waiting_longest_past_the_grace_at_most_a_batch(database, monkeypatch):
    customer, plan = commerce.customer(), rub_plan()
    order = commerce.order(customer, plan, amount=19900)
    never_polled = stored_intent(order, 1, created_minutes=10)
    stored_intent(order, 2, created_minutes=20, polled_minutes=1)  # asked a minute ago
    polled_3 = stored_intent(order, 3, created_minutes=60, polled_minutes=3)  # made long ago, asked since
    stored_intent(order, 4, created_minutes=1)  # within the grace: its webhook may still come
    stored_intent(order, 5, status="succeeded", created_minutes=30)
    stored_intent(order, 6, provider="stars", created_minutes=30)  # the bot hears of Stars payments
    polled_4 = stored_intent(order, 7, created_minutes=5, polled_minutes=4)
    monkeypatch.setattr(payment_reconcile, "RECONCILE_BATCH", 2)

    assert payment_reconcile.dispatch() == (2, 0)
    assert poll_jobs() == sorted([never_polled.id, polled_4.id])
    assert payment_reconcile.dispatch() == (0, 2)  # their polls have not run yet: no second job
    monkeypatch.setattr(payment_reconcile, "RECONCILE_BATCH", 100)
    assert payment_reconcile.dispatch() == (1, 2)
    assert poll_jobs() == sorted([never_polled.id, polled_3.id, polled_4.id])


def test_a_poll_job_for_an_intent_no_longer_pending_asks_nothing(database):
    order = commerce.order(commerce.customer(), rub_plan(), amount=19900)
    settled = stored_intent(order, 1, status="succeeded", created_minutes=10)
    job_id = insert(payment_reconcile.POLL_KIND, {"intentId": settled.id}).job_id
    assert run_next() == job_id
    assert Job.get_by_id(job_id).state == "completed"
    assert PaymentIntent.get_by_id(settled.id).last_polled_at is None


def test_a_payment_completed_after_its_order_expired_with_every_webhook_lost_is_settled_by_the_poll(shop):
    """SPEC 13.7: nothing paid is lost. The order expired while the payer was on YooKassa's page; they
    paid anyway and every notification was lost: the intent stayed pending, so the pass still asks."""
    from commerce.passes import commerce_maintenance

    order_id, intent = bought(shop, "yookassa")
    Order.update(expires_at=utcnow() - MINUTE).where(Order.id == order_id).execute()
    commerce_maintenance.maintain()
    assert Order.get_by_id(order_id).status == "expired"
    assert PaymentIntent.get_by_id(intent.id).status == "pending"

    shop.yookassa.set_faults(webhook_lost_rate=1.0)
    shop.yookassa.complete(intent.provider_payment_id)
    waiting(intent, 3)
    run_pass()
    run_all()

    order = Order.get_by_id(order_id)
    assert (order.status, order.settled_by) == ("fulfilled", "provider_poll")
    assert LedgerTransaction.select().count() == 1
