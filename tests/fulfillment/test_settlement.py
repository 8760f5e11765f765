"""SPEC 2.2, 2.8, 8.1: settlement writes the order, entitlement, operation, job,
outbox event and notice together, whatever paid the order; idempotency keys are promises."""

import datetime
import json
from dataclasses import replace

import pytest

from commerce import ledger
from commerce.activations import activate_access_code, activate_gift_card, activate_trial
from commerce.codes import issue_access_code, issue_gift_card
from commerce.orders import create_order
from commerce.passes import renewal
from commerce.payments import apply_payment
from commerce.refunds import refund_order
from commerce.settlement import SettlementRejected, settle_order
from commerce.stars import settle_stars_payment
from fulfillment.desired_state import DesiredState
from fulfillment.enqueue import IDEMPOTENCY_MISMATCH, FulfillmentRequestRejected, enqueue_operation
from integrations.payments import STATUS_SUCCEEDED, ProviderPayment
from models import ALL_MODELS
from models.base import db, utcnow
from models.commerce import Order, Plan, Subscription
from models.fulfillment import Entitlement, FulfillmentOperation
from models.jobs import Job, JobLeader, JobPeriodic, JobWorker
from models.ops import OperatorNotice, OutboxEvent
from models.transactions import is_postgres
from tests.support import commerce, sales

# Every test that settles or refunds an order leaves a balanced ledger and no wallet below zero.
pytestmark = pytest.mark.usefixtures("ledger_invariant")


def counts():
    return {
        "entitlements": Entitlement.select().count(),
        "operations": FulfillmentOperation.select().count(),
        "jobs": Job.select().count(),
        "outbox": OutboxEvent.select().count(),
        "notices": OperatorNotice.select().count(),
    }


def test_paid_order_always_has_its_job(database):
    order = commerce.order(commerce.customer(), commerce.limited_plan())
    result = settle_order(order.id, "provider_webhook")
    assert Order.get_by_id(order.id).status == "paid"
    entitlement = Entitlement.get_by_id(result.entitlement_id)
    assert entitlement.status == "pending" and entitlement.order_id == order.id
    operation = FulfillmentOperation.get_by_id(result.operation_id)
    assert (operation.operation, operation.status) == ("create", "pending")
    assert operation.idempotency_key == f"order:{order.id}:fulfill"
    job = Job.get(Job.kind == "fulfillment")
    assert job.args_dict == {"operationId": operation.id} and job.state == "available"
    event = OutboxEvent.get()
    assert event.topic == "order.paid" and json.loads(event.payload)["orderId"] == order.id
    assert counts() == {"entitlements": 1, "operations": 1, "jobs": 1, "outbox": 1, "notices": 1}


def test_settlement_rolled_back_leaves_neither_payment_nor_job(database):
    order = commerce.order(commerce.customer(), commerce.limited_plan())
    with pytest.raises(RuntimeError):
        with db.atomic():
            settle_order(order.id, "provider_webhook")
            raise RuntimeError("the caller failed after settlement")
    assert Order.get_by_id(order.id).status == "pending"
    assert counts() == {"entitlements": 0, "operations": 0, "jobs": 0, "outbox": 0, "notices": 0}


def test_settling_an_order_twice_returns_the_first_settlement(database):
    order = commerce.order(commerce.customer(), commerce.unlimited_plan())
    first = settle_order(order.id, "provider_webhook")
    again = settle_order(order.id, "provider_webhook")
    assert again.already_settled and not first.already_settled
    assert (again.entitlement_id, again.operation_id) == (first.entitlement_id, first.operation_id)
    assert counts()["operations"] == 1 and counts()["jobs"] == 1


def test_cancelled_orders_cannot_be_charged_and_unknown_orders_not_settled(database):
    order = commerce.order(commerce.customer(), commerce.unlimited_plan(), status="cancelled", amount=0)
    with pytest.raises(SettlementRejected):
        settle_order(order.id, "wallet")
    with pytest.raises(SettlementRejected):
        settle_order(999999, "provider_webhook")
    assert counts()["entitlements"] == 0


