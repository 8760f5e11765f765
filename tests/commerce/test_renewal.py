"""SPEC 13.8, 14.6, 5.1: the renewal pass charges the wallet for auto-renewing subscriptions whose
period ends within a day, once per period however many runs meet it; a wallet that cannot pay is
charged nothing and its customer gets one dunning notice per period."""

import datetime
import json
import threading

import pytest

from commerce import ledger
from commerce.orders import create_order
from commerce.passes import renewal
from commerce.refunds import refund_order
from commerce.settlement import settle_order
from fulfillment.desired_state import DesiredState
from jobs import insert
from models.base import db, utcnow
from models.commerce import Customer, Order, Plan, Subscription
from models.fulfillment import Entitlement, FulfillmentOperation
from models.jobs import Job
from models.ledger import LedgerTransaction
from models.ops import CustomerNotice, OperatorNotice
from tests.support.direct import run_next
from tests.support.shop import rub_plan

pytestmark = pytest.mark.usefixtures("ledger_invariant")

PRICE = 19900  # rub_plan's price in RUB
HOUR = datetime.timedelta(hours=1)


def topped_up(customer, amount):
    order = create_order(customer.id, "topup", "RUB", amount_minor=amount, provider="cryptobot")
    settle_order(order.id, "provider_webhook")


def monthly():
    return Plan.get_or_none(Plan.code == "monthly") or rub_plan("monthly")


def subscribed(ends_in=2 * HOUR, funds=0, auto_renew=True, name="Alice"):
    """A customer whose subscription's paid period ends `ends_in` from now; returns its entitlement."""
    customer = Customer.create(display_name=name)
    order = create_order(customer.id, "purchase", "RUB", plan_id=monthly().id, provider="yookassa")
    settlement = settle_order(order.id, "provider_webhook")
    ends_at = utcnow().replace(microsecond=0) + ends_in
    Entitlement.update(status="active", ends_at=ends_at, starts_at=ends_at - 30 * 24 * HOUR).where(
        Entitlement.id == settlement.entitlement_id
    ).execute()
    entitlement = Entitlement.get_by_id(settlement.entitlement_id)
    Subscription.update(auto_renew=auto_renew).where(Subscription.id == entitlement.subscription_id).execute()
    if funds:
        topped_up(customer, funds)
    return entitlement


def renewal_key(entitlement):
    return f"renewal:{entitlement.subscription_id}:{entitlement.ends_at.isoformat(timespec='seconds')}Z"


def renewal_orders():
    return list(Order.select().where(Order.operation == "renewal"))


def dunning_notices():
    return list(CustomerNotice.select().where(CustomerNotice.kind == renewal.NOTICE_DUNNING))


def test_a_due_renewal_with_funds_is_charged_once_and_continues_the_period(database):
    period = subscribed(funds=3 * PRICE)
    assert renewal.run()[renewal.RENEWED] == 1

    [order] = renewal_orders()
    assert (order.idempotency_key, order.status, order.settled_by) == (renewal_key(period), "paid", "renewal")
    assert (order.amount_minor, order.currency, order.subscription_id) == (PRICE, "RUB", period.subscription_id)
    assert ledger.balance(period.subscription.customer_id, "RUB") == 2 * PRICE
    assert LedgerTransaction.select().where(LedgerTransaction.kind == "renewal").count() == 1
    renewed = Entitlement.get(Entitlement.order == order.id)
    assert (renewed.starts_at, renewed.ends_at) == (period.ends_at, period.ends_at + 30 * 24 * HOUR)
    create = FulfillmentOperation.get(FulfillmentOperation.entitlement == renewed)
    assert DesiredState.parse(create.desired_state).reset_traffic is True
    assert create.id in [job.args_dict["operationId"] for job in Job.select().where(Job.kind == "fulfillment")]

    assert renewal.run() == {outcome: 0 for outcome in renewal.OUTCOMES}  # the next period is not due
    assert len(renewal_orders()) == 1 and dunning_notices() == []


