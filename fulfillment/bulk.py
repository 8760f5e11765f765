"""Bulk actions (SPEC 15.6, 2.19): one operator change to many subscriptions, applied one item at a time.

An operator *previews* a change — extend every active subscription of a
plan (or every active one) by N days, set the squads of a plan's active
subscribers, pause or resume a list of subscriptions — which freezes the
subscriptions it applies to as numbered items, shown with their count.
Nothing changes until the preview is *confirmed* with a reason; the
`bulk_actions` pass (jobs/passes/bulk_actions.py) then applies BATCH items a
run, each in its own transaction that marks the item and queues its change
exactly as the back office's own change does (fulfillment/changes.py: the
same checks, the same audit event per subscription), under the key
`bulk:<id>:<position>`. The item's mark and its operation commit together,
so a run killed anywhere applies an item once or not at all, and the next
run takes the items still pending: none twice, none skipped. Each operation
then reaches the panel once through the fulfillment worker.

A running action can be paused, resumed and cancelled (cancelled items
stay as they were); each of these, the preview and the confirmation is
audited (category `subscriptions`, `panel.bulk.<verb>`). An item the change
no longer fits when its turn comes (the subscription was paused meanwhile,
is no longer provisioned, …) is `skipped` with the refusal's code, as the
single change would have been refused.
"""

import datetime
import json
import uuid
from collections import Counter

from peewee import JOIN, fn

from fulfillment import changes
from fulfillment.enqueue import FulfillmentRequestRejected
from models.base import db, utcnow
from models.bulk import BULK_ACTIONS, ITEM_STATUSES, BulkAction, BulkActionItem
from models.commerce import Plan, Subscription
from models.fulfillment import OPERATION_STATUSES, Entitlement, FulfillmentOperation
from models.transactions import locked
from ops.records import record_audit

BATCH = 50  # items a run applies (SPEC 5.1)
MAX_DAYS = 366
MAX_SQUADS = 100
MAX_LISTED = 10_000  # subscriptions named in one pause or resume
MAX_ITEMS = 100_000
INSERT_CHUNK = 500  # rows per INSERT: SQLite takes at most 32 766 parameters
PROVISIONED = ("active", "limited")  # an "active" subscription's current entitlement is one of these
CATEGORY = "subscriptions"

INVALID_BULK_ACTION = "invalid_bulk_action"
INVALID_DAYS = "invalid_days"
INVALID_PLAN = "invalid_plan"
PLAN_REQUIRED = "plan_required"
INVALID_SQUADS = "invalid_squads"
INVALID_SUBSCRIPTIONS = "invalid_subscriptions"
UNKNOWN_SUBSCRIPTIONS = "unknown_subscriptions"
EMPTY_SELECTION = "empty_selection"
TOO_MANY_ITEMS = "too_many_items"
BULK_ACTION_NOT_FOUND = "bulk_action_not_found"
BULK_ACTION_STATE = "bulk_action_state"
REASON_REQUIRED = "reason_required"

# verb: (the states it leaves, the state it makes)
TRANSITIONS = {
    "confirm": (("previewed",), "running"),
    "pause": (("running",), "paused"),
    "resume": (("paused",), "running"),
    "cancel": (("previewed", "running", "paused"), "cancelled"),
}
AUDITED = {"confirm": "confirmed", "pause": "paused", "resume": "resumed", "cancel": "cancelled"}


class BulkRejected(ValueError):
    """Refused before anything was written; `code` is machine-readable and `http_status` what an API answers."""

    def __init__(self, code, message, http_status=400):
        super().__init__(message)
        self.code = code
        self.http_status = http_status


