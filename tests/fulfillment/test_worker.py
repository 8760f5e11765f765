"""SPEC 2.3–2.15, 2.20: the fulfillment worker against a real (fake) panel, one test per guarantee."""

import datetime
import json

import pytest

from commerce.refunds import refund_order
from commerce.settlement import settle_order
from fulfillment import changes, rules
from fulfillment.desired_state import DesiredState
from fulfillment.usernames import legacy_username_for, username_for
from jobs import fulfillment as worker
from models.base import db, utcnow
from models.commerce import Order, Subscription
from models.fulfillment import Entitlement, EntitlementDrift, FulfillmentHistory, FulfillmentOperation
from models.jobs import Job
from models.ops import OperatorNotice
from models.transactions import retry_serializable
from ops import maintenance
from tests.support import commerce
from tests.support.direct import make_due, run_next

# Every test that settles or refunds an order leaves a balanced ledger and no wallet below zero.
pytestmark = pytest.mark.usefixtures("ledger_invariant")


def settle(plan=None, customer=None, operation="purchase", subscription=None):
    customer = customer or commerce.customer()
    plan = plan or commerce.limited_plan(code=f"plan-{commerce.Plan.select().count()}")
    return settle_order(commerce.order(customer, plan, operation, subscription).id, "provider_webhook")


def op(operation_id):
    return FulfillmentOperation.get_by_id(operation_id)


def history(operation_id):
    return list(
        FulfillmentHistory.select().where(FulfillmentHistory.operation == operation_id).order_by(FulfillmentHistory.id)
    )


def job_of(operation_id):
    """The operation's newest job."""
    jobs = Job.select().where(Job.kind == "fulfillment").order_by(Job.id.desc())
    return next(j for j in jobs if j.args_dict["operationId"] == operation_id)


def run_operation(operation_id, times=1):
    """Run the operation's job `times` times, making it due in between (no waiting through backoffs)."""
    for _ in range(times):
        job = job_of(operation_id)
        make_due(job.id)
        assert run_next() == job.id


def subscription_of(settlement):
    return Entitlement.get_by_id(settlement.entitlement_id).subscription


# -- provisioning ---------------------------------------------------------------------------


def test_create_provisions_the_user_and_fulfills_the_paid_order(panel):
    plan = commerce.limited_plan()
    settlement = settle(plan)
    run_operation(settlement.operation_id)
    operation = op(settlement.operation_id)
    assert operation.status == "succeeded" and operation.attempt_count == 1 and operation.completed_at
    entitlement = Entitlement.get_by_id(settlement.entitlement_id)
    assert entitlement.status == "active" and entitlement.reconciled_at is not None
    subscription = entitlement.subscription
    assert subscription.remote_username == username_for(subscription.id)
    user = panel.user(subscription.remote_username)
    assert str(user["id"]) == subscription.remote_user_id
    assert user["trafficLimitBytes"] == plan.traffic_allowance_bytes and user["hwidDeviceLimit"] == 3
    expected_expiry = entitlement.ends_at + datetime.timedelta(hours=plan.grace_period_hours)
    assert user["expireAt"].startswith(expected_expiry.isoformat(timespec="seconds"))
    assert Order.get_by_id(entitlement.order_id).status == "fulfilled"
    assert [h.status for h in history(operation.id)] == ["succeeded"]
    assert Job.get_by_id(job_of(operation.id).id).state == "completed"


def test_create_retried_after_a_lost_response_makes_no_second_user(panel):
    settlement = settle()
    panel.set_faults(lost_response_rate=1.0, routes=["POST /api/users"])
    run_operation(settlement.operation_id)
    assert op(settlement.operation_id).status == "retrying"
    assert op(settlement.operation_id).last_error_code == rules.REMNAWAVE_UNAVAILABLE
    panel.clear_faults()
    run_operation(settlement.operation_id)
    assert op(settlement.operation_id).status == "succeeded"
    username = username_for(subscription_of(settlement).id)
    assert panel.stats()["creates_applied"] == {username: 1}
    assert len(panel.users()) == 1


def test_a_create_answered_username_exists_adopts_the_user_made_concurrently_in_the_same_attempt(panel):
    plan = commerce.limited_plan()
    settlement = settle(plan)
    username = username_for(subscription_of(settlement).id)
    panel.create_concurrently(username, utcnow(), traffic_limit_bytes=1, hwid_device_limit=9)
    run_operation(settlement.operation_id)
    operation = op(settlement.operation_id)
    assert operation.status == "succeeded" and operation.attempt_count == 1
    [user] = panel.users()
    assert user["username"] == username and panel.stats()["creates_applied"] == {}
    assert user["trafficLimitBytes"] == plan.traffic_allowance_bytes and user["hwidDeviceLimit"] == 3
    assert subscription_of(settlement).remote_user_id == str(user["id"])


