"""Operator changes to one subscription (SPEC 2.19) and pause/resume (SPEC 2.25).

They go through the fulfillment pipeline like a purchase does, so they get
the same idempotency, retries, drift detection and history; the panel is
never called from here. The subscription is always resolved through the
customer named by the caller, a reason is required, and the audit event is
written in the same transaction as the operation.

A change is written to the entitlement only when the panel has applied it
(the worker's success record, fulfillment/desired_state.py says how), so a
change that is cancelled or fails leaves the entitlement where it was and
reconcile never pushes it. A resume likewise gives the paused time back and
lifts the pause when its `enable` is applied. A pause is the one change made
at once: stopping the clock is Omniflow's own bookkeeping, and reconcile
keeps a paused entitlement's user disabled until a resume is applied.
"""

from dataclasses import replace

from commerce import phase
from fulfillment.desired_state import DesiredState
from fulfillment.enqueue import enqueue_operation, find_operation, replayed
from models.base import db, utcnow
from models.commerce import Subscription
from models.fulfillment import Entitlement
from models.transactions import locked
from ops.records import record_audit

OFFERED = ("enable", "disable", "reset_traffic", "extend", "set_limits", "set_squads")
NOT_OFFERED = ("create", "reconcile")
UNSET = object()


class ChangeRejected(ValueError):
    """A refused change; `code` is machine-readable and `http_status` what an API answers."""

    def __init__(self, code, message, http_status):
        super().__init__(message)
        self.code = code
        self.http_status = http_status


def _require_reason(reason):
    if not reason or not reason.strip():
        raise ChangeRejected("reason_required", "an operator reason is required", 400)


def current_entitlement(subscription_id):
    """The subscription's newest entitlement that is neither waiting nor replaced."""
    return locked(
        Entitlement.select()
        .where(Entitlement.subscription == subscription_id, Entitlement.status.not_in(("pending", "superseded")))
        .order_by(Entitlement.id.desc())
    ).first()


def request_change(
    customer_id,
    subscription_id,
    operation,
    request_id,
    actor,
    reason,
    ends_at=None,
    traffic_bytes=UNSET,
    device_limit=UNSET,
    squad_ids=None,
):
    """Queue one change; returns {operationId, operation, status} (the API answers 202 with it)."""
    _require_reason(reason)
    if operation in NOT_OFFERED:
        raise ChangeRejected("unsupported_operation", f"{operation} cannot be requested by an operator", 422)
    if operation not in OFFERED:
        raise ChangeRejected("unsupported_operation", f"unknown operation {operation!r}", 422)
    with db.atomic():
        entitlement = _owned_entitlement(customer_id, subscription_id)
        operation_row = change_entitlement(
            entitlement,
            operation,
            _key(entitlement, operation, request_id),
            f"panel:{request_id}",
            actor,
            reason,
            ends_at=ends_at,
            traffic_bytes=traffic_bytes,
            device_limit=device_limit,
            squad_ids=squad_ids,
        )
        return {"operationId": operation_row.id, "operation": operation_row.operation, "status": operation_row.status}


def change_entitlement(
    entitlement,
    operation,
    key,
    correlation_id,
    actor,
    reason,
    ends_at=None,
    traffic_bytes=UNSET,
    device_limit=UNSET,
    squad_ids=None,
    details=None,
):
    """Queue one change of `entitlement` under `key` and audit it, in the caller's transaction;
    returns the operation (the first one again when the key was used with the same parameters)."""
    desired = _desired_for(entitlement, operation, ends_at, traffic_bytes, device_limit, squad_ids)
    enqueued = enqueue_operation(entitlement, operation, desired, key, correlation_id=correlation_id)
    if enqueued.created:
        record_audit(
            "subscriptions",
            f"panel.subscription.{operation}",
            actor,
            reason=reason,
            subject_type="subscription",
            subject_id=entitlement.subscription_id,
            details={"operationId": enqueued.operation.id, "entitlementId": entitlement.id, **(details or {})},
        )
    return enqueued.operation


def _key(entitlement, operation, request_id):
    return f"panel:{entitlement.subscription_id}:{operation}:{request_id}"


def _desired_for(entitlement, operation, ends_at, traffic_bytes, device_limit, squad_ids):
    """The change's desired state: the operator's values for the fields it sets, the
    entitlement's for the rest (the worker reads those again when it runs)."""
    desired = DesiredState.from_entitlement(entitlement)
    if operation == "extend":
        if ends_at is None:
            raise ChangeRejected("ends_at_required", "extend needs endsAt", 400)
        return replace(desired, ends_at=ends_at)
    if operation == "set_limits":
        if traffic_bytes is UNSET and device_limit is UNSET:
            raise ChangeRejected("limits_required", "set_limits needs a traffic limit, a device limit or both", 400)
        return replace(
            desired,
            traffic_allowance_bytes=desired.traffic_allowance_bytes if traffic_bytes is UNSET else traffic_bytes,
            device_limit=desired.device_limit if device_limit is UNSET else device_limit,
        )
    if operation == "set_squads":
        if squad_ids is None:
            raise ChangeRejected("squads_required", "set_squads needs the squad ids", 400)
        return replace(desired, squad_ids=tuple(squad_ids))
    return desired