def test_gift_and_code_settlements_use_their_own_keys(database):
    customer, plan = commerce.customer(), commerce.unlimited_plan()
    gift = settle_order(commerce.order(customer, plan, operation="gift", amount=0).id, "gift")
    code = settle_order(commerce.order(customer, plan, operation="code", amount=0).id, "code")
    assert FulfillmentOperation.get_by_id(gift.operation_id).idempotency_key.startswith("gift:")
    assert FulfillmentOperation.get_by_id(code.operation_id).idempotency_key.startswith("code:")


def test_second_purchase_opens_a_second_subscription_slot(database):
    customer, plan = commerce.customer(), commerce.unlimited_plan()
    settle_order(commerce.order(customer, plan).id, "provider_webhook")
    settle_order(commerce.order(customer, plan).id, "provider_webhook")
    assert sorted(s.slot for s in Subscription.select()) == [1, 2]


def test_renewal_continues_the_period_and_asks_for_a_traffic_reset(database):
    customer, plan = commerce.customer(), commerce.limited_plan()
    first = settle_order(commerce.order(customer, plan).id, "provider_webhook")
    subscription = Entitlement.get_by_id(first.entitlement_id).subscription
    renewal = settle_order(commerce.order(customer, plan, "renewal", subscription).id, "provider_webhook")
    old, new = Entitlement.get_by_id(first.entitlement_id), Entitlement.get_by_id(renewal.entitlement_id)
    assert new.starts_at == old.ends_at
    assert DesiredState.parse(FulfillmentOperation.get_by_id(renewal.operation_id).desired_state).reset_traffic
    assert not DesiredState.parse(FulfillmentOperation.get_by_id(first.operation_id).desired_state).reset_traffic


def test_refund_is_recorded_on_a_paid_order_only(database):
    order = commerce.order(commerce.customer(), commerce.unlimited_plan())
    with pytest.raises(SettlementRejected):
        refund_order(order.id)
    settle_order(order.id, "provider_webhook")
    refund_order(order.id)
    refunded = Order.get_by_id(order.id)
    assert (refunded.status, refunded.refunded_amount_minor) == ("refunded", 500)
    with pytest.raises(SettlementRejected) as again:
        refund_order(order.id)
    assert again.value.code == "order_not_refundable"


def test_a_partial_refund_counts_the_amount_and_keeps_access_until_the_rest_is_refunded(database):
    result = settle_order(commerce.order(commerce.customer(), commerce.unlimited_plan()).id, "provider_webhook")
    Entitlement.update(status="active").where(Entitlement.id == result.entitlement_id).execute()
    part = refund_order(result.order_id, 200)
    assert (part.status, part.refunded_amount_minor) == ("partially_refunded", 200)
    assert not FulfillmentOperation.select().where(FulfillmentOperation.operation == "disable").exists()
    for too_much in (301, 0, -1, True, "100"):
        with pytest.raises(SettlementRejected) as refused:
            refund_order(result.order_id, too_much)
        assert refused.value.code == "invalid_refund_amount"
    rest = refund_order(result.order_id, 300)
    assert (rest.status, rest.refunded_amount_minor) == ("refunded", 500)
    (disable,) = FulfillmentOperation.select().where(FulfillmentOperation.operation == "disable")
    assert disable.idempotency_key == f"refund:{result.order_id}:disable"


# -- idempotency and validation before anything is queued (SPEC 2.8) ---------------------


@pytest.fixture
def entitlement(database):
    result = settle_order(commerce.order(commerce.customer(), commerce.limited_plan()).id, "provider_webhook")
    return Entitlement.get_by_id(result.entitlement_id)


def enqueue(entitlement, operation, desired, key="panel:test:1"):
    with db.atomic():
        return enqueue_operation(entitlement, operation, desired, key, "test")


def test_reusing_an_idempotency_key_with_other_parameters_is_rejected(entitlement):
    desired = DesiredState.from_entitlement(entitlement)
    later = replace(desired, ends_at=entitlement.ends_at + datetime.timedelta(days=5))
    for operation, first, other in (
        ("extend", later, replace(later, ends_at=later.ends_at + datetime.timedelta(days=1))),
        ("set_limits", desired, replace(desired, device_limit=7)),
        ("set_limits", desired, replace(desired, traffic_allowance_bytes=1)),
        ("set_squads", desired, replace(desired, squad_ids=())),
        ("create", desired, replace(desired, device_limit=7)),
        ("enable", desired, replace(desired, effective_at=utcnow() + datetime.timedelta(hours=1))),
    ):
        key = f"panel:test:{operation}"
        queued = enqueue(entitlement, operation, first, key)
        same = enqueue(entitlement, operation, first, key)
        assert same.operation.id == queued.operation.id and not same.created
        with pytest.raises(FulfillmentRequestRejected) as rejected:
            enqueue(entitlement, operation, other, key)
        assert str(rejected.value) == IDEMPOTENCY_MISMATCH
    with pytest.raises(FulfillmentRequestRejected):
        enqueue(entitlement, "set_limits", later, "panel:test:extend")  # another operation under the same key


