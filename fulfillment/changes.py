"""Operator changes to one subscription (SPEC 2.19) and pause/resume (SPEC 2.25).

They go through the fulfillment pipeline like a purchase does, so they get
the same idempotency, retries, drift detection and history; the panel is
never called from here. The subscription is always resolved through the
customer named by the caller, a reason is required, and the audit event is
written in the same transaction as the operation.
"""

import datetime
import json

from fulfillment.desired_state import DesiredState
from fulfillment.enqueue import enqueue_operation
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
        desired, changes = _desired_for(entitlement, operation, ends_at, traffic_bytes, device_limit, squad_ids)
        enqueued = enqueue_operation(
            entitlement,
            operation,
            desired,
            f"panel:{entitlement.subscription_id}:{operation}:{request_id}",
            correlation_id=f"panel:{request_id}",
        )
        if enqueued.created:
            if changes:
                # The entitlement row is what reconcile rebuilds the desired state
                # from: it must say what the operator set, or the next pass undoes it.
                Entitlement.update(updated_at=utcnow(), **changes).where(Entitlement.id == entitlement.id).execute()
            record_audit(
                "subscriptions",
                f"panel.subscription.{operation}",
                actor,
                reason=reason,
                subject_type="subscription",
                subject_id=entitlement.subscription_id,
                details={"operationId": enqueued.operation.id, "entitlementId": entitlement.id},
            )
        operation_row = enqueued.operation
        return {"operationId": operation_row.id, "operation": operation_row.operation, "status": operation_row.status}


def _desired_for(entitlement, operation, ends_at, traffic_bytes, device_limit, squad_ids):
    desired = DesiredState.from_entitlement(entitlement)
    changes = {}
    if operation == "extend":
        if ends_at is None:
            raise ChangeRejected("ends_at_required", "extend needs endsAt", 400)
        desired = DesiredState(ends_at, desired.traffic_allowance_bytes, desired.device_limit, desired.squad_ids)
        changes["ends_at"] = ends_at
    elif operation == "set_limits":
        if traffic_bytes is UNSET and device_limit is UNSET:
            raise ChangeRejected("limits_required", "set_limits needs a traffic limit, a device limit or both", 400)
        traffic = desired.traffic_allowance_bytes if traffic_bytes is UNSET else traffic_bytes
        devices = desired.device_limit if device_limit is UNSET else device_limit
        desired = DesiredState(desired.ends_at, traffic, devices, desired.squad_ids)
        changes.update(traffic_allowance_bytes=traffic, device_limit=devices)
    elif operation == "set_squads":
        if squad_ids is None:
            raise ChangeRejected("squads_required", "set_squads needs the squad ids", 400)
        desired = DesiredState(desired.ends_at, desired.traffic_allowance_bytes, desired.device_limit, tuple(squad_ids))
        changes["squad_ids"] = json.dumps(list(squad_ids))
    return desired, changes


def pause(customer_id, subscription_id, request_id, actor, reason):
    """Stop the entitlement's clock and disable its panel user. Pausing twice is refused."""
    _require_reason(reason)
    with db.atomic():
        entitlement = _owned_entitlement(customer_id, subscription_id)
        if entitlement.paused_at is not None:
            raise ChangeRejected("already_paused", "this subscription is already paused", 409)
        now = utcnow().replace(microsecond=0)
        return _apply_pause_change(
            entitlement, "disable", "paused", request_id, actor, reason, paused_at=now, status="paused"
        )


def resume(customer_id, subscription_id, request_id, actor, reason):
    """Give the paused time back on ends_at and enable the panel user."""
    _require_reason(reason)
    with db.atomic():
        entitlement = _owned_entitlement(customer_id, subscription_id)
        if entitlement.paused_at is None:
            raise ChangeRejected("not_paused", "this subscription is not paused", 409)
        now = utcnow().replace(microsecond=0)
        ends_at = entitlement.ends_at + max(now - entitlement.paused_at, datetime.timedelta(0))
        # Until the enable is applied the panel user is still disabled.
        return _apply_pause_change(
            entitlement,
            "enable",
            "resumed",
            request_id,
            actor,
            reason,
            paused_at=None,
            ends_at=ends_at,
            status="disabled",
        )


def _apply_pause_change(entitlement, operation, audit_verb, request_id, actor, reason, **changes):
    """Write the entitlement's new clock, queue the panel operation, audit; in the caller's transaction."""
    Entitlement.update(updated_at=utcnow(), **changes).where(Entitlement.id == entitlement.id).execute()
    entitlement = Entitlement.get_by_id(entitlement.id)
    subscription_id = entitlement.subscription_id
    enqueued = enqueue_operation(
        entitlement,
        operation,
        DesiredState.from_entitlement(entitlement),
        f"panel:{subscription_id}:{operation}:{request_id}",
        correlation_id=f"panel:{request_id}",
    )
    record_audit("subscriptions", f"panel.subscription.{audit_verb}", actor, reason, "subscription", subscription_id)
    return enqueued.operation


def _owned_entitlement(customer_id, subscription_id):
    subscription = Subscription.get_or_none(
        (Subscription.id == subscription_id) & (Subscription.customer == customer_id)
    )
    if subscription is None:
        raise ChangeRejected("subscription_not_found", "no such subscription for this customer", 404)
    entitlement = current_entitlement(subscription.id)
    if entitlement is None or subscription.remote_user_id is None:
        raise ChangeRejected("not_provisioned", "this subscription was never provisioned", 409)
    return entitlement