def test_a_second_subscription_never_retires_the_first_ones_entitlement(panel):
    customer, plan = commerce.customer(), commerce.limited_plan()
    first, second = settle(plan, customer), settle(plan, customer)
    run_operation(first.operation_id)
    run_operation(second.operation_id)
    statuses = [Entitlement.get_by_id(s.entitlement_id).status for s in (first, second)]
    assert statuses == ["active", "active"]
    assert len(panel.users()) == 2


def test_renewal_supersedes_the_earlier_entitlement_of_the_same_subscription(panel):
    customer, plan = commerce.customer(), commerce.limited_plan()
    first = settle(plan, customer)
    run_operation(first.operation_id)
    renewal = settle(plan, customer, "renewal", subscription_of(first))
    run_operation(renewal.operation_id)
    assert Entitlement.get_by_id(first.entitlement_id).status == "superseded"
    assert Entitlement.get_by_id(renewal.entitlement_id).status == "active"
    assert len(panel.users()) == 1


def test_slot_one_adopts_the_legacy_user_and_slot_two_never_does(panel):
    customer, plan = commerce.customer(), commerce.unlimited_plan()
    legacy = legacy_username_for(customer.id)
    panel.seed_user(legacy, utcnow() + datetime.timedelta(days=3))
    first, second = settle(plan, customer), settle(plan, customer)
    run_operation(first.operation_id)
    run_operation(second.operation_id)
    assert subscription_of(first).remote_username == legacy
    assert subscription_of(second).remote_username == username_for(subscription_of(second).id)
    assert panel.stats()["creates_applied"] == {username_for(subscription_of(second).id): 1}


# -- explicit limits (SPEC 2.5) -----------------------------------------------------------


def test_unlimited_plan_is_pushed_as_zero_for_both_limits_on_create_and_on_every_update(panel):
    customer = commerce.customer()
    first = settle(commerce.limited_plan(), customer)
    run_operation(first.operation_id)
    username = subscription_of(first).remote_username
    assert panel.user(username)["hwidDeviceLimit"] == 3
    # Moving to an unlimited plan must clear the old limits: 0 for both
    # (a null device limit would be the panel's fallback limit).
    upgrade = settle(commerce.unlimited_plan(), customer, "upgrade", subscription_of(first))
    run_operation(upgrade.operation_id)
    user = panel.user(username)
    assert user["trafficLimitBytes"] == 0 and user["hwidDeviceLimit"] == 0
    assert panel.effective_device_limit(username) is None
    fresh = settle(commerce.unlimited_plan(code="unlimited-2"))
    run_operation(fresh.operation_id)
    new_username = subscription_of(fresh).remote_username
    new_user = panel.user(new_username)
    assert new_user["trafficLimitBytes"] == 0 and new_user["hwidDeviceLimit"] == 0
    assert panel.effective_device_limit(new_username) is None


def test_reconcile_moves_a_null_device_limit_of_an_unlimited_plan_to_zero(panel):
    settlement = settle(commerce.unlimited_plan())
    run_operation(settlement.operation_id)
    entitlement = Entitlement.get_by_id(settlement.entitlement_id)
    username = entitlement.subscription.remote_username
    panel.edit_user(username, hwidDeviceLimit=None)  # as an unlimited create of the old code left it
    assert panel.effective_device_limit(username) == panel.fallback_device_limit
    reconcile = enqueue(entitlement, "reconcile", DesiredState.from_entitlement(entitlement), "reconcile:t:0")
    run_operation(reconcile.id)
    assert panel.user(username)["hwidDeviceLimit"] == 0
    assert panel.effective_device_limit(username) is None
    drift = EntitlementDrift.get(EntitlementDrift.kind == "device_limit")
    assert (json.loads(drift.expected), json.loads(drift.observed), drift.status) == (
        {"value": 0},
        {"value": None},
        "resolved",
    )


# -- resetTraffic and re-enable (SPEC 2.6) ---------------------------------------------------


def test_renewal_resets_traffic_and_reenables_a_disabled_user(panel):
    customer, plan = commerce.customer(), commerce.limited_plan()
    first = settle(plan, customer)
    run_operation(first.operation_id)
    username = subscription_of(first).remote_username
    panel.set_used_traffic(username, plan.traffic_allowance_bytes + 1)
    panel.edit_user(username, status="DISABLED")
    renewal = settle(plan, customer, "renewal", subscription_of(first))
    run_operation(renewal.operation_id)
    user = panel.user(username)
    assert user["status"] == "ACTIVE"
    assert user["userTraffic"]["usedTrafficBytes"] == 0


