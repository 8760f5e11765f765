"""SPEC 2.16, 2.18, 2.19, 2.25: operator changes, pause/resume, and the reconcile and revive passes."""

import datetime
import threading

import pytest
import requests

from commerce import phase
from commerce.settlement import settle_order
from fulfillment import changes, repair, rules
from fulfillment.desired_state import DesiredState
from jobs import fulfillment as worker
from jobs.passes import fulfillment_reconcile, fulfillment_revive
from models.base import db, utcnow
from models.commerce import Order
from models.fulfillment import Entitlement, EntitlementDrift, FulfillmentOperation
from models.jobs import Job
from models.ops import AuditEvent
from models.transactions import retry_serializable
from tests.fulfillment.test_worker import enqueue, job_of, op, run_operation, subscription_of
from tests.support import commerce
from tests.support.direct import run_next
from tests.web import test_panel_api as api
from tests.web.conftest import serving

# Every test that settles or refunds an order leaves a balanced ledger and no wallet below zero.
pytestmark = pytest.mark.usefixtures("ledger_invariant")


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
    settlement = settle_order(commerce.order(commerce.customer(), commerce.limited_plan()).id, "provider_webhook")
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


CHANGES = {
    "extend": lambda entitlement: {"ends_at": entitlement.ends_at + datetime.timedelta(days=30)},
    "set_limits": lambda entitlement: {"device_limit": 9, "traffic_bytes": 1 << 40},
    "set_squads": lambda entitlement: {"squad_ids": [commerce.SQUAD_B]},
}


def panel_view(panel, username):
    user = panel.user(username)
    squads = sorted(squad["uuid"] for squad in user["activeInternalSquads"])
    return user["expireAt"], user["trafficLimitBytes"], user["hwidDeviceLimit"], squads


def entitlement_view(entitlement_id):
    e = Entitlement.get_by_id(entitlement_id)
    return e.ends_at, e.traffic_allowance_bytes, e.device_limit, sorted(e.squads)


def reconcile_now(entitlement_id):
    Entitlement.update(reconciled_at=None).where(Entitlement.id == entitlement_id).execute()
    fulfillment_reconcile.dispatch()
    reconcile = FulfillmentOperation.get(
        FulfillmentOperation.operation == "reconcile", FulfillmentOperation.entitlement == entitlement_id
    )
    run_operation(reconcile.id)
    assert FulfillmentOperation.get_by_id(reconcile.id).status == "succeeded"


@pytest.mark.parametrize("operation", sorted(CHANGES))
def test_a_cancelled_change_never_reaches_the_panel_and_leaves_the_entitlement_where_it_was(
    provisioned, panel, operation
):
    subscription = subscription_of(provisioned)
    username = subscription.remote_username
    entitlement_before = entitlement_view(provisioned.entitlement_id)
    panel_before = panel_view(panel, username)
    panel.set_faults(fail_rate=1.0)
    kwargs = CHANGES[operation](Entitlement.get_by_id(provisioned.entitlement_id))
    answer = change(subscription, operation, **kwargs)
    run_operation(answer["operationId"])
    assert FulfillmentOperation.get_by_id(answer["operationId"]).status == "retrying"
    assert entitlement_view(provisioned.entitlement_id) == entitlement_before  # queued is not applied

    repair.cancel_operation(answer["operationId"], "ops@example", "customer changed their mind")
    panel.clear_faults()
    reconcile_now(provisioned.entitlement_id)
    assert panel_view(panel, username) == panel_before
    assert entitlement_view(provisioned.entitlement_id) == entitlement_before


