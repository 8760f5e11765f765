"""SPEC 2.2, 8.1, 13.2, 13.3: every way of paying settles through one function, which books the
ledger movement in the same transaction as the order, what it bought, the event and the notice."""

import json

import pytest

from commerce import ledger
from commerce.orders import create_order
from commerce.settlement import SettlementRejected, settle_order
from fulfillment.desired_state import DesiredState
from jobs.fulfillment import settled_order
from models.base import db
from models.catalogue import TrialActivation
from models.commerce import Order, Subscription
from models.fulfillment import Entitlement, FulfillmentOperation
from models.jobs import Job
from models.ledger import LedgerEntry, LedgerTransaction
from models.ops import OperatorNotice, OutboxEvent
from tests.support import commerce
from tests.support.shop import addon, fulfil, rub_plan

pytestmark = pytest.mark.usefixtures("ledger_invariant")


def written():
    return {
        "ledger": LedgerTransaction.select().count(),
        "entries": LedgerEntry.select().count(),
        "entitlements": Entitlement.select().count(),
        "operations": FulfillmentOperation.select().count(),
        "jobs": Job.select().count(),
        "events": OutboxEvent.select().count(),
        "notices": OperatorNotice.select().count(),
    }


def legs(order_id):
    """{account name: amount} of the order's ledger movements."""
    rows = (
        LedgerEntry.select(LedgerEntry, LedgerTransaction)
        .join(LedgerTransaction)
        .where(LedgerTransaction.order == order_id)
    )
    return {entry.account.name: entry.amount_minor for entry in rows}


def topped_up(customer, amount, currency="RUB"):
    order = create_order(customer.id, "topup", currency, amount_minor=amount, provider="cryptobot")
    settle_order(order.id, "provider_webhook")
    return order


def purchase(customer, plan, currency="RUB", provider=None):
    return create_order(customer.id, "purchase", currency, plan_id=plan.id, provider=provider)


def test_a_provider_payment_moves_clearing_to_revenue_with_the_settlement(database):
    customer = commerce.customer()
    order = purchase(customer, rub_plan(), provider="yookassa")
    settle_order(order.id, "provider_webhook")
    assert legs(order.id) == {"provider_clearing:yookassa": -19900, "revenue": 19900}
    settled = Order.get_by_id(order.id)
    assert (settled.status, settled.expires_at, settled.paid_at is not None) == ("paid", None, True)
    assert written() == {"ledger": 1, "entries": 2, "entitlements": 1, "operations": 1, "jobs": 1, "events": 1,
                         "notices": 1}  # fmt: skip


def test_a_settlement_replayed_writes_nothing(database):
    order = purchase(commerce.customer(), rub_plan(), provider="yookassa")
    first = settle_order(order.id, "provider_webhook")
    before = written()
    for settled_by in ("provider_webhook", "provider_poll", "wallet"):
        again = settle_order(order.id, settled_by)
        assert again.already_settled and (again.entitlement_id, again.operation_id) == (
            first.entitlement_id,
            first.operation_id,
        )
    assert written() == before


def test_a_settlement_rolled_back_takes_its_ledger_movement_with_it(database):
    order = purchase(commerce.customer(), rub_plan(), provider="yookassa")
    with pytest.raises(RuntimeError):
        with db.atomic():
            settle_order(order.id, "provider_webhook")
            raise RuntimeError("the caller's transaction failed afterwards")
    assert all(count == 0 for count in written().values())
    assert Order.get_by_id(order.id).status == "pending"


