"""The phase of a customer's subscription, computed when it is read (SPEC 13.13, 2.1, 2.14).

The one function every reader calls — the panel's back office and the bot —
so an operator and the customer see the same word. Nothing stores a phase:
an entitlement never becomes expired by a timer; its phase is read from
`ends_at` against the clock. A subscription's *current* entitlement is its
newest one that was not replaced (`superseded`) and is not a downgrade
waiting for the period's end (SPEC 13.9): until its start, the period it
follows is what the customer has, and its waiting `create` is no change in
progress.

The first rule that holds gives the phase:

1. `expired`: no current entitlement (it was refunded before it was
   provisioned), or its order was refunded in full (SPEC 13.10).
2. `paused`: an operator stopped its clock (SPEC 2.25), until a resume is applied.
3. `failed`: the panel reported a status Omniflow does not know, or the
   entitlement was never provisioned and its `create` ended for good
   (failed, or cancelled by an operator): an operator has to act.
4. `provisioning`: an open operation other than a scheduled `reconcile`
   (pending, running or retrying — `remnawave_unavailable` included, 2.14),
   or the entitlement still waits for its first `create`.
5. `expired`: the panel's user is disabled or expired (a refund's or an
   operator's disable), or the period and its grace are over.
6. `grace`: the period is over, its grace hours are not.
7. `expiring`: the period ends within 3 days — within its last day for a
   period no longer than that (a 3-day trial is not "ending soon" the
   moment it begins).
8. `active`.
"""

import datetime
from dataclasses import dataclass

from models.base import utcnow
from models.commerce import Order
from models.fulfillment import Entitlement, FulfillmentOperation

PROVISIONING = "provisioning"
ACTIVE = "active"
EXPIRING = "expiring"
GRACE = "grace"
EXPIRED = "expired"
PAUSED = "paused"
FAILED = "failed"
PHASES = (PROVISIONING, ACTIVE, EXPIRING, GRACE, EXPIRED, PAUSED, FAILED)

EXPIRING_WITHIN = datetime.timedelta(days=3)
SHORT_PERIOD_EXPIRING_WITHIN = datetime.timedelta(days=1)
OPEN_STATUSES = ("pending", "running", "retrying")
ENDED_WITHOUT_PROVISIONING = ("failed", "cancelled")
SWITCHED_OFF = ("disabled", "expired")


@dataclass(frozen=True)
class Standing:
    """A subscription's phase and the current entitlement it was read from (None: there is none)."""

    phase: str
    entitlement: object


def phase_of(entitlement, order_status, open_change, create_ended, now):
    """The phase from the facts (the rules above): the current entitlement or None, its
    order's status, whether an operation other than reconcile is open, and whether its
    create ended without provisioning."""
    if entitlement is None or order_status == "refunded":
        return EXPIRED
    if entitlement.paused_at is not None:
        return PAUSED
    if entitlement.status == "failed" or (entitlement.status == "pending" and create_ended and not open_change):
        return FAILED
    if open_change or entitlement.status == "pending":
        return PROVISIONING
    if entitlement.status in SWITCHED_OFF:
        return EXPIRED
    if now >= entitlement.ends_at + datetime.timedelta(hours=entitlement.grace_period_hours):
        return EXPIRED
    if now >= entitlement.ends_at:
        return GRACE
    short = entitlement.ends_at - entitlement.starts_at <= EXPIRING_WITHIN
    if entitlement.ends_at - now <= (SHORT_PERIOD_EXPIRING_WITHIN if short else EXPIRING_WITHIN):
        return EXPIRING
    return ACTIVE


def _scheduled(entitlement, now):
    """A downgrade whose period has not begun: it applies at the current period's end."""
    return entitlement.order_kind == "downgrade" and entitlement.status == "pending" and entitlement.starts_at > now


def standings(subscription_ids, now=None):
    """{subscription id: Standing} for these subscriptions, in two queries whatever their number."""
    now = now or utcnow()
    ids = list(dict.fromkeys(subscription_ids))
    if not ids:
        return {}
    live = [
        entitlement
        for entitlement in Entitlement.select(
            Entitlement, Order.status.alias("order_status"), Order.operation.alias("order_kind")
        )
        .join(Order, on=(Entitlement.order == Order.id))
        .where(Entitlement.subscription.in_(ids), Entitlement.status != "superseded")
        .order_by(Entitlement.id)
        .objects()
        if not _scheduled(entitlement, now)
    ]
    current = {entitlement.subscription_id: entitlement for entitlement in live}  # the newest wins
    owner = {entitlement.id: entitlement.subscription_id for entitlement in live}
    open_change, create_ended = set(), set()
    if owner:
        operations = (
            FulfillmentOperation.select(
                FulfillmentOperation.entitlement, FulfillmentOperation.operation, FulfillmentOperation.status
            )
            .where(
                FulfillmentOperation.entitlement.in_(list(owner)),
                FulfillmentOperation.operation != "reconcile",
                FulfillmentOperation.status.in_(OPEN_STATUSES + ENDED_WITHOUT_PROVISIONING),
            )
            .tuples()
        )
        for entitlement_id, operation, status in operations:
            if status in OPEN_STATUSES:
                open_change.add(owner[entitlement_id])
            elif operation == "create":
                create_ended.add(entitlement_id)
    result = {}
    for subscription_id in ids:
        entitlement = current.get(subscription_id)
        phase = phase_of(
            entitlement,
            getattr(entitlement, "order_status", None),
            subscription_id in open_change,
            entitlement is not None and entitlement.id in create_ended,
            now,
        )
        result[subscription_id] = Standing(phase, entitlement)
    return result