def test_purchase_and_downgrade_do_not_reset_traffic(panel):
    customer, plan = commerce.customer(), commerce.limited_plan()
    first = settle(plan, customer)
    run_operation(first.operation_id)
    username = subscription_of(first).remote_username
    panel.set_used_traffic(username, 12345)
    downgrade = settle(commerce.limited_plan(code="small"), customer, "downgrade", subscription_of(first))
    run_operation(downgrade.operation_id)
    assert panel.user(username)["userTraffic"]["usedTrafficBytes"] == 12345


def test_a_paused_entitlement_is_not_reenabled_by_its_create(panel):
    settlement = settle()
    run_operation(settlement.operation_id)
    subscription = subscription_of(settlement)
    pause_op = changes.pause(subscription.customer_id, subscription.id, "req-1", "op@example", "customer asked")
    run_operation(pause_op.id)
    username = subscription.remote_username
    assert panel.user(username)["status"] == "DISABLED"
    # A create for the paused entitlement (e.g. revived) must leave the user disabled.
    create = op(settlement.operation_id)
    FulfillmentOperation.update(status="pending").where(FulfillmentOperation.id == create.id).execute()
    Job.update(state="available", finalized_at=None).where(Job.id == job_of(create.id).id).execute()
    run_operation(create.id)
    assert panel.user(username)["status"] == "DISABLED"
    assert Entitlement.get_by_id(settlement.entitlement_id).status == "paused"


def test_reconcile_neither_reenables_nor_resets_traffic(panel):
    settlement = settle()
    run_operation(settlement.operation_id)
    entitlement = Entitlement.get_by_id(settlement.entitlement_id)
    username = entitlement.subscription.remote_username
    panel.set_used_traffic(username, 999)
    panel.edit_user(username, status="DISABLED")
    reconcile = enqueue(entitlement, "reconcile", DesiredState.from_entitlement(entitlement), "reconcile:t:1")
    run_operation(reconcile.id)
    user = panel.user(username)
    assert user["status"] == "DISABLED" and user["userTraffic"]["usedTrafficBytes"] == 999
    drift = EntitlementDrift.get(EntitlementDrift.kind == "status")
    assert drift.status == "open" and json.loads(drift.observed) == {"value": "DISABLED"}


def enqueue(entitlement, operation, desired, key):
    from fulfillment.enqueue import enqueue_operation

    with db.atomic():
        return enqueue_operation(entitlement, operation, desired, key, "test").operation


# -- cancellations (SPEC 2.10) -----------------------------------------------------------------


def test_create_for_a_refunded_order_is_cancelled_and_its_entitlement_superseded(panel):
    settlement = settle()
    refund_order(settlement.order_id)
    run_operation(settlement.operation_id)
    operation = op(settlement.operation_id)
    assert (operation.status, operation.last_error_code) == ("cancelled", rules.ORDER_REFUNDED)
    assert Entitlement.get_by_id(settlement.entitlement_id).status == "superseded"
    assert panel.users() == [] and panel.stats()["calls"] == {}
    assert FulfillmentOperation.select().count() == 1  # never called the panel: no disable to queue
    assert [h.status for h in history(operation.id)] == ["cancelled"]
    assert Job.get_by_id(job_of(operation.id).id).state == "cancelled"
    assert OperatorNotice.select().where(OperatorNotice.kind == rules.NOTICE_FULFILLMENT_FAILURE).count() == 0


def test_refund_arriving_during_create_leaves_the_order_refunded(panel):
    settlement = settle()
    claim = retry_serializable(lambda: worker.claim(settlement.operation_id))
    refund_order(settlement.order_id)  # while the worker is calling the panel
    outcome = worker.call(claim)
    retry_serializable(lambda: worker.record(claim, outcome))
    assert op(settlement.operation_id).status == "succeeded"
    assert Order.get_by_id(settlement.order_id).status == "refunded"


def refund_disable(order_id):
    return FulfillmentOperation.get(FulfillmentOperation.idempotency_key == f"refund:{order_id}:disable")


def reconcile_now(entitlement_id):
    from jobs.passes import fulfillment_reconcile

    Entitlement.update(reconciled_at=None).where(Entitlement.id == entitlement_id).execute()
    fulfillment_reconcile.dispatch()
    reconcile = FulfillmentOperation.get(
        FulfillmentOperation.operation == "reconcile", FulfillmentOperation.entitlement == entitlement_id
    )
    run_operation(reconcile.id)
    return op(reconcile.id)