@pytest.mark.parametrize("operation", sorted(CHANGES))
def test_an_applied_change_is_written_to_the_entitlement_and_reconcile_keeps_it(provisioned, panel, operation):
    subscription = subscription_of(provisioned)
    kwargs = CHANGES[operation](Entitlement.get_by_id(provisioned.entitlement_id))
    answer = change(subscription, operation, **kwargs)
    run_operation(answer["operationId"])
    applied = entitlement_view(provisioned.entitlement_id)
    pushed = panel_view(panel, subscription.remote_username)
    expected = {
        "extend": lambda: applied[0] == kwargs["ends_at"],
        "set_limits": lambda: applied[1:3] == (1 << 40, 9),
        "set_squads": lambda: applied[3] == [commerce.SQUAD_B],
    }[operation]
    assert expected(), applied
    reconcile_now(provisioned.entitlement_id)
    assert panel_view(panel, subscription.remote_username) == pushed


def test_a_change_queued_after_another_carries_what_the_first_applied(provisioned, panel):
    """Each operation reads the fields it does not set when it runs: a set_limits queued
    before an extend was applied does not push the old period back."""
    subscription = subscription_of(provisioned)
    entitlement = Entitlement.get_by_id(provisioned.entitlement_id)
    extend = change(subscription, "extend", "r-extend", ends_at=entitlement.ends_at + datetime.timedelta(days=30))
    limits = change(subscription, "set_limits", "r-limits", device_limit=7)
    run_operation(extend["operationId"])
    run_operation(limits["operationId"])
    ends_at, _, devices, _ = entitlement_view(entitlement.id)
    assert (ends_at, devices) == (entitlement.ends_at + datetime.timedelta(days=30), 7)
    expire_at = panel.user(subscription.remote_username)["expireAt"]
    assert expire_at.startswith((ends_at + datetime.timedelta(hours=24)).isoformat(timespec="seconds"))


# -- one operation of an entitlement at the panel at a time (SPEC 2.19) -------------------------


def test_a_claim_finding_another_operation_of_its_entitlement_at_the_panel_snoozes_to_its_lease_end(provisioned):
    subscription = subscription_of(provisioned)
    entitlement = Entitlement.get_by_id(provisioned.entitlement_id)
    extend = change(subscription, "extend", ends_at=entitlement.ends_at + datetime.timedelta(days=30))
    reconcile = enqueue(entitlement, "reconcile", DesiredState.from_entitlement(entitlement), "reconcile:race:1")
    claimed = retry_serializable(lambda: worker.claim(extend["operationId"]))
    assert isinstance(claimed, worker.Claim)
    decision = retry_serializable(lambda: worker.claim(reconcile.id))
    assert isinstance(decision, worker.Snooze) and 100 < decision.seconds <= rules.CLAIM_LEASE_S + 1
    assert FulfillmentOperation.get_by_id(reconcile.id).status == "pending"
    retry_serializable(lambda: worker.record(claimed, worker.call(claimed)))
    assert isinstance(retry_serializable(lambda: worker.claim(reconcile.id)), worker.Claim)


def test_a_reconcile_and_an_extend_racing_on_one_entitlement_are_never_at_the_panel_together(provisioned, panel):
    subscription = subscription_of(provisioned)
    username = subscription.remote_username
    entitlement = Entitlement.get_by_id(provisioned.entitlement_id)
    extend = change(subscription, "extend", ends_at=entitlement.ends_at + datetime.timedelta(days=30))
    reconcile = enqueue(entitlement, "reconcile", DesiredState.from_entitlement(entitlement), "reconcile:race:2")
    operations = (extend["operationId"], reconcile.id)
    panel.set_faults(latency_ms=300)  # every call is long enough for the other claim to happen inside it
    start = threading.Barrier(2)

    def run_one():
        start.wait()
        run_next()

    before = len(panel.requests_of(username))
    threads = [threading.Thread(target=run_one) for _ in operations]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    for operation_id in operations:  # the one that snoozed runs now
        if FulfillmentOperation.get_by_id(operation_id).status != "succeeded":
            run_operation(operation_id)
    assert [FulfillmentOperation.get_by_id(o).status for o in operations] == ["succeeded", "succeeded"]
    calls = panel.requests_of(username)[before:]
    assert len(calls) >= 4
    for earlier, later in zip(calls, calls[1:]):
        assert later["arrived"] >= earlier["done"], calls
    assert Entitlement.get_by_id(entitlement.id).ends_at == entitlement.ends_at + datetime.timedelta(days=30)


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