@pytest.mark.parametrize(
    "kind, currency, provider, settled_by, receipt",
    [("purchase", "XTR", "stars", "stars", "payment_received"),
     ("purchase", "RUB", None, "wallet", "paid_from_wallet"),
     ("gift", "XTR", "stars", "stars", "gift_payment_received"),
     ("gift", "RUB", None, "wallet", "gift_paid_from_wallet")],
)  # fmt: skip
def test_a_payment_in_the_chat_writes_its_receipt_in_the_settling_transaction(
    database, kind, currency, provider, settled_by, receipt
):
    """The receipt is a customer notice of the settlement: rolled back with it, written once with it."""
    from models.ops import CustomerNotice
    from tests.support import sales

    customer, plan = sales.customer(), rub_plan()
    topped_up(customer, 50000)
    CustomerNotice.delete().execute()  # the top-up's own notice
    order = create_order(customer.id, kind, currency, plan_id=plan.id, provider=provider)
    with pytest.raises(RuntimeError):
        with db.atomic():
            settle_order(order.id, settled_by)
            assert CustomerNotice.select().where(CustomerNotice.kind == receipt).count() == 1
            raise RuntimeError("the settling transaction failed afterwards")
    assert CustomerNotice.select().count() == 0 and Order.get_by_id(order.id).status == "pending"
    settle_order(order.id, settled_by)
    settle_order(order.id, settled_by)  # a replay writes no second receipt
    (notice,) = CustomerNotice.select().where(CustomerNotice.kind == receipt)
    assert (notice.customer_id, notice.dedupe_key, notice.status) == (customer.id, f"order:{order.id}", "pending")
    assert json.loads(notice.payload) == {"orderId": order.id, "planId": plan.id,
                                          "amountMinor": order.amount_minor, "currency": currency}  # fmt: skip


def test_a_wallet_purchase_with_funds_is_paid_from_the_wallet(database):
    customer = commerce.customer()
    topped_up(customer, 25000)
    order = purchase(customer, rub_plan())
    settle_order(order.id, "wallet")
    assert legs(order.id) == {f"customer_wallet:{customer.id}": -19900, "revenue": 19900}
    assert ledger.balance(customer.id, "RUB") == 25000 - 19900
    assert Order.get_by_id(order.id).settled_by == "wallet"


def test_a_wallet_purchase_without_funds_is_refused_and_writes_nothing(database):
    customer = commerce.customer()
    topped_up(customer, 19899)
    before = written()
    order = purchase(customer, rub_plan())
    with pytest.raises(SettlementRejected) as refused:
        settle_order(order.id, "wallet")
    assert refused.value.code == ledger.INSUFFICIENT_FUNDS
    assert written() == before
    assert Order.get_by_id(order.id).status == "pending" and ledger.balance(customer.id, "RUB") == 19899


def test_a_renewal_is_charged_from_the_wallet_as_a_renewal(database):
    customer, plan = commerce.customer(), rub_plan()
    topped_up(customer, 50000)
    first = settle_order(purchase(customer, plan).id, "wallet")
    subscription = Entitlement.get_by_id(first.entitlement_id).subscription_id
    renewal = create_order(customer.id, "renewal", "RUB", plan_id=plan.id, subscription_id=subscription)
    settle_order(renewal.id, "renewal")
    assert LedgerTransaction.get(LedgerTransaction.order == renewal.id).kind == "renewal"
    assert ledger.balance(customer.id, "RUB") == 50000 - 2 * 19900


def test_a_topup_credits_the_wallet_with_wallet_credited_and_no_entitlement(database):
    customer = commerce.customer()
    order = topped_up(customer, 30000)
    assert legs(order.id) == {"provider_clearing:cryptobot": -30000, f"customer_wallet:{customer.id}": 30000}
    settled = Order.get_by_id(order.id)
    assert (settled.status, settled.fulfilled_at is not None, settled.expires_at) == ("fulfilled", True, None)
    event = OutboxEvent.get()
    assert event.topic == "wallet.credited"
    assert json.loads(event.payload) == {"orderId": order.id, "customerId": customer.id, "amountMinor": 30000,
                                         "currency": "RUB", "balanceMinor": 30000}  # fmt: skip
    assert (Entitlement.select().count(), FulfillmentOperation.select().count(), Job.select().count()) == (0, 0, 0)
    assert settle_order(order.id, "provider_webhook").already_settled and ledger.balance(customer.id, "RUB") == 30000