def test_a_full_refund_after_fulfilment_disables_the_user_and_reconcile_keeps_it_disabled(panel):
    settlement = settle()
    run_operation(settlement.operation_id)
    username = subscription_of(settlement).remote_username
    refund_order(settlement.order_id)
    disable = refund_disable(settlement.order_id)
    assert (disable.operation, disable.entitlement_id) == ("disable", settlement.entitlement_id)
    run_operation(disable.id)
    assert panel.user(username)["status"] == "DISABLED"
    assert Entitlement.get_by_id(settlement.entitlement_id).status == "disabled"

    # Someone enables the user and moves its expiry on the panel: reconcile
    # disables it again and pushes no period.
    expire_at = "2031-01-01T00:00:00.000Z"
    panel.edit_user(username, status="ACTIVE", expireAt=expire_at)
    writes_before = dict(panel.stats()["writes_applied"])
    assert reconcile_now(settlement.entitlement_id).status == "succeeded"
    user = panel.user(username)
    assert (user["status"], user["expireAt"]) == ("DISABLED", expire_at)
    writes = panel.stats()["writes_applied"]
    assert writes.get("PATCH /api/users", 0) == writes_before.get("PATCH /api/users", 0)
    assert Entitlement.get_by_id(settlement.entitlement_id).status == "disabled"
    assert Order.get_by_id(settlement.order_id).status == "refunded"


def test_a_refund_while_the_create_is_in_flight_ends_refunded_and_disabled(panel):
    settlement = settle()
    claim = retry_serializable(lambda: worker.claim(settlement.operation_id))
    refund_order(settlement.order_id)  # while the worker is calling the panel
    disable = refund_disable(settlement.order_id)
    run_operation(disable.id)  # waits: the create is at the panel
    assert op(disable.id).status == "pending" and panel.stats()["writes_applied"] == {}
    retry_serializable(lambda: worker.record(claim, worker.call(claim)))
    username = subscription_of(settlement).remote_username
    assert panel.user(username)["status"] == "ACTIVE"
    run_operation(disable.id)
    assert op(disable.id).status == "succeeded"
    assert panel.user(username)["status"] == "DISABLED"
    assert Order.get_by_id(settlement.order_id).status == "refunded"
    assert Entitlement.get_by_id(settlement.entitlement_id).status == "disabled"


def test_a_refund_after_a_create_whose_answer_was_lost_keeps_the_user_it_made_disabled(panel):
    settlement = settle()
    panel.set_faults(lost_response_rate=1.0, routes=["POST /api/users"])
    run_operation(settlement.operation_id)  # the user was made; the answer never came
    panel.clear_faults()
    refund_order(settlement.order_id)
    disable = refund_disable(settlement.order_id)
    run_operation(disable.id)  # waits for the create, which may have provisioned the user
    assert op(disable.id).status == "pending"
    run_operation(settlement.operation_id)
    username = username_for(subscription_of(settlement).id)
    assert panel.user(username)["status"] == "DISABLED"
    assert op(settlement.operation_id).status == "succeeded"
    run_operation(disable.id)
    assert op(disable.id).status == "succeeded"
    assert panel.user(username)["status"] == "DISABLED" and len(panel.users()) == 1
    assert Order.get_by_id(settlement.order_id).status == "refunded"


def test_a_refund_after_a_failed_create_that_made_nothing_supersedes_the_entitlement(panel):
    settlement = settle()
    panel.set_faults(fail_rate=1.0, routes=["POST /api/users"])
    run_operation(settlement.operation_id)
    panel.clear_faults()
    refund_order(settlement.order_id)
    disable = refund_disable(settlement.order_id)
    run_operation(settlement.operation_id)
    operation = op(settlement.operation_id)
    assert (operation.status, operation.last_error_code) == ("cancelled", rules.ORDER_REFUNDED)
    assert Entitlement.get_by_id(settlement.entitlement_id).status == "superseded"
    run_operation(disable.id)
    assert (op(disable.id).status, op(disable.id).last_error_code) == ("cancelled", rules.ENTITLEMENT_SUPERSEDED)
    assert panel.users() == []


def test_operation_of_a_superseded_entitlement_is_cancelled_without_a_notice(panel):
    settlement = settle()
    Entitlement.update(status="superseded").where(Entitlement.id == settlement.entitlement_id).execute()
    run_operation(settlement.operation_id)
    operation = op(settlement.operation_id)
    assert (operation.status, operation.last_error_code) == ("cancelled", rules.ENTITLEMENT_SUPERSEDED)
    assert OperatorNotice.select().where(OperatorNotice.kind == rules.NOTICE_FULFILLMENT_FAILURE).count() == 0


def test_an_entitlement_superseded_while_the_panel_answered_is_not_set_back_to_active(panel):
    settlement = settle()
    claim = retry_serializable(lambda: worker.claim(settlement.operation_id))
    outcome = worker.call(claim)
    Entitlement.update(status="superseded").where(Entitlement.id == settlement.entitlement_id).execute()
    retry_serializable(lambda: worker.record(claim, outcome))
    assert op(settlement.operation_id).last_error_code == rules.ENTITLEMENT_SUPERSEDED
    assert Entitlement.get_by_id(settlement.entitlement_id).status == "superseded"