def pause(customer_id, subscription_id, request_id, actor, reason):
    """Stop the entitlement's clock and disable its panel user. Pausing twice is refused;
    the same request again returns its first operation."""
    _require_reason(reason)
    with db.atomic():
        entitlement = _owned_entitlement(customer_id, subscription_id)
        key = _key(entitlement, "disable", request_id)
        return pause_entitlement(entitlement, key, f"panel:{request_id}", actor, reason)


def pause_entitlement(entitlement, key, correlation_id, actor, reason, details=None):
    """Pause in the caller's transaction: the clock stopped and the `disable` queued under `key`, audited."""
    desired = DesiredState.from_entitlement(entitlement)
    first = replayed(key, entitlement, "disable", desired)
    if first is not None:
        return first
    if entitlement.paused_at is not None:
        raise ChangeRejected("already_paused", "this subscription is already paused", 409)
    now = utcnow().replace(microsecond=0)
    Entitlement.update(paused_at=now, status="paused", updated_at=now).where(Entitlement.id == entitlement.id).execute()
    return _queue_pause_change(entitlement, "disable", desired, "paused", key, correlation_id, actor, reason, details)


def resume(customer_id, subscription_id, request_id, actor, reason):
    """Enable the panel user; once that is applied, the paused time is given back on
    ends_at and the pause is lifted (the worker's record). Nothing of the
    entitlement changes here: a resume that is cancelled leaves it paused."""
    _require_reason(reason)
    with db.atomic():
        entitlement = _owned_entitlement(customer_id, subscription_id)
        key = _key(entitlement, "enable", request_id)
        return resume_entitlement(entitlement, key, f"panel:{request_id}", actor, reason)


def resume_entitlement(entitlement, key, correlation_id, actor, reason, details=None):
    """Resume in the caller's transaction: the `enable` queued under `key`, audited."""
    desired = DesiredState.from_entitlement(entitlement, resume=True)
    first = replayed(key, entitlement, "enable", desired)
    if first is not None:
        return first
    if entitlement.paused_at is None:
        raise ChangeRejected("not_paused", "this subscription is not paused", 409)
    return _queue_pause_change(entitlement, "enable", desired, "resumed", key, correlation_id, actor, reason, details)


def reprovision(customer_id, subscription_id, request_id, actor, reason):
    """Provision a subscription in phase `failed` again (the customer paid and has no access): a new
    `create` from its entitlement when that period never reached the panel, a `reconcile` otherwise.
    The same request again returns its first operation."""
    _require_reason(reason)
    with db.atomic():
        subscription = _owned_subscription(customer_id, subscription_id)
        # Keyed apart from the operation it queues: a replay after the create made the user finds it too.
        key = f"panel:{subscription.id}:reprovision:{request_id}"
        first = find_operation(key)
        if first is not None:
            return first
        standing = phase.standings([subscription.id])[subscription.id]
        if standing.phase != phase.FAILED:
            raise ChangeRejected(
                "not_failed", f"only a failed subscription is provisioned again; this one is {standing.phase}", 409
            )
        entitlement = standing.entitlement
        # A period that never reached the panel gets its create (which adopts the user an earlier period
        # made); one the panel holds in a status Omniflow does not know gets a reconcile.
        operation = "create" if entitlement.status == "pending" else "reconcile"
        desired = DesiredState.from_entitlement(entitlement)
        enqueued = enqueue_operation(entitlement, operation, desired, key, correlation_id=f"panel:{request_id}")
        record_audit(
            "subscriptions",
            "panel.subscription.reprovisioned",
            actor,
            reason=reason,
            subject_type="subscription",
            subject_id=subscription.id,
            details={"operationId": enqueued.operation.id, "entitlementId": entitlement.id, "operation": operation},
        )
        return enqueued.operation


def _queue_pause_change(entitlement, operation, desired, audit_verb, key, correlation_id, actor, reason, details):
    """Queue the panel operation and audit it, in the caller's transaction."""
    enqueued = enqueue_operation(entitlement, operation, desired, key, correlation_id=correlation_id)
    subscription_id = entitlement.subscription_id
    record_audit(
        "subscriptions", f"panel.subscription.{audit_verb}", actor, reason, "subscription", subscription_id, details
    )
    return enqueued.operation


def _owned_subscription(customer_id, subscription_id):
    subscription = Subscription.get_or_none(
        (Subscription.id == subscription_id) & (Subscription.customer == customer_id)
    )
    if subscription is None:
        raise ChangeRejected("subscription_not_found", "no such subscription for this customer", 404)
    return subscription


def _owned_entitlement(customer_id, subscription_id):
    subscription = _owned_subscription(customer_id, subscription_id)
    entitlement = current_entitlement(subscription.id)
    if entitlement is None or subscription.remote_user_id is None:
        raise ChangeRejected("not_provisioned", "this subscription was never provisioned", 409)
    return entitlement
