"""Writes that ride along in the caller's transaction: operator and customer notices
(deduplicated on kind + key), audit events and outbox events (SPEC 2.13, 4.5, 8.1, 14.6)."""

import json

from models.base import utcnow
from models.ops import AuditEvent, OutboxEvent
from models.transactions import execute_all, fetch_one

_NOTICE = (
    "INSERT INTO operator_notices (kind, dedupe_key, status, payload, created_at) VALUES (%s, %s, %s, %s, %s)"
    " ON CONFLICT (kind, dedupe_key) DO NOTHING"
)


def queue_notice(kind, dedupe_key, payload, returning=True):
    """Queue one notice per (kind, dedupe_key); a repeat (or a concurrent writer's) is a no-op. True if queued now.

    With returning=False nobody asks whether it was queued now: inside a transaction the
    insert rides with its next round trip (execute_all), and None is returned."""
    params = (kind, dedupe_key, "pending", json.dumps(payload, sort_keys=True), utcnow())
    if not returning:
        execute_all([(_NOTICE, params)])
        return None
    return fetch_one(_NOTICE + " RETURNING id", params) is not None


_CUSTOMER_NOTICE = (
    "INSERT INTO customer_notices (customer_id, kind, dedupe_key, payload, created_at) VALUES (%s, %s, %s, %s, %s)"
    " ON CONFLICT (kind, dedupe_key) DO NOTHING"
)


def queue_customer_notice(customer_id, kind, dedupe_key, payload, returning=True):
    """Queue one notice for a customer per (kind, dedupe_key), for the bot to deliver; a repeat
    (or a concurrent writer's) is a no-op. True if queued now; with returning=False, as queue_notice."""
    params = (customer_id, kind, dedupe_key, json.dumps(payload, sort_keys=True), utcnow())
    if not returning:
        execute_all([(_CUSTOMER_NOTICE, params)])
        return None
    return fetch_one(_CUSTOMER_NOTICE + " RETURNING id", params) is not None


def record_audit(category, action, actor, reason=None, subject_type=None, subject_id=None, details=None):
    return AuditEvent.create(
        category=category,
        action=action,
        actor=actor,
        reason=reason,
        subject_type=subject_type,
        subject_id=None if subject_id is None else str(subject_id),
        details=json.dumps(details or {}, sort_keys=True),
    )


def emit_event(topic, payload, aggregate=None, returning=True):
    """An outbox event in the caller's transaction. Events that name the same
    `aggregate` (e.g. `customer:42`) reach each destination in the order they
    were emitted; an event without one is ordered with no other.

    With returning=False the caller needs no row back: the insert rides with the
    transaction's next round trip (execute_all), and None is returned. The order
    of events is their ids', given in the order the inserts run, which is the same."""
    if not returning:
        execute_all(
            [
                (
                    "INSERT INTO outbox_events (topic, payload, aggregate, created_at) VALUES (%s, %s, %s, %s)",
                    (topic, json.dumps(payload, sort_keys=True), aggregate, utcnow()),
                )
            ]
        )
        return None
    return OutboxEvent.create(
        topic=topic, payload=json.dumps(payload, sort_keys=True), aggregate=aggregate, created_at=utcnow()
    )