# -- failures, retries, notices (SPEC 2.11–2.14) ----------------------------------------------


def test_panel_down_leaves_the_operation_retrying_with_backoff_and_nothing_lost(panel):
    settlement = settle()
    panel.set_faults(fail_rate=1.0)
    before = utcnow()
    run_operation(settlement.operation_id)
    operation = op(settlement.operation_id)
    assert operation.status == "retrying" and operation.last_error_code == "remnawave_http_500"
    delay = (operation.next_attempt_at - before).total_seconds()
    assert rules.backoff_seconds(1) - 1 <= delay <= rules.backoff_seconds(1) + 2
    assert Order.get_by_id(settlement.order_id).status == "paid"
    job = Job.get_by_id(job_of(operation.id).id)
    assert job.state == "retryable" and "remnawave_http_500" in job.error_list[-1]["error"]


def test_backoff_doubles_to_a_cap_of_1280_seconds():
    assert [rules.backoff_seconds(n) for n in (1, 2, 3, 8, 9, 12)] == [10, 20, 40, 1280, 1280, 1280]


def test_one_notice_after_three_failed_attempts_however_often_it_retries(panel):
    settlement = settle()
    panel.set_faults(fail_rate=1.0)
    run_operation(settlement.operation_id, times=2)
    notices = OperatorNotice.select().where(OperatorNotice.kind == rules.NOTICE_FULFILLMENT_FAILURE)
    assert notices.count() == 0
    run_operation(settlement.operation_id, times=3)
    assert notices.count() == 1
    notice = notices.get()
    assert notice.dedupe_key == f"operation:{settlement.operation_id}"
    assert json.loads(notice.payload) == {
        "entitlementId": settlement.entitlement_id,
        "errorCode": "remnawave_http_500",
        "operation": "create",
        "status": "retrying",
    }
    assert [h.status for h in history(settlement.operation_id)] == ["retrying"] * 5


def test_unparseable_desired_state_fails_the_operation_with_a_notice_and_cancels_the_job(panel):
    settlement = settle()
    FulfillmentOperation.update(desired_state='{"endsAt": "soon"}').where(
        FulfillmentOperation.id == settlement.operation_id
    ).execute()
    run_operation(settlement.operation_id)
    operation = op(settlement.operation_id)
    assert (operation.status, operation.last_error_code) == ("failed", rules.INVALID_DESIRED_STATE)
    assert Job.get_by_id(job_of(operation.id).id).state == "cancelled"
    assert OperatorNotice.get(OperatorNotice.kind == rules.NOTICE_FULFILLMENT_FAILURE).dedupe_key == (
        f"operation:{operation.id}"
    )
    assert [h.status for h in history(operation.id)] == ["failed"]
    assert panel.stats()["calls"] == {}


def test_future_effective_at_snoozes_without_spending_an_attempt(panel):
    settlement = settle()
    entitlement = Entitlement.get_by_id(settlement.entitlement_id)
    later = DesiredState(
        entitlement.ends_at + datetime.timedelta(days=1),
        None,
        None,
        (),
        effective_at=utcnow() + datetime.timedelta(hours=2),
    )
    operation = enqueue(entitlement, "extend", later, "panel:x:extend:1")
    job = job_of(operation.id)
    assert Job.get_by_id(job.id).state == "scheduled"
    run_operation(operation.id)  # forced to run early: it snoozes again
    assert Job.get_by_id(job.id).state == "scheduled" and Job.get_by_id(job.id).attempt == 0
    assert op(operation.id).attempt_count == 0 and panel.stats()["calls"] == {}


def test_maintenance_holds_fulfillment_without_spending_an_attempt(panel):
    settlement = settle()
    maintenance.set_mode(True, "panel upgrade", "ops@example")
    run_operation(settlement.operation_id, times=3)
    operation = op(settlement.operation_id)
    assert (operation.status, operation.last_error_code, operation.attempt_count) == (
        "retrying",
        rules.MAINTENANCE_ACTIVE,
        0,
    )
    assert [h.status for h in history(operation.id)] == ["retrying"] * 3
    assert Job.get_by_id(job_of(operation.id).id).attempt == 0
    assert panel.stats()["calls"] == {}
    maintenance.set_mode(False, "done", "ops@example")
    run_operation(settlement.operation_id)
    assert op(settlement.operation_id).status == "succeeded" and op(settlement.operation_id).attempt_count == 1