def test_two_runs_at_once_charge_a_due_renewal_once(database, monkeypatch):
    period = subscribed(funds=3 * PRICE)
    both_chose = threading.Barrier(2)
    choose = renewal.due_periods

    def chosen_together(*args, **kwargs):
        due = choose(*args, **kwargs)
        if due:
            both_chose.wait(timeout=10)  # each run holds the period before either renews it
        return due

    monkeypatch.setattr(renewal, "due_periods", chosen_together)
    results, errors = [], []

    def run():
        try:
            results.append(renewal.run())
        except Exception as error:  # surfaced below
            errors.append(error)
        finally:
            db.close()

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == []
    assert sorted((r[renewal.RENEWED], r[renewal.ALREADY_RENEWED]) for r in results) == [(0, 1), (1, 0)]
    assert len(renewal_orders()) == 1
    assert LedgerTransaction.select().where(LedgerTransaction.kind == "renewal").count() == 1
    assert ledger.balance(period.subscription.customer_id, "RUB") == 2 * PRICE
    assert Entitlement.select().where(Entitlement.subscription == period.subscription_id).count() == 2


def test_without_funds_nothing_is_charged_and_the_customer_is_dunned_once_per_period(database):
    period = subscribed(funds=PRICE - 1)
    orders_before, ledger_before = Order.select().count(), LedgerTransaction.select().count()
    for _ in range(3):
        assert renewal.run()[renewal.INSUFFICIENT_FUNDS] == 1

    assert (Order.select().count(), LedgerTransaction.select().count()) == (orders_before, ledger_before)
    assert ledger.balance(period.subscription.customer_id, "RUB") == PRICE - 1
    [notice] = dunning_notices()
    assert (notice.customer_id, notice.sent_at) == (period.subscription.customer_id, None)
    assert notice.dedupe_key == renewal_key(period).removeprefix("renewal:")
    payload = json.loads(notice.payload)
    assert (payload["subscriptionId"], payload["amountMinor"], payload["currency"]) == (
        period.subscription_id, PRICE, "RUB",
    )  # fmt: skip

    # An operator extends the period by a few hours: a new period end, a new notice once.
    Entitlement.update(ends_at=period.ends_at + 6 * HOUR).where(Entitlement.id == period.id).execute()
    renewal.run()
    renewal.run()
    assert len(dunning_notices()) == 2


def test_a_wallet_holding_only_expired_bonus_is_refused_inside_the_transaction_and_nothing_is_kept(database):
    period = subscribed()
    with db.atomic():  # the balance covers the price, but none of it may be spent
        ledger.grant_bonus(period.subscription.customer_id, PRICE, "RUB", utcnow() - HOUR)
    orders_before = Order.select().count()

    assert renewal.run()[renewal.INSUFFICIENT_FUNDS] == 1
    assert Order.select().count() == orders_before and renewal_orders() == []
    assert Entitlement.select().where(Entitlement.subscription == period.subscription_id).count() == 1
    assert len(dunning_notices()) == 1


def test_a_top_up_after_the_dunning_notice_renews_on_the_next_run(database):
    period = subscribed()
    assert renewal.run()[renewal.INSUFFICIENT_FUNDS] == 1
    topped_up(period.subscription.customer, PRICE)
    assert renewal.run()[renewal.RENEWED] == 1
    assert ledger.balance(period.subscription.customer_id, "RUB") == 0
    assert len(dunning_notices()) == 1