def test_a_resume_changes_nothing_until_its_enable_is_applied_and_a_cancelled_one_leaves_the_pause(provisioned, panel):
    subscription = subscription_of(provisioned)
    run_operation(changes.pause(subscription.customer_id, subscription.id, "p1", "ops", "travel").id)
    paused = Entitlement.get_by_id(provisioned.entitlement_id)
    assert paused.status == "paused"
    resumed = changes.resume(subscription.customer_id, subscription.id, "r1", "ops", "back")
    assert changes.resume(subscription.customer_id, subscription.id, "r1", "ops", "back").id == resumed.id
    waiting = Entitlement.get_by_id(provisioned.entitlement_id)
    # SPEC 2.1: nothing but pending/superseded is written locally; the pause holds until applied.
    assert (waiting.status, waiting.paused_at, waiting.ends_at) == ("paused", paused.paused_at, paused.ends_at)

    repair.cancel_operation(resumed.id, "ops", "not yet")
    reconcile_now(provisioned.entitlement_id)
    after = Entitlement.get_by_id(provisioned.entitlement_id)
    assert (after.status, after.paused_at, after.ends_at) == ("paused", paused.paused_at, paused.ends_at)
    assert panel.user(subscription.remote_username)["status"] == "DISABLED"


def test_a_renewal_of_a_paused_subscription_stays_paused_until_a_resume_gives_the_time_back(provisioned, panel):
    subscription = subscription_of(provisioned)
    username = subscription.remote_username
    run_operation(changes.pause(subscription.customer_id, subscription.id, "p1", "ops", "travel").id)
    first = Entitlement.get_by_id(provisioned.entitlement_id)
    paused_at = first.paused_at - datetime.timedelta(days=3)
    Entitlement.update(paused_at=paused_at).where(Entitlement.id == first.id).execute()

    renewal = settle_order(
        commerce.order(subscription.customer, first.plan, "renewal", subscription).id, "provider_webhook"
    )
    run_operation(renewal.operation_id)
    renewed = Entitlement.get_by_id(renewal.entitlement_id)
    assert (renewed.status, renewed.paused_at) == ("paused", paused_at)
    assert renewed.starts_at == first.ends_at  # the paused period's end stood still
    assert Entitlement.get_by_id(first.id).status == "superseded"
    assert panel.user(username)["status"] == "DISABLED"

    run_operation(changes.resume(subscription.customer_id, subscription.id, "r1", "ops", "back").id)
    resumed = Entitlement.get_by_id(renewal.entitlement_id)
    gained = resumed.ends_at - renewed.ends_at
    assert datetime.timedelta(days=3) <= gained <= datetime.timedelta(days=3, seconds=5)
    assert (resumed.status, resumed.paused_at) == ("active", None)
    assert panel.user(username)["status"] == "ACTIVE"


def test_a_reprovision_after_a_cancelled_create_gives_the_paid_customer_access(panel):
    settlement = settle_order(commerce.order(commerce.customer(), commerce.limited_plan()).id, "provider_webhook")
    subscription = subscription_of(settlement)
    with db.atomic():
        repair.cancel_operation(settlement.operation_id, "ops@example", "the advice says so")
    assert phase.standings([subscription.id])[subscription.id].phase == phase.FAILED
    operation = changes.reprovision(subscription.customer_id, subscription.id, "req-1", "ops@example", "ticket 9")
    assert (operation.operation, operation.entitlement_id) == ("create", settlement.entitlement_id)
    run_operation(operation.id)
    assert op(operation.id).status == "succeeded"
    assert panel.user(subscription_of(settlement).remote_username) is not None
    assert phase.standings([subscription.id])[subscription.id].phase == phase.ACTIVE
    assert Order.get_by_id(Entitlement.get_by_id(settlement.entitlement_id).order_id).status == "fulfilled"


