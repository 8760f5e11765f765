"""SPEC 15.6, 2.19, 2.25: bulk actions — a preview freezes its items and changes nothing; once confirmed, each run
of the pass applies 50 items, each one operator change keyed `bulk:<id>:<position>` in the item's own
transaction; pause, resume and cancel; items the change no longer fits are skipped with the refusal's code."""

import datetime
import json

import pytest

from fulfillment import bulk, changes
from jobs.passes import bulk_actions
from models.base import db, utcnow
from models.bulk import BulkAction, BulkActionItem
from models.fulfillment import Entitlement, FulfillmentOperation
from models.jobs import Job
from models.ops import AuditEvent
from tests.support import commerce, subscribers
from tests.support.direct import run_next

ACTOR = "operator:alice"
REASON = "panel outage on 1 December"
NEW_SQUAD = "0a0a0a0a-1b1b-4c2c-8d3d-4e4e4e4e4e4e"


@pytest.fixture
def plan(database):
    return commerce.limited_plan()


def current(subscription_id):
    return changes.current_entitlement(subscription_id)


def confirmed(action, **options):
    previewed = bulk.preview(action, ACTOR, **options)
    return bulk.change_state(previewed.id, "confirm", ACTOR, REASON)


def item_statuses(bulk_id):
    return [i.status for i in BulkActionItem.select().where(BulkActionItem.bulk_action == bulk_id)]


def test_a_preview_freezes_the_active_subscriptions_of_the_plan_and_changes_nothing(panel, plan):
    chosen = subscribers.provisioned(panel, plan, 3)
    other_plan = commerce.limited_plan("other")
    subscribers.provisioned(panel, other_plan, 1)
    [paused] = subscribers.provisioned(panel, plan, 1)
    Entitlement.update(paused_at=utcnow(), status="paused").where(Entitlement.subscription == paused).execute()
    [ended] = subscribers.provisioned(panel, plan, 1, ends_in=datetime.timedelta(days=-1))

    previewed = bulk.preview("extend", ACTOR, plan_id=plan.id, days=3)

    assert (previewed.status, previewed.item_count) == ("previewed", 3)
    items = BulkActionItem.select().where(BulkActionItem.bulk_action == previewed.id).order_by(BulkActionItem.position)
    assert [(i.position, i.subscription_id, i.status) for i in items] == [
        (n, s, "pending") for n, s in enumerate(chosen, 1)
    ]
    assert paused not in chosen and ended not in chosen
    assert FulfillmentOperation.select().count() == 0 and Job.select().count() == 0
    [audit] = AuditEvent.select().where(AuditEvent.action == "panel.bulk.previewed")
    assert (audit.actor, json.loads(audit.details)["items"]) == (ACTOR, 3)
    # Without a plan: every active subscription, frozen as it stands now.
    assert bulk.preview("extend", ACTOR, days=3).item_count == 4
    subscribers.provisioned(panel, plan, 2)
    assert BulkAction.get_by_id(previewed.id).item_count == 3
    bulk.apply_batch()  # a preview is not confirmed: nothing is applied
    assert FulfillmentOperation.select().count() == 0