def test_a_key_promises_only_the_fields_its_operation_sets(entitlement):
    """An operation reads the fields it does not set from the entitlement when it runs,
    so a replay after the entitlement moved on (an extend applied meanwhile) is the same request."""
    desired = DesiredState.from_entitlement(entitlement)
    moved = replace(desired, ends_at=desired.ends_at + datetime.timedelta(days=9))
    for operation, first in (
        ("set_limits", replace(desired, device_limit=5)),
        ("set_squads", replace(desired, squad_ids=(commerce.SQUAD_A,))),
        ("disable", desired),
        ("reconcile", desired),
    ):
        key = f"panel:moved:{operation}"
        queued = enqueue(entitlement, operation, first, key)
        replay = replace(first, ends_at=moved.ends_at)
        assert enqueue(entitlement, operation, replay, key).operation.id == queued.operation.id


def test_squad_order_does_not_change_the_parameters(entitlement):
    desired = DesiredState.from_entitlement(entitlement)
    first = enqueue(entitlement, "set_squads", desired)
    reordered = DesiredState(
        desired.ends_at, desired.traffic_allowance_bytes, desired.device_limit, tuple(reversed(desired.squad_ids))
    )
    assert enqueue(entitlement, "set_squads", reordered).operation.id == first.operation.id


def test_extend_to_an_earlier_or_equal_date_is_refused_before_anything_is_queued(entitlement):
    before = counts()
    for ends_at in (entitlement.ends_at, entitlement.ends_at - datetime.timedelta(days=1)):
        with pytest.raises(FulfillmentRequestRejected) as rejected:
            enqueue(entitlement, "extend", DesiredState.from_entitlement(entitlement, ends_at=ends_at))
        assert rejected.value.code == "invalid_ends_at"
    assert counts() == before


def test_negative_limits_are_refused_before_anything_is_queued(entitlement):
    before = counts()
    for desired in (DesiredState(entitlement.ends_at, -1, None, ()), DesiredState(entitlement.ends_at, None, -2, ())):
        with pytest.raises(FulfillmentRequestRejected) as rejected:
            enqueue(entitlement, "set_limits", desired)
        assert rejected.value.code == "invalid_limit"
    assert counts() == before


def test_operations_outside_the_eight_are_refused_by_the_service_and_the_database(entitlement):
    with pytest.raises(FulfillmentRequestRejected) as rejected:
        enqueue(entitlement, "delete_everything", DesiredState.from_entitlement(entitlement))
    assert rejected.value.code == "unsupported_operation"
    from peewee import IntegrityError

    with pytest.raises(IntegrityError):
        with db.atomic():
            FulfillmentOperation.update(operation="delete_everything").execute()


# -- a job that cannot be written: the whole settlement goes, whatever paid the order ------------------------
# The database refuses the job's row (a trigger on `jobs`) and nothing wraps the settlement in a transaction of
# the test's own: a settlement that committed and only then inserted its job would leave a paid order that
# nothing fulfils, and an outer transaction would have hidden that by taking the late job back with it.

FUNDS = 100000
REFUSED = "the fulfillment job cannot be written"
QUEUE_MACHINERY = (JobWorker, JobLeader, JobPeriodic)  # no settlement writes them


@pytest.fixture
def job_insert_fails(database):
    if is_postgres():
        db.execute_sql(
            "CREATE FUNCTION refuse_fulfillment_job() RETURNS trigger LANGUAGE plpgsql AS"
            f" $$ BEGIN RAISE EXCEPTION '{REFUSED}'; END $$"
        )
        db.execute_sql(
            "CREATE TRIGGER refuse_fulfillment_job BEFORE INSERT ON jobs FOR EACH ROW"
            " WHEN (NEW.kind = 'fulfillment') EXECUTE FUNCTION refuse_fulfillment_job()"
        )
    else:
        db.execute_sql(
            "CREATE TRIGGER refuse_fulfillment_job BEFORE INSERT ON jobs WHEN NEW.kind = 'fulfillment'"
            f" BEGIN SELECT RAISE(ABORT, '{REFUSED}'); END"
        )
    yield
    db.execute_sql("DROP TRIGGER refuse_fulfillment_job" + (" ON jobs" if is_postgres() else ""))
    if is_postgres():
        db.execute_sql("DROP FUNCTION refuse_fulfillment_job()")