def test_a_reprovision_of_a_renewal_whose_create_failed_creates_it_on_the_user_the_first_period_made(provisioned):
    subscription = subscription_of(provisioned)
    plan = Entitlement.get_by_id(provisioned.entitlement_id).plan
    order = commerce.order(subscription.customer, plan, "renewal", subscription)
    renewal = settle_order(order.id, "provider_webhook")
    FulfillmentOperation.update(status="failed", last_error_code=rules.INVALID_DESIRED_STATE).where(
        FulfillmentOperation.id == renewal.operation_id
    ).execute()
    assert phase.standings([subscription.id])[subscription.id].phase == phase.FAILED
    operation = changes.reprovision(subscription.customer_id, subscription.id, "req-1", "ops@example", "ticket 9")
    assert (operation.operation, operation.entitlement_id) == ("create", renewal.entitlement_id)
    run_operation(operation.id)
    assert op(operation.id).status == "succeeded"
    assert phase.standings([subscription.id])[subscription.id].phase == phase.ACTIVE
    assert subscription_of(renewal).remote_user_id == subscription.remote_user_id


# -- the reconcile pass (SPEC 2.16) ----------------------------------------------------------------


def test_reconcile_pass_selects_due_entitlements_only_and_converges_within_a_bucket(panel):
    customer, plan = commerce.customer(), commerce.limited_plan()
    settled = [settle_order(commerce.order(customer, plan).id, "provider_webhook") for _ in range(4)]
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


def test_a_panel_that_lost_every_user_gets_them_back_by_the_next_reconcile_run_and_the_drift_page_says_so(panel):
    customer, plan = commerce.customer(), commerce.limited_plan()
    settled = [settle_order(commerce.order(customer, plan).id, "provider_webhook") for _ in range(3)]
    now = utcnow()  # a run's checks end a little after it started
    for settlement in settled:
        run_operation(settlement.operation_id)
    assert fulfillment_reconcile.dispatch(utcnow()) == (0, 0)  # all just checked
    for user in panel.users():
        panel.delete_user(user["username"])

    next_run = now + datetime.timedelta(seconds=rules.RECONCILE_INTERVAL_S)
    assert fulfillment_reconcile.dispatch(next_run) == (3, 0)
    for reconcile in FulfillmentOperation.select().where(FulfillmentOperation.operation == "reconcile"):
        run_operation(reconcile.id)
        assert op(reconcile.id).status == "succeeded"
    assert sorted(user["username"] for user in panel.users()) == sorted(
        subscription_of(settlement).remote_username for settlement in settled
    )
    drifts = EntitlementDrift.select().where(EntitlementDrift.kind == "missing_remote")
    assert sorted(drift.entitlement_id for drift in drifts) == sorted(s.entitlement_id for s in settled)
    assert {drift.status for drift in drifts} == {"resolved"}

    with serving() as web:
        text = requests.get(web + "/panel/system/drift", headers=api.session_of(web), timeout=10).text
    assert "3 user(s) were missing on the panel and were recreated by reconcile" in text
    assert text.count("<td>missing_remote</td>") == 3 and "matches the panel" not in text


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
        settle_order(commerce.order(customer, plan).id, "provider_webhook") for _ in range(4)
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
    settlement = settle_order(commerce.order(commerce.customer(), commerce.limited_plan()).id, "provider_webhook")
    job = job_of(settlement.operation_id)
    Job.update(state="completed", finalized_at=utcnow()).where(Job.id == job.id).execute()  # key kept
    age(settlement.operation_id, minutes=30, next_attempt_minutes=15)
    assert fulfillment_revive.dispatch() == (1, 0)
    assert Job.get_by_id(job.id).state == "available"
    run_operation(settlement.operation_id)
    assert op(settlement.operation_id).status == "succeeded"


def test_revive_takes_over_an_expired_claim(panel):
    settlement = settle_order(commerce.order(commerce.customer(), commerce.limited_plan()).id, "provider_webhook")
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
