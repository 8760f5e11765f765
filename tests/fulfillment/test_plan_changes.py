"""SPEC 13.9, 2.12: an upgrade applies now with the unused part of the period credited and the
traffic reset; a downgrade waits for the period's end through its create's effectiveAt, the job
snoozing until then (the fake Remnawave panel, a real server)."""

import datetime
import time

import pytest

from commerce import ledger, phase
from commerce.catalogue import plan_prices
from commerce.settlement import settle_order
from fulfillment.desired_state import DesiredState
from models.base import utcnow
from models.commerce import Order
from models.fulfillment import Entitlement, FulfillmentOperation
from models.jobs import Job
from models.ledger import LedgerTransaction
from tests.support import commerce
from tests.support.direct import make_due, run_next

pytestmark = pytest.mark.usefixtures("ledger_invariant")

DAY = datetime.timedelta(days=1)


def plan(code, price, devices=3):
    """A 30-day plan at `price` US cents."""
    created = commerce.priced_plan(code, prices={"USD": price})
    created.device_limit = devices
    created.save()
    return created


def settle(plan_, customer, kind="purchase", subscription=None, amount=None):
    price = plan_prices(plan_)["USD"]
    order = commerce.order(customer, plan_, kind, subscription, amount=price if amount is None else amount)
    return settle_order(order.id, "provider_webhook")


def run(operation_id):
    jobs = Job.select().where(Job.kind == "fulfillment").order_by(Job.id.desc())
    job = next(j for j in jobs if j.args_dict["operationId"] == operation_id)
    make_due(job.id)
    assert run_next() == job.id
    return Job.get_by_id(job.id)


def first_period(panel, price=1000, ends_in=15 * DAY + datetime.timedelta(seconds=31)):
    """A provisioned period bought for `price`, with `ends_in` of it left."""
    customer = commerce.customer()
    bought = settle(plan("basic", price), customer)
    run(bought.operation_id)
    ends_at = (utcnow() + ends_in).replace(microsecond=0)
    Entitlement.update(ends_at=ends_at).where(Entitlement.id == bought.entitlement_id).execute()
    return customer, bought, Entitlement.get_by_id(bought.entitlement_id).subscription


def test_an_upgrade_credits_the_unused_half_of_the_period_to_the_wallet_rounded_down(panel):
    customer, bought, subscription = first_period(panel)  # 1000 cents for 30 days, 15 days and 30 s left

    upgrade = settle(plan("premium", 3000, devices=5), customer, "upgrade", subscription)

    # 1 296 030 s × 1000 / 2 592 000 s = 500.01… → 500
    assert ledger.balance(customer.id, "USD") == 500
    credit = LedgerTransaction.get(LedgerTransaction.kind == "proration_credit")
    assert (credit.order_id, credit.idempotency_key) == (
        upgrade.order_id,
        f"order:{upgrade.order_id}:proration:{bought.entitlement_id}",
    )
    create = FulfillmentOperation.get_by_id(upgrade.operation_id)
    assert DesiredState.parse(create.desired_state).reset_traffic is True
    assert settle_order(upgrade.order_id, "provider_webhook").already_settled
    assert ledger.balance(customer.id, "USD") == 500  # settling again credits nothing more


def test_an_upgrade_credits_no_more_than_the_period_was_paid(panel):
    customer = commerce.customer()
    bought = settle(plan("basic", 1000), customer, amount=100)  # bought at a 90 % discount
    subscription = Entitlement.get_by_id(bought.entitlement_id).subscription

    settle(plan("premium", 3000), customer, "upgrade", subscription)

    assert 0 < ledger.balance(customer.id, "USD") <= 100


def test_an_upgrade_from_a_free_period_credits_nothing(panel):
    customer = commerce.customer()
    bought = settle(plan("basic", 1000), customer, amount=0)
    subscription = Entitlement.get_by_id(bought.entitlement_id).subscription

    settle(plan("premium", 3000), customer, "upgrade", subscription)

    assert ledger.balance(customer.id, "USD") == 0
    assert not LedgerTransaction.select().where(LedgerTransaction.kind == "proration_credit").exists()


def test_a_downgrade_waits_for_the_period_end_and_then_applies_without_a_reset(panel):
    customer, bought, subscription = first_period(panel, ends_in=datetime.timedelta(seconds=3))
    ends_at = Entitlement.get_by_id(bought.entitlement_id).ends_at
    username = subscription.remote_username

    downgrade = settle(plan("small", 500, devices=1), customer, "downgrade", subscription)

    period = Entitlement.get_by_id(downgrade.entitlement_id)
    assert period.starts_at == ends_at
    desired = DesiredState.parse(FulfillmentOperation.get_by_id(downgrade.operation_id).desired_state)
    assert (desired.effective_at, desired.reset_traffic) == (ends_at, False)
    assert ledger.balance(customer.id, "USD") == 0  # a downgrade credits nothing
    assert phase.standings([subscription.id])[subscription.id].entitlement.id == bought.entitlement_id

    early = run(downgrade.operation_id)  # run before its time: snoozed, no attempt spent
    assert (early.state, early.attempt) == ("scheduled", 0)
    assert panel.user(username)["hwidDeviceLimit"] == 3

    while utcnow() < ends_at:
        time.sleep(0.1)
    done = run(downgrade.operation_id)
    assert done.state == "completed"
    assert panel.user(username)["hwidDeviceLimit"] == 1
    assert phase.standings([subscription.id])[subscription.id].entitlement.id == downgrade.entitlement_id


