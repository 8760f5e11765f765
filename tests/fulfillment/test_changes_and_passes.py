"""SPEC 2.16, 2.18, 2.19, 2.25: operator changes, pause/resume, and the reconcile and revive passes."""

import datetime

import pytest

from commerce.settlement import settle_order
from fulfillment import changes
from fulfillment.desired_state import DesiredState
from jobs.passes import fulfillment_reconcile, fulfillment_revive
from models.base import utcnow
from models.fulfillment import Entitlement, FulfillmentOperation
from models.jobs import Job
from models.ops import AuditEvent
from tests.fulfillment.test_worker import job_of, op, run_operation, subscription_of
from tests.support import commerce


@pytest.fixture
def provisioned(panel):
    settlement = settle_order(commerce.order(commerce.customer(), commerce.limited_plan()).id, "provider_webhook")
    run_operation(settlement.operation_id)
    return settlement


def change(subscription, operation, request_id="req-1", reason="ticket 7", **kwargs):
    return changes.request_change(
        subscription.customer_id, subscription.id, operation, request_id, "ops@example", reason, **kwargs
    )


# -- operator changes (SPEC 2.19) ---------------------------------------------------------------


@pytest.mark.parametrize("reason", ["", "   ", None])
def test_a_change_without_a_reason_is_refused(provisioned, reason):
    with pytest.raises(changes.ChangeRejected) as rejected:
        change(subscription_of(provisioned), "enable", reason=reason)
    assert (rejected.value.code, rejected.value.http_status) == ("reason_required", 400)


@pytest.mark.parametrize("operation", ["create", "reconcile", "delete"])
def test_create_reconcile_and_unknown_operations_are_unsupported(provisioned, operation):
    with pytest.raises(changes.ChangeRejected) as rejected:
        change(subscription_of(provisioned), operation)
    assert (rejected.value.code, rejected.value.http_status) == ("unsupported_operation", 422)


def test_a_never_provisioned_slot_is_refused(panel):
    settlement = settle_order(commerce.order(commerce.customer(), commerce.limited_plan()).id, "wallet")
    with pytest.raises(changes.ChangeRejected) as rejected:
        change(subscription_of(settlement), "disable")
    assert (rejected.value.code, rejected.value.http_status) == ("not_provisioned", 409)


def test_the_subscription_is_resolved_through_the_customer_in_the_path(provisioned):
    subscription = subscription_of(provisioned)
    stranger = commerce.customer("Mallory")
    with pytest.raises(changes.ChangeRejected) as rejected:
        changes.request_change(stranger.id, subscription.id, "disable", "r", "ops", "why")
    assert rejected.value.http_status == 404
    assert FulfillmentOperation.select().count() == 1


def test_a_double_submitted_form_reuses_the_first_operation_and_audits_once(provisioned):
    subscription = subscription_of(provisioned)
    first = change(subscription, "disable", request_id="form-1")
    again = change(subscription, "disable", request_id="form-1")
    assert first["operationId"] == again["operationId"]
    assert AuditEvent.select().where(AuditEvent.action == "panel.subscription.disable").count() == 1
    audit = AuditEvent.get(AuditEvent.action == "panel.subscription.disable")
    assert (audit.reason, audit.category) == ("ticket 7", "subscriptions")


def test_extend_and_set_limits_validate_their_parameters(provisioned):
    subscription = subscription_of(provisioned)
    entitlement = Entitlement.get_by_id(provisioned.entitlement_id)
    for operation, kwargs, code in (
        ("extend", {}, "ends_at_required"),
        ("extend", {"ends_at": entitlement.ends_at - datetime.timedelta(days=1)}, "invalid_ends_at"),
        ("set_limits", {}, "limits_required"),
        ("set_limits", {"device_limit": -1}, "invalid_limit"),
        ("set_squads", {}, "squads_required"),
    ):
        with pytest.raises(Exception) as rejected:
            change(subscription, operation, **kwargs)
        assert rejected.value.code == code
    assert FulfillmentOperation.select().count() == 1