def state():
    """Every row the settlement could write, and every order's and wallet's standing."""
    rows = {model.__name__: model.select().count() for model in ALL_MODELS if model not in QUEUE_MACHINERY}
    rows["orders"] = sorted((o.id, o.status, o.paid_at) for o in Order.select())
    rows["wallets"] = sorted(
        (o.customer_id, ledger.balance(o.customer_id, o.currency)) for o in Order.select() if o.currency
    )
    return rows


def buyer(funds=0):
    customer = sales.customer()
    if funds:
        sales.topped_up(customer, funds)
    return customer


def provider_order(provider, currency="RUB"):
    return create_order(buyer().id, "purchase", currency, plan_id=sales.plan().id, provider=provider)


def paid_at(provider):
    order = provider_order(provider)
    payment = ProviderPayment(
        provider=provider,
        payment_id=f"{provider}-{order.id}",
        status=STATUS_SUCCEEDED,
        provider_status="succeeded",
        amount_minor=order.amount_minor,
        currency=order.currency,
        order_id=order.id,
    )
    return lambda: apply_payment(payment, "provider_webhook")


def paid_in_stars():
    order = provider_order("stars", "XTR")
    return lambda: settle_stars_payment(order.id, f"charge-{order.id}", order.amount_minor)


def paid_from_wallet():
    order = create_order(buyer(FUNDS).id, "purchase", "RUB", plan_id=sales.plan().id)
    return lambda: settle_order(order.id, "wallet")


def renewed_from_wallet():
    customer = buyer(FUNDS)
    order, settlement, _ = sales.paid_order(customer, sales.plan())
    sales.provision(settlement)
    renewal_order = create_order(
        customer.id, "renewal", "RUB", plan_id=order.plan_id, subscription_id=Order.get_by_id(order.id).subscription_id
    )
    return lambda: settle_order(renewal_order.id, "renewal")


def renewed_by_the_pass():
    customer = buyer(FUNDS)
    _, settlement, _ = sales.paid_order(customer, sales.plan())
    subscription = sales.provision(settlement)
    Subscription.update(auto_renew=True).where(Subscription.id == subscription.id).execute()
    ends_at = utcnow().replace(microsecond=0) + datetime.timedelta(hours=2)  # due: within the pass's day
    Entitlement.update(ends_at=ends_at).where(Entitlement.id == settlement.entitlement_id).execute()
    return renewal.run


def redeemed_gift_card():
    _, code = issue_gift_card(sales.plan(), utcnow().replace(microsecond=0) + datetime.timedelta(days=9))
    customer = buyer()
    return lambda: activate_gift_card(customer.id, code)


def activated_access_code():
    _, code = issue_access_code(sales.plan(), 5)
    customer = buyer()
    return lambda: activate_access_code(customer.id, code)


def started_trial():
    plan = sales.plan("trial", prices={"RUB": 0})
    Plan.update(trial=True).where(Plan.id == plan.id).execute()
    customer = buyer()
    return lambda: activate_trial(customer.id)


WAYS = {
    "yookassa": lambda: paid_at("yookassa"),
    "cryptobot": lambda: paid_at("cryptobot"),
    "stars": paid_in_stars,
    "wallet": paid_from_wallet,
    "renewal": renewed_from_wallet,
    "renewal pass": renewed_by_the_pass,
    "gift card": redeemed_gift_card,
    "access code": activated_access_code,
    "trial": started_trial,
}


@pytest.mark.parametrize("way", sorted(WAYS))
def test_a_settlement_whose_job_cannot_be_written_leaves_nothing_of_itself(database, way, request):
    settle = WAYS[way]()
    before = state()
    request.getfixturevalue("job_insert_fails")
    assert not db.in_transaction()

    with pytest.raises(Exception, match=REFUSED):
        settle()

    assert state() == before