def test_non_create_without_a_remote_user_fails_remote_user_not_found_and_retries(panel):
    settlement = settle()
    entitlement = Entitlement.get_by_id(settlement.entitlement_id)
    Entitlement.update(status="active").where(Entitlement.id == entitlement.id).execute()
    operation = enqueue(entitlement, "reset_traffic", DesiredState.from_entitlement(entitlement), "panel:y:1")
    run_operation(operation.id)
    assert (op(operation.id).status, op(operation.id).last_error_code) == ("retrying", rules.REMOTE_USER_NOT_FOUND)


# -- leases (SPEC 2.9) -------------------------------------------------------------------------


def test_a_stale_run_whose_lease_was_taken_over_discards_its_result(panel):
    settlement = settle()
    first = retry_serializable(lambda: worker.claim(settlement.operation_id))
    first_outcome = worker.call(first)
    # The first run stalls past its lease; another run takes the operation over.
    FulfillmentOperation.update(next_attempt_at=utcnow() - datetime.timedelta(seconds=1)).where(
        FulfillmentOperation.id == settlement.operation_id
    ).execute()
    second = retry_serializable(lambda: worker.claim(settlement.operation_id))
    assert second.attempt == first.attempt + 1
    assert retry_serializable(lambda: worker.record(first, first_outcome)) == worker.Done("stale")
    assert op(settlement.operation_id).status == "running"
    retry_serializable(lambda: worker.record(second, worker.call(second)))
    assert op(settlement.operation_id).status == "succeeded"
    rows = history(settlement.operation_id)
    assert [(h.attempt, h.status, h.error_code) for h in rows] == [
        (1, "retrying", rules.LEASE_EXPIRED),
        (2, "succeeded", None),
    ]


def test_a_run_finding_a_live_lease_snoozes_until_it_ends(panel):
    settlement = settle()
    retry_serializable(lambda: worker.claim(settlement.operation_id))
    decision = retry_serializable(lambda: worker.claim(settlement.operation_id))
    assert isinstance(decision, worker.Snooze) and 100 < decision.seconds <= rules.CLAIM_LEASE_S + 1


def test_a_claimed_operation_never_stays_running_after_its_lease(panel):
    settlement = settle()
    retry_serializable(lambda: worker.claim(settlement.operation_id))  # the worker dies here
    FulfillmentOperation.update(next_attempt_at=utcnow() - datetime.timedelta(seconds=1)).where(
        FulfillmentOperation.id == settlement.operation_id
    ).execute()
    run_operation(settlement.operation_id)
    assert op(settlement.operation_id).status == "succeeded"


# -- history (SPEC 2.20) ----------------------------------------------------------------------


def test_history_summary_never_contains_squad_ids_or_links(panel):
    settlement = settle(commerce.limited_plan())
    panel.set_faults(fail_rate=1.0)
    run_operation(settlement.operation_id)
    panel.clear_faults()
    run_operation(settlement.operation_id)
    rows = history(settlement.operation_id)
    assert [h.status for h in rows] == ["retrying", "succeeded"]
    text = " ".join(f"{h.request_summary} {h.response_summary}" for h in rows)
    text += f" {op(settlement.operation_id).request_summary} {op(settlement.operation_id).response_summary}"
    for secret in (commerce.SQUAD_A, commerce.SQUAD_B, "/api/sub/", "subscriptionUrl", "shortUuid"):
        assert secret not in text
    summary = json.loads(rows[-1].request_summary)
    assert summary["squadCount"] == 2 and summary["trafficLimitConfigured"] and summary["deviceLimitConfigured"]


# -- reconcile and drift (SPEC 2.16, 2.17) ---------------------------------------------------------


def test_reconcile_recreates_a_deleted_user_and_closes_the_drift_it_fixed(panel):
    settlement = settle()
    run_operation(settlement.operation_id)
    entitlement = Entitlement.get_by_id(settlement.entitlement_id)
    panel.delete_user(entitlement.subscription.remote_username)
    reconcile = enqueue(entitlement, "reconcile", DesiredState.from_entitlement(entitlement), "reconcile:t:2")
    run_operation(reconcile.id)
    assert panel.user(entitlement.subscription.remote_username) is not None
    drift = EntitlementDrift.get(EntitlementDrift.kind == "missing_remote")
    assert drift.status == "resolved"
    assert (json.loads(drift.expected), json.loads(drift.observed)) == ({"exists": True}, {"exists": False})