def test_an_operator_change_is_kept_on_the_entitlement_so_reconcile_does_not_undo_it(provisioned):
    subscription = subscription_of(provisioned)
    answer = change(subscription, "set_limits", device_limit=None, traffic_bytes=None)
    run_operation(answer["operationId"])
    entitlement = Entitlement.get_by_id(provisioned.entitlement_id)
    assert entitlement.device_limit is None and entitlement.traffic_allowance_bytes is None
    desired = DesiredState.from_entitlement(entitlement)
    assert desired.device_limit is None and desired.traffic_limit_bytes == 0


# -- pause and resume (SPEC 2.25) ---------------------------------------------------------------


def test_pause_disables_twice_is_refused_and_resume_gives_the_time_back(provisioned, panel):
    subscription = subscription_of(provisioned)
    paused = changes.pause(subscription.customer_id, subscription.id, "p1", "ops", "travel")
    run_operation(paused.id)
    assert panel.user(subscription.remote_username)["status"] == "DISABLED"
    with pytest.raises(changes.ChangeRejected) as rejected:
        changes.pause(subscription.customer_id, subscription.id, "p2", "ops", "again")
    assert rejected.value.code == "already_paused"

    before = Entitlement.get_by_id(provisioned.entitlement_id)
    Entitlement.update(paused_at=before.paused_at - datetime.timedelta(days=3)).where(
        Entitlement.id == before.id
    ).execute()
    resumed = changes.resume(subscription.customer_id, subscription.id, "r1", "ops", "back")
    run_operation(resumed.id)
    after = Entitlement.get_by_id(provisioned.entitlement_id)
    gained = after.ends_at - before.ends_at
    assert datetime.timedelta(days=3) <= gained <= datetime.timedelta(days=3, seconds=5)
    assert after.paused_at is None and after.status == "active"
    assert panel.user(subscription.remote_username)["status"] == "ACTIVE"


def test_reconcile_keeps_a_paused_entitlement_paused(provisioned, panel):
    subscription = subscription_of(provisioned)
    run_operation(changes.pause(subscription.customer_id, subscription.id, "p1", "ops", "travel").id)
    panel.edit_user(subscription.remote_username, status="ACTIVE")  # someone enabled it on the panel
    Entitlement.update(reconciled_at=None).execute()
    fulfillment_reconcile.dispatch()
    reconcile = FulfillmentOperation.get(FulfillmentOperation.operation == "reconcile")
    run_operation(reconcile.id)
    assert panel.user(subscription.remote_username)["status"] == "DISABLED"
    assert Entitlement.get_by_id(provisioned.entitlement_id).status == "paused"


# -- the reconcile pass (SPEC 2.16) ----------------------------------------------------------------


def test_reconcile_pass_selects_due_entitlements_only_and_converges_within_a_bucket(panel):
    customer, plan = commerce.customer(), commerce.limited_plan()
    settled = [settle_order(commerce.order(customer, plan).id, "wallet") for _ in range(4)]
    for settlement in settled[:3]:
        run_operation(settlement.operation_id)
    fresh, old, ancient, pending = (Entitlement.get_by_id(s.entitlement_id) for s in settled)
    now = utcnow()
    Entitlement.update(reconciled_at=now - datetime.timedelta(minutes=20)).where(Entitlement.id == old.id).execute()
    Entitlement.update(
        reconciled_at=None, ends_at=now - datetime.timedelta(days=31), starts_at=now - datetime.timedelta(days=61)
    ).where(Entitlement.id == ancient.id).execute()
    assert pending.status == "pending"

    assert fulfillment_reconcile.dispatch(now) == (1, 0)
    reconcile = FulfillmentOperation.get(FulfillmentOperation.operation == "reconcile")
    bucket = fulfillment_reconcile.bucket_of(now)
    assert reconcile.entitlement_id == old.id
    assert reconcile.idempotency_key == f"reconcile:{old.id}:{bucket}"
    assert reconcile.correlation_id == f"scheduler:{bucket}"
    assert DesiredState.parse(reconcile.desired_state).effective_at is None
    assert fulfillment_reconcile.dispatch(now) == (0, 1)  # same bucket: same operation, same job
    assert FulfillmentOperation.select().where(FulfillmentOperation.operation == "reconcile").count() == 1
    run_operation(reconcile.id)
    assert Entitlement.get_by_id(old.id).reconciled_at > now - datetime.timedelta(seconds=5)
    assert fresh.id != old.id


