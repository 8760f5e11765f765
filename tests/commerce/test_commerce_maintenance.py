"""SPEC 13.7, 5.1: commerce_maintenance expires pending orders past their payment deadline with
their open intents, takes back expired bonus credits as `expiration` transactions and drops
saved carts past their expiry that never became an order — each in bounded batches."""

import datetime

import pytest

from commerce import ledger
from commerce.orders import create_order
from commerce.passes import commerce_maintenance
from commerce.settlement import settle_order
from jobs import insert
from models.base import db, utcnow
from models.bot import BotCheckoutSession
from models.commerce import Order
from models.jobs import Job
from models.ledger import LedgerTransaction
from models.payments import PaymentIntent
from tests.support import commerce
from tests.support.direct import run_next
from tests.support.shop import rub_plan

pytestmark = pytest.mark.usefixtures("ledger_invariant")

MINUTE = datetime.timedelta(minutes=1)


def pending_order(customer, plan, deadline_in):
    order = create_order(customer.id, "purchase", "RUB", plan_id=plan.id, provider="yookassa")
    Order.update(expires_at=utcnow() + deadline_in).where(Order.id == order.id).execute()
    return order


def intent(order, status, n=1):
    now = utcnow()
    return PaymentIntent.create(
        order=order, provider="yookassa", provider_payment_id=f"p-{order.id}-{n}", amount_minor=order.amount_minor,
        currency=order.currency, status=status, idempotence_key=f"order-{order.id}-yookassa-{n}", created_at=now,
        updated_at=now,
    )  # fmt: skip


def test_pending_orders_past_their_deadline_expire_with_their_open_intents(database):
    customer, plan = commerce.customer(), rub_plan()
    overdue = pending_order(customer, plan, -MINUTE)
    waiting, created = intent(overdue, "pending", 1), intent(overdue, "created", 2)
    failed = intent(overdue, "failed", 3)
    not_yet = pending_order(customer, plan, 5 * MINUTE)
    open_intent = intent(not_yet, "pending")
    paid = create_order(customer.id, "purchase", "RUB", plan_id=plan.id, provider="yookassa")
    settle_order(paid.id, "provider_webhook")

    done = commerce_maintenance.maintain()

    assert (done.orders_expired, done.intents_expired) == (1, 1)
    expired = Order.get_by_id(overdue.id)
    assert (expired.status, expired.expires_at) == ("expired", None)
    statuses = {i.id: PaymentIntent.get_by_id(i.id).status for i in (waiting, created, failed, open_intent)}
    # The payment the provider holds stays pending: the payer may still pay it, and the poll would see it.
    assert statuses == {waiting.id: "pending", created.id: "expired", failed.id: "failed", open_intent.id: "pending"}
    assert Order.get_by_id(not_yet.id).status == "pending"
    assert Order.get_by_id(paid.id).status == "paid"
    assert commerce_maintenance.maintain().orders_expired == 0


def test_a_deadline_left_on_an_order_no_longer_waiting_is_cleared_and_the_order_kept(database):
    order = create_order(commerce.customer().id, "purchase", "RUB", plan_id=rub_plan().id, provider="yookassa")
    settle_order(order.id, "provider_webhook")
    Order.update(expires_at=utcnow() - MINUTE).where(Order.id == order.id).execute()
    assert commerce_maintenance.maintain().orders_expired == 0
    kept = Order.get_by_id(order.id)
    assert (kept.status, kept.expires_at) == ("paid", None)


def test_a_payment_arriving_after_the_expiry_still_settles_the_order(database):
    order = pending_order(commerce.customer(), rub_plan(), -MINUTE)
    commerce_maintenance.maintain()
    assert Order.get_by_id(order.id).status == "expired"
    settlement = settle_order(order.id, "provider_webhook")
    assert Order.get_by_id(order.id).status == "paid" and settlement.entitlement_id is not None