def test_a_confirmed_extend_applies_50_items_a_run_each_one_operation_keyed_by_its_position(panel, plan):
    chosen = subscribers.provisioned(panel, plan, 52)
    ends = {s: current(s).ends_at for s in chosen}
    action = confirmed("extend", plan_id=plan.id, days=3)

    first = bulk_actions.bulk_actions()
    assert (first["applied"], first["finished"]) == (50, 0)
    assert bulk.progress(action.id)["items"] == {"pending": 2, "applied": 50, "skipped": 0, "cancelled": 0}
    assert BulkAction.get_by_id(action.id).status == "running"
    second = bulk_actions.bulk_actions()
    assert (second["applied"], second["finished"]) == (2, 1)
    assert BulkAction.get_by_id(action.id).status == "done"

    items = BulkActionItem.select().where(BulkActionItem.bulk_action == action.id).order_by(BulkActionItem.position)
    for item in items:
        operation = FulfillmentOperation.get_by_id(item.operation_id)
        assert operation.idempotency_key == f"bulk:{action.id}:{item.position}"
        assert (operation.operation, operation.correlation_id) == ("extend", f"bulk:{action.id}")
        assert json.loads(operation.desired_state)["endsAt"].startswith(
            (ends[item.subscription_id] + datetime.timedelta(days=3)).isoformat()
        )
    audits = AuditEvent.select().where(AuditEvent.action == "panel.subscription.extend")
    assert sorted(a.subject_id for a in audits) == chosen
    assert {(a.actor, a.reason) for a in audits} == {(ACTOR, REASON)}
    assert bulk.progress(action.id)["operations"]["pending"] == 52
    assert Job.select().where(Job.kind == "fulfillment").count() == 52
    assert bulk_actions.bulk_actions()["applied"] == 0  # a finished action has nothing left
    # Pushed to the panel by the fulfillment worker: one operation run here (test_bulk_processes.py runs them all
    # in worker processes).
    assert run_next("fulfillment")
    [done] = FulfillmentOperation.select().where(FulfillmentOperation.status == "succeeded")
    extended = done.entitlement.subscription_id
    assert current(extended).ends_at == ends[extended] + datetime.timedelta(days=3)
    [(before, after)] = panel.expiry_moves(current(extended).subscription.remote_username)
    assert after - before == datetime.timedelta(days=3)


def test_an_item_whose_transaction_fails_after_queueing_its_operation_leaves_nothing_and_is_applied_once_later(
    panel, plan, monkeypatch
):
    subscribers.provisioned(panel, plan, 2)
    action = confirmed("extend", days=3)
    [first, second] = bulk.due_items()
    real_update = BulkActionItem.update

    def dying_update(*args, **kwargs):
        raise RuntimeError("the worker died between queueing the operation and marking the item")

    monkeypatch.setattr(BulkActionItem, "update", dying_update)
    with pytest.raises(RuntimeError):
        bulk.apply_item(first)
    monkeypatch.setattr(BulkActionItem, "update", real_update)
    assert FulfillmentOperation.select().count() == 0 and Job.select().count() == 0
    assert item_statuses(action.id) == ["pending", "pending"]

    assert [bulk.apply_item(first), bulk.apply_item(first), bulk.apply_item(second)] == ["applied", None, "applied"]
    assert FulfillmentOperation.select().count() == 2
    assert Job.select().where(Job.kind == "fulfillment").count() == 2


def test_pause_stops_the_pass_resume_goes_on_and_cancel_leaves_the_pending_items_unapplied(panel, plan):
    subscribers.provisioned(panel, plan, 3)
    action = confirmed("extend", days=1)
    bulk.apply_item(bulk.due_items()[0])
    bulk.change_state(action.id, "pause", ACTOR, "too many tickets")
    assert bulk.apply_batch()["applied"] == 0
    with pytest.raises(bulk.BulkRejected) as twice:
        bulk.change_state(action.id, "pause", ACTOR, "again")
    assert (twice.value.code, twice.value.http_status) == ("bulk_action_state", 409)
    bulk.change_state(action.id, "resume", ACTOR, "tickets answered")
    bulk.apply_item(bulk.due_items()[0])
    bulk.change_state(action.id, "cancel", ACTOR, "enough")

    assert bulk.apply_batch()["applied"] == 0
    assert item_statuses(action.id) == ["applied", "applied", "cancelled"]
    assert FulfillmentOperation.select().count() == 2
    verbs = [a.action for a in AuditEvent.select().where(AuditEvent.subject_type == "bulk_action")]
    assert verbs == [f"panel.bulk.{verb}" for verb in ("previewed", "confirmed", "paused", "resumed", "cancelled")]
    for verb in ("confirm", "pause", "resume", "cancel"):
        with pytest.raises(bulk.BulkRejected) as ended:
            bulk.change_state(action.id, verb, ACTOR, "after the end")
        assert ended.value.code == "bulk_action_state"