def test_only_due_auto_renewing_unpaused_current_periods_are_renewed(database):
    due = subscribed(ends_in=23 * HOUR, funds=PRICE, name="due")
    lapsed_today = subscribed(ends_in=-2 * HOUR, funds=PRICE, name="lapsed today")
    later = subscribed(ends_in=25 * HOUR, funds=PRICE, name="later")
    lapsed_long_ago = subscribed(ends_in=-25 * HOUR, funds=PRICE, name="lapsed long ago")
    manual = subscribed(funds=PRICE, auto_renew=False, name="manual")
    paused = subscribed(funds=PRICE, name="paused")  # as a pause writes it (fulfillment/changes.py)
    Entitlement.update(status="paused", paused_at=utcnow() - HOUR).where(Entitlement.id == paused.id).execute()
    carried = subscribed(funds=PRICE, name="carried")  # a period bought while paused carries the pause
    Entitlement.update(status="pending", paused_at=utcnow() - HOUR).where(Entitlement.id == carried.id).execute()
    refunded = subscribed(funds=PRICE, name="refunded")
    refund_order(refunded.order_id)
    superseded = subscribed(funds=PRICE, name="upgraded")  # a newer period ends later
    newer = settle_order(
        create_order(superseded.subscription.customer_id, "purchase", "RUB", plan_id=superseded.plan_id,
                     subscription_id=superseded.subscription_id, provider="yookassa").id,
        "provider_webhook",
    )  # fmt: skip
    assert Entitlement.get_by_id(newer.entitlement_id).ends_at > superseded.ends_at

    assert renewal.run()[renewal.RENEWED] == 2
    renewed = {order.subscription_id for order in renewal_orders()}
    assert renewed == {due.subscription_id, lapsed_today.subscription_id}
    for left in (later, lapsed_long_ago, manual, paused, carried, refunded, superseded):
        assert ledger.balance(left.subscription.customer_id, "RUB") == PRICE
    # The lapsed period is renewed from now, not from its past end.
    [lapsed] = Entitlement.select().where(
        Entitlement.subscription == lapsed_today.subscription_id, Entitlement.id != lapsed_today.id
    )
    assert lapsed.starts_at >= lapsed_today.ends_at + HOUR


def test_a_renewal_refused_for_another_reason_is_one_operator_notice_per_period(database):
    period = subscribed(funds=PRICE)
    Customer.update(blocked=True).where(Customer.id == period.subscription.customer_id).execute()
    for _ in range(2):
        assert renewal.run()[renewal.REFUSED] == 1
    [notice] = OperatorNotice.select().where(OperatorNotice.kind == renewal.NOTICE_RENEWAL_REFUSED)
    assert json.loads(notice.payload)["code"] == "customer_blocked"
    assert renewal_orders() == [] and ledger.balance(period.subscription.customer_id, "RUB") == PRICE


def test_a_run_walks_past_periods_the_wallet_cannot_pay_in_batches(database, monkeypatch):
    short = [subscribed(ends_in=HOUR + n * datetime.timedelta(minutes=1), name=f"short {n}") for n in range(3)]
    funded = [subscribed(ends_in=2 * HOUR + n * datetime.timedelta(minutes=1), funds=PRICE, name=f"funded {n}")
              for n in range(2)]  # fmt: skip
    monkeypatch.setattr(renewal, "BATCH", 2)
    batches, choose = [], renewal.due_periods
    monkeypatch.setattr(renewal, "due_periods", lambda *args: batches.append(choose(*args)) or batches[-1])
    assert renewal.run() == {renewal.RENEWED: 2, renewal.ALREADY_RENEWED: 0, renewal.INSUFFICIENT_FUNDS: 3,
                             renewal.REFUSED: 0}  # fmt: skip
    assert [len(batch) for batch in batches] == [2, 2, 1]  # the short wallets first, earliest end first
    assert {order.subscription_id for order in renewal_orders()} == {period.subscription_id for period in funded}
    assert len(dunning_notices()) == len(short)


def test_a_run_asked_to_stop_returns_between_subscriptions_and_the_next_run_goes_on(database, monkeypatch):
    for n in range(3):
        subscribed(ends_in=HOUR + n * datetime.timedelta(minutes=1), funds=PRICE, name=f"customer {n}")
    monkeypatch.setattr(renewal, "should_stop", lambda: Order.select().where(Order.operation == "renewal").exists())
    assert renewal.run()[renewal.RENEWED] == 1
    monkeypatch.undo()
    assert renewal.run()[renewal.RENEWED] == 2


def test_the_renewal_pass_runs_as_a_periodic_job(database):
    subscribed(funds=PRICE)
    Job.delete().execute()  # the purchase's own fulfillment job is not this test's
    job_id = insert("periodic_task", {"task": renewal.NAME}).job_id
    assert run_next() == job_id
    assert Job.get_by_id(job_id).state == "completed"
    assert len(renewal_orders()) == 1