def test_reconcile_records_and_repairs_each_field_edited_on_the_panel(panel):
    settlement = settle(commerce.limited_plan())
    run_operation(settlement.operation_id)
    entitlement = Entitlement.get_by_id(settlement.entitlement_id)
    username = entitlement.subscription.remote_username
    panel.edit_user(
        username,
        hwidDeviceLimit=9,
        trafficLimitBytes=5,
        activeInternalSquads=[commerce.SQUAD_A],
        expireAt="2030-01-01T00:00:00.000Z",
    )
    reconcile = enqueue(entitlement, "reconcile", DesiredState.from_entitlement(entitlement), "reconcile:t:3")
    run_operation(reconcile.id)
    kinds = {d.kind: d for d in EntitlementDrift.select()}
    assert set(kinds) == {"device_limit", "traffic", "squads", "expiry"}
    assert all(d.status == "resolved" for d in kinds.values())
    assert json.loads(kinds["device_limit"].observed) == {"value": 9}
    user = panel.user(username)
    assert user["hwidDeviceLimit"] == 3 and len(user["activeInternalSquads"]) == 2


def test_a_failed_drift_read_applies_nothing_and_leaves_the_operation_retrying(panel):
    settlement = settle()
    run_operation(settlement.operation_id)
    entitlement = Entitlement.get_by_id(settlement.entitlement_id)
    reconcile = enqueue(entitlement, "reconcile", DesiredState.from_entitlement(entitlement), "reconcile:t:4")
    writes_before = sum(panel.stats()["writes_applied"].values())
    panel.set_faults(fail_rate=1.0, routes=["GET /api/users/{id}", "GET /api/users/by-username/{username}"])
    run_operation(reconcile.id)
    operation = op(reconcile.id)
    assert operation.status == "retrying" and operation.status != "running"
    assert [h.status for h in history(reconcile.id)] == ["retrying"]
    assert sum(panel.stats()["writes_applied"].values()) == writes_before
    assert EntitlementDrift.select().count() == 0


def test_order_moves_to_fulfilled_only_from_paid(panel):
    settlement = settle()
    Order.update(status="partially_refunded").where(Order.id == settlement.order_id).execute()
    run_operation(settlement.operation_id)
    assert op(settlement.operation_id).status == "succeeded"
    assert Order.get_by_id(settlement.order_id).status == "partially_refunded"


def test_subscription_row_remembers_the_remote_user(panel):
    settlement = settle()
    run_operation(settlement.operation_id)
    subscription = Subscription.get_by_id(subscription_of(settlement).id)
    assert subscription.remote_user_id and json.loads(subscription.observed_state)["status"] == "ACTIVE"


@pytest.mark.parametrize("operation", ["enable", "disable", "reset_traffic", "set_limits", "set_squads", "extend"])
def test_each_operator_operation_is_applied_through_the_pipeline(panel, operation):
    settlement = settle(commerce.limited_plan())
    run_operation(settlement.operation_id)
    subscription = subscription_of(settlement)
    username = subscription.remote_username
    if operation == "enable":
        panel.edit_user(username, status="DISABLED")
    if operation == "reset_traffic":
        panel.set_used_traffic(username, 77)
    entitlement = Entitlement.get_by_id(settlement.entitlement_id)
    kwargs = {
        "extend": {"ends_at": entitlement.ends_at + datetime.timedelta(days=10)},
        "set_limits": {"device_limit": None, "traffic_bytes": 0},
        "set_squads": {"squad_ids": [commerce.SQUAD_B]},
    }.get(operation, {})
    answer = changes.request_change(
        subscription.customer_id, subscription.id, operation, "req-9", "op", "ticket 42", **kwargs
    )
    assert answer["operation"] == operation and answer["status"] == "pending"
    run_operation(answer["operationId"])
    assert op(answer["operationId"]).status == "succeeded"
    user = panel.user(username)
    expected = {
        "enable": lambda u: u["status"] == "ACTIVE",
        "disable": lambda u: u["status"] == "DISABLED",
        "reset_traffic": lambda u: u["userTraffic"]["usedTrafficBytes"] == 0,
        "set_limits": lambda u: u["hwidDeviceLimit"] == 0 and u["trafficLimitBytes"] == 0,
        "set_squads": lambda u: [s["uuid"] for s in u["activeInternalSquads"]] == [commerce.SQUAD_B],
        "extend": lambda u: u["expireAt"].startswith(
            (kwargs.get("ends_at", utcnow()) + datetime.timedelta(hours=24)).isoformat(timespec="seconds")
        ),
    }[operation]
    assert expected(user), user


def test_reconcile_of_an_ended_entitlement_keeps_the_panels_expiry_instead_of_failing(panel):
    settlement = settle()
    run_operation(settlement.operation_id)
    ended = utcnow().replace(microsecond=0) - datetime.timedelta(days=5)
    Entitlement.update(ends_at=ended, starts_at=ended - datetime.timedelta(days=30), grace_period_hours=0).where(
        Entitlement.id == settlement.entitlement_id
    ).execute()
    entitlement = Entitlement.get_by_id(settlement.entitlement_id)
    reconcile = enqueue(entitlement, "reconcile", DesiredState.from_entitlement(entitlement), "reconcile:t:5")
    run_operation(reconcile.id)
    assert op(reconcile.id).status == "succeeded"