def test_a_topup_cannot_be_paid_from_the_wallet_it_fills(database):
    customer = commerce.customer()
    order = create_order(customer.id, "topup", "RUB", amount_minor=100)
    with pytest.raises(SettlementRejected) as refused:
        settle_order(order.id, "wallet")
    assert refused.value.code == ledger.NOT_CHARGEABLE and written()["ledger"] == 0


def test_gift_code_and_trial_settle_free_orders_without_moving_money_and_refuse_priced_ones(database):
    customer, plan = commerce.customer(), rub_plan()
    trial_plan = commerce.priced_plan("trial", prices={"RUB": 0}, trial=True)
    trial = create_order(customer.id, "trial", "RUB", plan_id=trial_plan.id)
    settle_order(trial.id, "trial")
    assert TrialActivation.get().order_id == trial.id
    for kind in ("gift", "code"):
        free = commerce.order(customer, plan, operation=kind, amount=0, provider=None)
        settle_order(free.id, kind)
    assert written()["ledger"] == 0 and Entitlement.select().count() == 3
    priced = commerce.order(customer, plan, operation="gift", provider=None)
    with pytest.raises(SettlementRejected) as refused:
        settle_order(priced.id, "gift")
    assert refused.value.code == "order_not_free" and Order.get_by_id(priced.id).status == "pending"


def test_the_database_refuses_a_second_trial_at_settlement(database):
    customer = commerce.customer()
    trial_plan = commerce.priced_plan("trial", prices={"RUB": 0}, trial=True)
    first = create_order(customer.id, "trial", "RUB", plan_id=trial_plan.id)
    second = create_order(customer.id, "trial", "RUB", plan_id=trial_plan.id)  # both before either settled
    settle_order(first.id, "trial")
    with pytest.raises(SettlementRejected) as refused:
        settle_order(second.id, "trial")
    assert refused.value.code == "trial_already_used" and Entitlement.select().count() == 1


def test_a_provider_payment_settles_an_order_that_expired_while_it_was_being_paid(database):
    order = purchase(commerce.customer(), rub_plan(), provider="yookassa")
    Order.update(status="expired", expires_at=None).where(Order.id == order.id).execute()
    with pytest.raises(SettlementRejected):
        settle_order(order.id, "wallet")
    settle_order(order.id, "provider_poll")
    assert Order.get_by_id(order.id).status == "paid"


def test_a_provider_payment_without_a_provider_is_refused(database):
    order = purchase(commerce.customer(), rub_plan())
    with pytest.raises(SettlementRejected) as refused:
        settle_order(order.id, "provider_webhook")
    assert refused.value.code == "provider_required" and written()["ledger"] == 0


# -- add-ons --------------------------------------------------------------------------------------


def provisioned(customer, plan):
    """A paid purchase whose user the worker made on the fake panel."""
    settlement = settle_order(purchase(customer, plan, provider="yookassa").id, "provider_webhook")
    fulfil()
    return Entitlement.get_by_id(settlement.entitlement_id)