def test_expired_bonus_credits_are_taken_back_as_an_expiration_transaction(database):
    customer = commerce.customer()
    now = utcnow()
    with db.atomic():
        ledger.grant_bonus(customer.id, 300, "RUB", now - MINUTE)
        ledger.grant_bonus(customer.id, 200, "RUB", now + 60 * MINUTE)
    assert ledger.balance(customer.id, "RUB") == 500

    assert commerce_maintenance.maintain().bonuses_expired == 1
    [expiration] = LedgerTransaction.select().where(LedgerTransaction.kind == "expiration")
    assert sorted(entry.amount_minor for entry in expiration.entries) == [-300, 300]
    assert ledger.balance(customer.id, "RUB") == 200
    assert commerce_maintenance.maintain().bonuses_expired == 0


def test_saved_carts_past_their_expiry_that_never_became_an_order_are_dropped(database):
    customer = commerce.customer()
    now = utcnow()
    order = create_order(customer.id, "purchase", "RUB", plan_id=rub_plan().id, provider="yookassa")
    abandoned = BotCheckoutSession.create(chat_id=1, customer=customer, expires_at=now - MINUTE)
    ordered = BotCheckoutSession.create(chat_id=1, customer=customer, expires_at=now - MINUTE, order=order)
    open_cart = BotCheckoutSession.create(chat_id=1, customer=customer, expires_at=now + 10 * MINUTE)

    assert commerce_maintenance.maintain().carts_dropped == 1
    assert {cart.id for cart in BotCheckoutSession.select()} == {ordered.id, open_cart.id}
    assert BotCheckoutSession.get_or_none(BotCheckoutSession.id == abandoned.id) is None


def test_order_expiry_works_in_bounded_batches_and_a_run_asked_to_stop_leaves_the_rest(database, monkeypatch):
    customer, plan = commerce.customer(), rub_plan()
    overdue = [pending_order(customer, plan, -(10 - n) * MINUTE) for n in range(5)]
    monkeypatch.setattr(commerce_maintenance, "ORDER_BATCH", 2)
    monkeypatch.setattr(
        commerce_maintenance, "should_stop", lambda: Order.select().where(Order.status == "expired").exists()
    )

    done = commerce_maintenance.maintain()

    assert (done.orders_expired, done.stopped) == (2, True)
    expired = [order.id for order in Order.select().where(Order.status == "expired").order_by(Order.id)]
    assert expired == [overdue[0].id, overdue[1].id]  # the longest overdue first
    monkeypatch.undo()
    monkeypatch.setattr(commerce_maintenance, "MAX_BATCHES", 1)
    monkeypatch.setattr(commerce_maintenance, "ORDER_BATCH", 2)
    assert commerce_maintenance.maintain().orders_expired == 2  # one batch per run, at most
    assert commerce_maintenance.maintain().orders_expired == 1


def test_commerce_maintenance_runs_as_a_periodic_job(database):
    order = pending_order(commerce.customer(), rub_plan(), -MINUTE)
    job_id = insert("periodic_task", {"task": commerce_maintenance.NAME}).job_id
    assert run_next() == job_id
    assert Job.get_by_id(job_id).state == "completed"
    assert Order.get_by_id(order.id).status == "expired"


def test_a_payment_the_provider_held_a_day_past_without_an_answer_is_no_longer_asked_about(database):
    customer, plan = commerce.customer(), rub_plan()
    overdue = pending_order(customer, plan, -MINUTE)
    old, recent = intent(overdue, "pending", 1), intent(overdue, "pending", 2)
    day_ago = utcnow() - commerce_maintenance.LATE_POLL_WINDOW - MINUTE
    PaymentIntent.update(created_at=day_ago).where(PaymentIntent.id == old.id).execute()

    done = commerce_maintenance.maintain()

    assert done.intents_expired == 1
    assert [PaymentIntent.get_by_id(i.id).status for i in (old, recent)] == ["expired", "pending"]