def test_reconcile_buckets_are_fifteen_minutes():
    at = datetime.datetime(2026, 11, 29, 10, 44, 59)
    assert fulfillment_reconcile.bucket_of(at) == "2026-11-29T10:30Z"
    assert fulfillment_reconcile.bucket_of(at + datetime.timedelta(seconds=1)) == "2026-11-29T10:45Z"


# -- the revive pass (SPEC 2.18) -------------------------------------------------------------------


def age(operation_id, minutes, next_attempt_minutes):
    now = utcnow()
    FulfillmentOperation.update(
        created_at=now - datetime.timedelta(minutes=minutes),
        next_attempt_at=None
        if next_attempt_minutes is None
        else now - datetime.timedelta(minutes=next_attempt_minutes),
    ).where(FulfillmentOperation.id == operation_id).execute()


def test_revive_gives_a_job_to_operations_that_lost_theirs_and_nothing_to_backing_off_ones(panel):
    customer, plan = commerce.customer(), commerce.limited_plan()
    orphan, backing_off, recent, discarded = (
        settle_order(commerce.order(customer, plan).id, "wallet") for _ in range(4)
    )
    Job.delete().where(Job.id == job_of(orphan.operation_id).id).execute()  # settled without a job
    Job.update(state="retryable").where(Job.id == job_of(backing_off.operation_id).id).execute()
    Job.update(state="discarded", finalized_at=utcnow(), unique_key=None).where(
        Job.id == job_of(discarded.operation_id).id
    ).execute()
    for settlement in (orphan, backing_off, discarded):
        age(settlement.operation_id, minutes=30, next_attempt_minutes=15)
    age(recent.operation_id, minutes=30, next_attempt_minutes=5)  # its next attempt is only 5 min old

    assert fulfillment_revive.dispatch() == (2, 1)
    revived = {j.args_dict["operationId"] for j in Job.select().where(Job.state == "available")}
    assert {orphan.operation_id, discarded.operation_id} <= revived
    run_operation(orphan.operation_id)
    assert op(orphan.operation_id).status == "succeeded"


def test_revive_reopens_a_completed_job_that_still_holds_an_open_operations_key(panel):
    settlement = settle_order(commerce.order(commerce.customer(), commerce.limited_plan()).id, "wallet")
    job = job_of(settlement.operation_id)
    Job.update(state="completed", finalized_at=utcnow()).where(Job.id == job.id).execute()  # key kept
    age(settlement.operation_id, minutes=30, next_attempt_minutes=15)
    assert fulfillment_revive.dispatch() == (1, 0)
    assert Job.get_by_id(job.id).state == "available"
    run_operation(settlement.operation_id)
    assert op(settlement.operation_id).status == "succeeded"


def test_revive_takes_over_an_expired_claim(panel):
    settlement = settle_order(commerce.order(commerce.customer(), commerce.limited_plan()).id, "wallet")
    FulfillmentOperation.update(status="running", attempt_count=1).where(
        FulfillmentOperation.id == settlement.operation_id
    ).execute()
    Job.update(state="discarded", finalized_at=utcnow(), unique_key=None).where(
        Job.id == job_of(settlement.operation_id).id
    ).execute()
    age(settlement.operation_id, minutes=30, next_attempt_minutes=12)
    assert fulfillment_revive.dispatch() == (1, 0)
    run_operation(settlement.operation_id)
    operation = op(settlement.operation_id)
    assert operation.status == "succeeded" and operation.attempt_count == 2