def test_an_addon_changes_the_limits_of_the_current_entitlement_and_never_supersedes_it(shop):
    customer, plan = commerce.customer(), rub_plan(devices=3, traffic=100 * commerce.GIB)
    entitlement = provisioned(customer, plan)
    extra = addon(devices=2, traffic=10 * commerce.GIB)
    order = create_order(
        customer.id, "addon", "RUB", addon_id=extra.id, subscription_id=entitlement.subscription_id, provider="yookassa"
    )
    settlement = settle_order(order.id, "provider_webhook")
    assert settlement.entitlement_id == entitlement.id
    operation = FulfillmentOperation.get_by_id(settlement.operation_id)
    assert (operation.operation, operation.idempotency_key) == ("set_limits", f"order:{order.id}:addon")
    assert settled_order(operation.correlation_id) == order.id
    assert [e.topic for e in OutboxEvent.select().order_by(OutboxEvent.id)] == ["order.paid", "addon.purchased"]
    assert Entitlement.select().count() == 1
    assert legs(order.id) == {"provider_clearing:yookassa": -9900, "revenue": 9900}

    fulfil()
    after = Entitlement.get_by_id(entitlement.id)
    assert after.status == "active" and (after.device_limit, after.traffic_allowance_bytes) == (5, 110 * commerce.GIB)
    user = shop.panel.user(after.subscription.remote_username)
    assert (user["hwidDeviceLimit"], user["trafficLimitBytes"]) == (5, 110 * commerce.GIB)
    assert Order.get_by_id(order.id).status == "fulfilled"
    assert Order.get_by_id(entitlement.order_id).status == "fulfilled"


def test_two_addons_bought_before_either_is_applied_add_up(shop):
    customer = commerce.customer()
    entitlement = provisioned(customer, rub_plan(devices=3))
    extra = addon(devices=1)
    for _ in range(2):
        order = create_order(
            customer.id, "addon", "RUB", addon_id=extra.id, subscription_id=entitlement.subscription_id,
            provider="yookassa",
        )  # fmt: skip
        settle_order(order.id, "provider_webhook")
    newest = FulfillmentOperation.select().order_by(FulfillmentOperation.id.desc()).first()
    assert DesiredState.parse(newest.desired_state).device_limit == 5
    fulfil()
    assert Entitlement.get_by_id(entitlement.id).device_limit == 5


def test_an_addon_onto_an_unlimited_limit_keeps_it_unlimited(database):
    customer = commerce.customer()
    plan = rub_plan(devices=None, traffic=None)
    settlement = settle_order(purchase(customer, plan, provider="yookassa").id, "provider_webhook")
    subscription = Entitlement.get_by_id(settlement.entitlement_id).subscription_id
    order = create_order(customer.id, "addon", "RUB", addon_id=addon().id, subscription_id=subscription)
    added = settle_order(order.id, "provider_webhook", provider="yookassa")
    desired = DesiredState.parse(FulfillmentOperation.get_by_id(added.operation_id).desired_state)
    assert (desired.device_limit, desired.traffic_allowance_bytes) == (None, None)


def test_an_addon_for_a_subscription_with_no_period_is_refused_and_writes_nothing(database):
    customer = commerce.customer()
    subscription = Subscription.create(customer=customer, slot=1)
    order = create_order(customer.id, "addon", "RUB", addon_id=addon().id, subscription_id=subscription.id)
    with pytest.raises(SettlementRejected) as refused:
        settle_order(order.id, "provider_webhook", provider="yookassa")
    assert refused.value.code == "no_current_entitlement" and written()["ledger"] == 0


def test_an_addon_bought_while_a_downgrade_waits_goes_onto_the_period_in_use_now(shop):
    customer = commerce.customer()
    current = provisioned(customer, rub_plan(devices=3))
    small = rub_plan(code="small", price=9900, devices=1)
    downgrade = create_order(
        customer.id, "downgrade", "RUB", plan_id=small.id, subscription_id=current.subscription_id, provider="yookassa"
    )
    waiting = settle_order(downgrade.id, "provider_webhook")  # starts at the current period's end
    order = create_order(
        customer.id, "addon", "RUB", addon_id=addon(devices=2).id, subscription_id=current.subscription_id,
        provider="yookassa",
    )  # fmt: skip

    settlement = settle_order(order.id, "provider_webhook")

    assert settlement.entitlement_id == current.id != waiting.entitlement_id
    fulfil()
    user = shop.panel.user(Entitlement.get_by_id(current.id).subscription.remote_username)
    assert user["hwidDeviceLimit"] == 5  # now, not from the downgrade's start
    assert Order.get_by_id(order.id).status == "fulfilled"