def _whole(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _check_plan(plan_id, required):
    if plan_id is None:
        if required:
            raise BulkRejected(PLAN_REQUIRED, "this bulk action needs planId")
        return None
    # Past BIGINT no plan can exist, and PostgreSQL would refuse the comparison.
    if not _whole(plan_id) or not 0 < plan_id < 2**63 or Plan.get_or_none(Plan.id == plan_id) is None:
        raise BulkRejected(INVALID_PLAN, "planId names no plan")
    return plan_id


def _check_squads(squad_ids):
    if not isinstance(squad_ids, list) or len(squad_ids) > MAX_SQUADS:
        raise BulkRejected(INVALID_SQUADS, f"squadIds must be a list of at most {MAX_SQUADS} squad UUIDs")
    for squad in squad_ids:
        try:
            if not isinstance(squad, str) or str(uuid.UUID(squad)) != squad.lower():
                raise ValueError
        except ValueError:
            raise BulkRejected(INVALID_SQUADS, "each squad id must be a UUID") from None
    return sorted({squad.lower() for squad in squad_ids})


def _listed(subscription_ids):
    """The named subscriptions in the order given, once each; every one must exist."""
    if (
        not isinstance(subscription_ids, list)
        or not 1 <= len(subscription_ids) <= MAX_LISTED
        or not all(isinstance(value, str) and 0 < len(value) <= 64 for value in subscription_ids)
    ):
        raise BulkRejected(INVALID_SUBSCRIPTIONS, f"subscriptionIds must be a list of 1 to {MAX_LISTED} ids")
    wanted = list(dict.fromkeys(subscription_ids))
    known = set()
    for start in range(0, len(wanted), INSERT_CHUNK):
        chunk = wanted[start : start + INSERT_CHUNK]
        known.update(s for (s,) in Subscription.select(Subscription.id).where(Subscription.id.in_(chunk)).tuples())
    missing = len(wanted) - len(known)
    if missing:
        raise BulkRejected(UNKNOWN_SUBSCRIPTIONS, f"{missing} of the subscriptionIds name no subscription")
    return wanted


def active_subscriptions(plan_id=None, now=None):
    """Ids of the subscriptions whose current entitlement is provisioned, not paused and not over
    (of `plan_id`'s period when given), in id order."""
    now = now or utcnow()
    newer = Entitlement.alias("newer")
    replaced = newer.select(newer.id).where(
        newer.subscription == Entitlement.subscription,
        newer.status.not_in(("pending", "superseded")),
        newer.id > Entitlement.id,
    )
    query = (
        Entitlement.select(Entitlement.subscription)
        .join(Subscription, on=(Entitlement.subscription == Subscription.id))
        .where(
            Entitlement.status.in_(PROVISIONED),
            Entitlement.paused_at.is_null(),
            Entitlement.ends_at > now,
            Subscription.remote_user_id.is_null(False),
            ~fn.EXISTS(replaced),
        )
        .order_by(Entitlement.subscription)
    )
    if plan_id is not None:
        query = query.where(Entitlement.plan == plan_id)
    return [subscription_id for (subscription_id,) in query.limit(MAX_ITEMS + 1).tuples()]


def preview(action, actor, plan_id=None, days=None, squad_ids=None, subscription_ids=None):
    """Freeze the items of a bulk change and return the `previewed` action; BulkRejected writes nothing."""
    if action not in BULK_ACTIONS:
        raise BulkRejected(INVALID_BULK_ACTION, f"action must be one of {', '.join(BULK_ACTIONS)}")
    listed = action in ("pause", "resume")
    if listed and (plan_id is not None or days is not None or squad_ids is not None):
        raise BulkRejected(INVALID_SUBSCRIPTIONS, f"{action} takes subscriptionIds only")
    if not listed and subscription_ids is not None:
        raise BulkRejected(INVALID_SUBSCRIPTIONS, f"{action} chooses its subscriptions by planId, not by a list")
    if action == "extend":
        if not _whole(days) or not 1 <= days <= MAX_DAYS:
            raise BulkRejected(INVALID_DAYS, f"days must be a whole number from 1 to {MAX_DAYS}")
        if squad_ids is not None:
            raise BulkRejected(INVALID_SQUADS, "extend takes no squadIds")
    if action == "set_squads":
        if days is not None:
            raise BulkRejected(INVALID_DAYS, "set_squads takes no days")
        squad_ids = _check_squads(squad_ids)
    with db.atomic():
        if listed:
            chosen = _listed(subscription_ids)
        else:
            chosen = active_subscriptions(_check_plan(plan_id, required=action == "set_squads"))
        if not chosen:
            raise BulkRejected(EMPTY_SELECTION, "no subscription fits this bulk action", 422)
        if len(chosen) > MAX_ITEMS:
            raise BulkRejected(TOO_MANY_ITEMS, f"more than {MAX_ITEMS} subscriptions: choose a plan", 422)
        now = utcnow()
        bulk = BulkAction.create(
            action=action,
            status="previewed",
            plan=plan_id,
            days=days,
            squad_ids=None if squad_ids is None else json.dumps(squad_ids),
            item_count=len(chosen),
            created_by=actor,
            created_at=now,
            updated_at=now,
        )
        fields = [BulkActionItem.bulk_action, BulkActionItem.position, BulkActionItem.subscription,
                  BulkActionItem.status]  # fmt: skip
        rows = [(bulk.id, position, subscription_id, "pending") for position, subscription_id in enumerate(chosen, 1)]
        for start in range(0, len(rows), INSERT_CHUNK):
            BulkActionItem.insert_many(rows[start : start + INSERT_CHUNK], fields=fields).execute()
        record_audit(
            CATEGORY, "panel.bulk.previewed", actor, None, "bulk_action", bulk.id,
            {"action": action, "items": len(chosen), "planId": plan_id},
        )  # fmt: skip
    return bulk


def change_state(bulk_id, verb, actor, reason):
    """confirm, pause, resume or cancel: the state moves in the UPDATE's WHERE (two operators at once: one wins,
    the other gets 409), audited; returns the action."""
    if not reason or not reason.strip():
        raise BulkRejected(REASON_REQUIRED, "an operator reason is required")
    leaves, makes = TRANSITIONS[verb]
    now = utcnow()
    values = {"status": makes, "updated_at": now}
    if verb == "confirm":
        values.update(confirmed_by=actor, confirmed_at=now, reason=reason)
    if verb == "cancel":
        values["finished_at"] = now
    with db.atomic():
        moved = BulkAction.update(**values).where(BulkAction.id == bulk_id, BulkAction.status.in_(leaves)).execute()
        if not moved:
            bulk = BulkAction.get_or_none(BulkAction.id == bulk_id)
            if bulk is None:
                raise BulkRejected(BULK_ACTION_NOT_FOUND, f"bulk action {bulk_id} does not exist", 404)
            raise BulkRejected(BULK_ACTION_STATE, f"a {bulk.status} bulk action cannot {verb}", 409)
        if verb == "cancel":
            BulkActionItem.update(status="cancelled").where(
                BulkActionItem.bulk_action == bulk_id, BulkActionItem.status == "pending"
            ).execute()
        record_audit(CATEGORY, f"panel.bulk.{AUDITED[verb]}", actor, reason, "bulk_action", bulk_id)
    return BulkAction.get_by_id(bulk_id)


def _change(bulk, item, key):
    """Queue one item's change through the back office's own code path; ChangeRejected or
    FulfillmentRequestRejected when it no longer fits."""
    subscription = Subscription.get_by_id(item.subscription_id)
    entitlement = changes.current_entitlement(subscription.id)
    if entitlement is None or subscription.remote_user_id is None:
        raise changes.ChangeRejected("not_provisioned", "this subscription was never provisioned", 409)
    args = (key, f"bulk:{bulk.id}", bulk.confirmed_by, bulk.reason)
    details = {"bulkActionId": bulk.id, "position": item.position}
    if bulk.action == "extend":
        ends_at = entitlement.ends_at + datetime.timedelta(days=bulk.days)
        return changes.change_entitlement(entitlement, "extend", *args, ends_at=ends_at, details=details)
    if bulk.action == "set_squads":
        return changes.change_entitlement(entitlement, "set_squads", *args, squad_ids=bulk.squads, details=details)
    if bulk.action == "pause":
        return changes.pause_entitlement(entitlement, *args, details=details)
    return changes.resume_entitlement(entitlement, *args, details=details)


def apply_item(item_id, now=None):
    """Apply one pending item of a running action in one transaction: "applied", "skipped", or None
    (the item was taken already, or its action is no longer running)."""
    now = now or utcnow()
    bulk_id = BulkActionItem.select(BulkActionItem.bulk_action).where(BulkActionItem.id == item_id).scalar()
    with db.atomic():
        # The action first, then the item: the order an operator's cancel takes them in.
        bulk = locked(BulkAction.select().where(BulkAction.id == bulk_id)).first()
        item = locked(
            BulkActionItem.select().where(BulkActionItem.id == item_id, BulkActionItem.status == "pending")
        ).first()
        if bulk is None or bulk.status != "running" or item is None:
            return None
        operation_id = code = None
        try:
            with db.atomic():  # a savepoint: a refused change leaves nothing of itself
                operation_id = _change(bulk, item, f"bulk:{bulk.id}:{item.position}").id
        except (changes.ChangeRejected, FulfillmentRequestRejected) as refused:
            code = refused.code
        outcome = "applied" if operation_id else "skipped"
        BulkActionItem.update(status=outcome, operation=operation_id, error_code=code, applied_at=now).where(
            BulkActionItem.id == item.id, BulkActionItem.status == "pending"
        ).execute()
    return outcome


def due_items(limit=BATCH):
    """Pending items of running actions: the oldest action's first, in position order."""
    return [
        item_id
        for (item_id,) in BulkActionItem.select(BulkActionItem.id)
        .join(BulkAction, on=(BulkActionItem.bulk_action == BulkAction.id))
        .where(BulkAction.status == "running", BulkActionItem.status == "pending")
        .order_by(BulkActionItem.bulk_action, BulkActionItem.position)
        .limit(limit)
        .tuples()
    ]


def finish_done(now=None):
    """Running actions with no pending item left become `done`; returns how many."""
    now = now or utcnow()
    pending = BulkActionItem.select(BulkActionItem.id).where(
        BulkActionItem.bulk_action == BulkAction.id, BulkActionItem.status == "pending"
    )
    return (
        BulkAction.update(status="done", finished_at=now, updated_at=now)
        .where(BulkAction.status == "running", ~fn.EXISTS(pending))
        .execute()
    )


def apply_batch(limit=BATCH, should_stop=lambda: False):
    """One run of the pass: up to `limit` items applied, then finished actions marked; returns the counts."""
    counts = Counter()
    for item_id in due_items(limit):
        if should_stop():
            break
        counts[apply_item(item_id) or "taken"] += 1
    counts["finished"] = finish_done()
    return counts


def progress(bulk_id):
    """{"items": {status: count}, "operations": {status: count}} of one action, every status present."""
    items = dict.fromkeys(ITEM_STATUSES, 0)
    items.update(
        BulkActionItem.select(BulkActionItem.status, fn.COUNT(BulkActionItem.id))
        .where(BulkActionItem.bulk_action == bulk_id)
        .group_by(BulkActionItem.status)
        .tuples()
    )
    operations = dict.fromkeys(OPERATION_STATUSES, 0)
    operations.update(
        FulfillmentOperation.select(FulfillmentOperation.status, fn.COUNT(FulfillmentOperation.id))
        .join(BulkActionItem, on=(BulkActionItem.operation == FulfillmentOperation.id))
        .where(BulkActionItem.bulk_action == bulk_id)
        .group_by(FulfillmentOperation.status)
        .tuples()
    )
    return {"items": items, "operations": operations}


def items_page(bulk_id, after_position, limit):
    """Items in position order after `after_position`, with the status of each one's operation:
    (rows, the last position shown when there are more, else None)."""
    rows = list(
        BulkActionItem.select(
            BulkActionItem.position,
            BulkActionItem.subscription.alias("subscription_id"),
            Subscription.customer.alias("customer_id"),
            BulkActionItem.status,
            BulkActionItem.operation.alias("operation_id"),
            FulfillmentOperation.status.alias("operation_status"),
            BulkActionItem.error_code,
            BulkActionItem.applied_at,
        )
        .join(Subscription, on=(BulkActionItem.subscription == Subscription.id))
        .switch(BulkActionItem)
        .join(FulfillmentOperation, JOIN.LEFT_OUTER, on=(BulkActionItem.operation == FulfillmentOperation.id))
        .where(BulkActionItem.bulk_action == bulk_id, BulkActionItem.position > after_position)
        .order_by(BulkActionItem.position)
        .limit(limit + 1)
        .dicts()
    )
    return rows[:limit], rows[limit - 1]["position"] if len(rows) > limit else None