def test_a_run_that_cannot_record_gives_its_lease_back(panel, monkeypatch):
    settlement = settle()

    def refused(claim, outcome):
        raise RuntimeError("the database refused the record transaction")

    monkeypatch.setattr(worker, "record", refused)
    run_operation(settlement.operation_id)
    operation = op(settlement.operation_id)
    assert operation.status == "running" and operation.next_attempt_at <= utcnow()
    monkeypatch.undo()
    run_operation(settlement.operation_id)  # takes over at once instead of waiting out the lease
    assert op(settlement.operation_id).status == "succeeded"
    assert [(h.attempt, h.status) for h in history(settlement.operation_id)] == [(1, "retrying"), (2, "succeeded")]


# -- concurrency ------------------------------------------------------------------------------


def test_overlapping_serializable_claims_of_adjacent_operations_both_commit(panel):
    """A claim touches no index (SPEC 2.9's claim, migration 0003), so two claims of
    neighbouring operations running at the same time do not refuse to serialize."""
    from models.transactions import is_postgres

    if not is_postgres():
        pytest.skip("SQLite runs one writer at a time; page-level predicate locks are PostgreSQL's")
    import psycopg2

    first, second = settle(), settle()
    connections = [psycopg2.connect(db.obj.database) for _ in range(2)]
    try:
        cursors = [connection.cursor() for connection in connections]
        for cursor, settlement in zip(cursors, (first, second)):
            cursor.execute("BEGIN ISOLATION LEVEL SERIALIZABLE; SET LOCAL enable_seqscan = off")
            cursor.execute(worker._CLAIM_SQL + " FOR UPDATE OF f, e", (settlement.operation_id,))
            assert cursor.fetchone()[3] == "pending"
        lease = utcnow() + datetime.timedelta(seconds=rules.CLAIM_LEASE_S)
        for cursor, settlement in zip(cursors, (first, second)):
            row = worker.OperationRow(settlement.operation_id, 0, "create", "pending", "", 0, None, "")
            sql, params = worker._set(row, status="running", attempt_count=1, next_attempt_at=lease)
            cursor.execute(sql, params)
        for connection in connections:
            connection.commit()  # a serialization failure would raise here
    finally:
        for connection in connections:
            connection.close()
    assert op(first.operation_id).status == op(second.operation_id).status == "running"


def test_recording_a_success_updates_the_entitlement_in_place(panel):
    """The observed status and reconciled_at that a success writes are in no index of
    entitlements (migration 0007), so on PostgreSQL the update is HOT: it adds no index
    entry to the pages that concurrent records of neighbouring entitlements read."""
    from models.transactions import is_postgres

    if not is_postgres():
        pytest.skip("HOT updates are PostgreSQL's")
    import psycopg2

    settlement = settle()
    sql, params = worker._observed_entitlement(settlement.entitlement_id, "active", "{}", utcnow())
    connection = psycopg2.connect(db.obj.database)
    try:
        cursor = connection.cursor()
        cursor.execute(sql, params)
        cursor.execute(
            "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_xact_user_tables WHERE relname = 'entitlements'"
        )
        assert cursor.fetchone() == (1, 1)
        connection.rollback()
    finally:
        connection.close()


# -- one process's transactions ---------------------------------------------------------------


def test_a_process_runs_at_most_its_transaction_slots_of_claims_and_records_at_once(panel, backend, monkeypatch):
    """16 runs at once (the critical queue's threads) never hold more than
    TRANSACTION_SLOTS claim or record transactions open together, and every
    one of them still fulfils its order. (SQLite's write lock already lets
    only one in at a time.)"""
    import threading
    import time

    settlements = [settle() for _ in range(16)]
    lock = threading.Lock()
    open_now = [0]
    most = [0]

    def counted(step):
        def run(*args):
            with lock:
                open_now[0] += 1
                most[0] = max(most[0], open_now[0])
            try:
                time.sleep(0.02)  # long enough for the other threads to pile up behind the slots
                return step(*args)
            finally:
                with lock:
                    open_now[0] -= 1

        return run

    monkeypatch.setattr(worker, "claim", counted(worker.claim))
    monkeypatch.setattr(worker, "record", counted(worker.record))
    threads = [
        threading.Thread(target=worker.fulfillment.call_local, kwargs={"operationId": s.operation_id})
        for s in settlements
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    db.close()
    assert most[0] == (worker.TRANSACTION_SLOTS if backend == "postgres" else 1)
    assert all(op(s.operation_id).status == "succeeded" for s in settlements)
    assert all(Order.get_by_id(s.order_id).status == "fulfilled" for s in settlements)