def test_pause_and_resume_of_a_list_go_through_the_single_changes_skip_what_no_longer_fits_and_plans_leave_paused_out(
    panel, plan
):
    chosen = subscribers.provisioned(panel, plan, 3)
    with db.atomic():
        changes.pause_entitlement(current(chosen[1]), "panel:x:disable:1", "panel:1", ACTOR, "customer asked")

    paused = confirmed("pause", subscription_ids=chosen)
    bulk.apply_batch()
    assert item_statuses(paused.id) == ["applied", "skipped", "applied"]
    skipped = BulkActionItem.get(BulkActionItem.bulk_action == paused.id, BulkActionItem.position == 2)
    assert skipped.error_code == "already_paused" and skipped.operation_id is None
    assert all(current(s).paused_at is not None for s in chosen)
    key = FulfillmentOperation.get_by_id(BulkActionItem.get(BulkActionItem.position == 1).operation_id).idempotency_key
    assert key == f"bulk:{paused.id}:1"

    # Paused subscriptions are not active: a plan-wide change leaves them out.
    with pytest.raises(bulk.BulkRejected) as none_active:
        bulk.preview("set_squads", ACTOR, plan_id=plan.id, squad_ids=[NEW_SQUAD])
    assert none_active.value.code == "empty_selection"
    resumed = confirmed("resume", subscription_ids=[chosen[0], chosen[0]])
    bulk.apply_batch()
    assert item_statuses(resumed.id) == ["applied"]  # named twice, frozen once
    enable = FulfillmentOperation.get_by_id(BulkActionItem.get(BulkActionItem.bulk_action == resumed.id).operation_id)
    assert (enable.operation, enable.idempotency_key) == ("enable", f"bulk:{resumed.id}:1")


def test_set_squads_sends_the_new_squads_to_every_subscriber_of_the_plan(panel, plan):
    chosen = subscribers.provisioned(panel, plan, 2)
    action = confirmed("set_squads", plan_id=plan.id, squad_ids=[NEW_SQUAD])
    bulk.apply_batch()
    while run_next("fulfillment"):
        pass
    assert bulk.progress(action.id)["operations"]["succeeded"] == 2
    for subscription_id in chosen:
        user = panel.user(current(subscription_id).subscription.remote_username)
        assert [squad["uuid"] for squad in user["activeInternalSquads"]] == [NEW_SQUAD]


BAD_REQUESTS = [
    ("grow", {}, "invalid_bulk_action"),
    ("extend", {"days": 0}, "invalid_days"),
    ("extend", {"days": 3.5}, "invalid_days"),
    ("extend", {"days": True}, "invalid_days"),
    ("extend", {"days": 400}, "invalid_days"),
    ("extend", {"days": 3, "plan_id": 999}, "invalid_plan"),
    ("extend", {"days": 3, "plan_id": 2**63}, "invalid_plan"),
    ("extend", {"days": 3, "subscription_ids": ["a"]}, "invalid_subscriptions"),
    ("set_squads", {"squad_ids": [NEW_SQUAD]}, "plan_required"),
    ("set_squads", {"plan_id": 1, "squad_ids": ["not-a-uuid"]}, "invalid_squads"),
    ("set_squads", {"plan_id": 1, "squad_ids": "all"}, "invalid_squads"),
    ("pause", {}, "invalid_subscriptions"),
    ("pause", {"subscription_ids": []}, "invalid_subscriptions"),
    ("pause", {"subscription_ids": ["nobody"]}, "unknown_subscriptions"),
    ("resume", {"subscription_ids": ["x"], "days": 3}, "invalid_subscriptions"),
]


def test_bad_bulk_actions_are_refused_with_their_code_and_write_nothing(panel, plan):
    subscribers.provisioned(panel, plan, 1)
    for action, options, code in BAD_REQUESTS:
        with pytest.raises(bulk.BulkRejected) as refused:
            bulk.preview(action, ACTOR, **options)
        assert (refused.value.code, refused.value.http_status) == (code, 400), (action, options)
    assert BulkAction.select().count() == 0 and BulkActionItem.select().count() == 0
    assert AuditEvent.select().count() == 0


def test_a_selection_with_no_subscription_is_refused_with_422_and_writes_nothing(panel, plan):
    with pytest.raises(bulk.BulkRejected) as refused:
        bulk.preview("extend", ACTOR, plan_id=plan.id, days=3)
    assert (refused.value.code, refused.value.http_status) == ("empty_selection", 422)
    assert BulkAction.select().count() == 0