def test_a_purchase_superseded_before_it_reached_the_panel_is_fulfilled_by_the_period_continuing_it(panel):
    """An extension settled while the purchase still waited for the worker, and the worker ran the
    extension's create first: it makes the user and supersedes the purchase's period, whose create
    is then cancelled and never records. Both orders end fulfilled: nothing paid stays `paid`
    with what it bought delivered."""
    customer = commerce.customer()
    basic = plan("basic", 1000)
    bought = settle(basic, customer)
    subscription = Entitlement.get_by_id(bought.entitlement_id).subscription
    extended = settle(basic, customer, "extension", subscription)

    run(extended.operation_id)
    run(bought.operation_id)

    assert FulfillmentOperation.get_by_id(extended.operation_id).status == "succeeded"
    cancelled = FulfillmentOperation.get_by_id(bought.operation_id)
    assert (cancelled.status, cancelled.last_error_code) == ("cancelled", "entitlement_superseded")
    assert [Order.get_by_id(o).status for o in (bought.order_id, extended.order_id)] == ["fulfilled", "fulfilled"]
    (user,) = panel.users()
    assert user["expireAt"].startswith(
        Entitlement.get_by_id(extended.entitlement_id).ends_at.isoformat(timespec="seconds")
    )


def test_a_period_is_credited_once_however_many_upgrades_follow_before_the_worker_applies_one(panel):
    customer, bought, subscription = first_period(panel)  # 1000 cents, half of it unused: 500 credited
    premium = plan("premium", 3000, devices=5)

    first = settle(premium, customer, "upgrade", subscription)
    assert ledger.balance(customer.id, "USD") == 500
    second = settle(premium, customer, "upgrade", subscription)  # the first one's create has not run

    credits = list(LedgerTransaction.select().where(LedgerTransaction.kind == "proration_credit"))
    keys = sorted(credit.idempotency_key for credit in credits)
    # The original period once; the first upgrade's own period (not yet started on the panel) once.
    assert keys == sorted([
        f"order:{first.order_id}:proration:{bought.entitlement_id}",
        f"order:{second.order_id}:proration:{first.entitlement_id}",
    ])  # fmt: skip
    assert ledger.balance(customer.id, "USD") <= 500 + 3000


def test_a_fully_refunded_upgrade_takes_its_credit_back_and_the_replaced_period_stays(panel):
    from commerce.refunds import refund_order

    customer, bought, subscription = first_period(panel)
    upgrade = settle(plan("premium", 3000, devices=5), customer, "upgrade", subscription)
    assert ledger.balance(customer.id, "USD") == 500

    refund_order(upgrade.order_id, to="wallet")  # before the worker ran its create

    assert ledger.balance(customer.id, "USD") == 3000  # the upgrade's price back; the credit taken back
    run(upgrade.operation_id)
    assert FulfillmentOperation.get_by_id(upgrade.operation_id).status == "cancelled"
    assert Entitlement.get_by_id(bought.entitlement_id).status == "active"  # the period it would have replaced


def test_an_upgrade_refund_is_refused_when_the_wallet_spent_its_credit_and_nothing_is_written(panel):
    from commerce.refunds import refund_order
    from commerce.settlement import SettlementRejected

    customer, bought, subscription = first_period(panel)
    upgrade = settle(plan("premium", 3000, devices=5), customer, "upgrade", subscription)
    spend = commerce.order(customer, plan("addon-like", 500), "purchase", amount=500)
    settle_order(spend.id, "wallet")  # the 500 credit spent
    before = LedgerTransaction.select().count()

    with pytest.raises(SettlementRejected) as refused:
        refund_order(upgrade.order_id)

    assert refused.value.code == "refund_exceeds_wallet"
    assert LedgerTransaction.select().count() == before
    assert Order.get_by_id(upgrade.order_id).status == "paid"


def test_a_period_credited_by_an_upgrade_is_refunded_at_most_what_was_paid_less_the_credit(panel):
    from commerce.refunds import refund_order

    customer, bought, subscription = first_period(panel)  # paid 1000
    settle(plan("premium", 3000, devices=5), customer, "upgrade", subscription)  # 500 credited for it

    refunded = refund_order(bought.order_id, to="wallet")

    assert (refunded.status, refunded.refunded_amount_minor) == ("refunded", 500)
    assert ledger.balance(customer.id, "USD") == 1000  # 500 credit + 500 refund: never more than paid
