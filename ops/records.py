"""Writes that ride along in the caller's transaction: operator and customer notices
(deduplicated on kind + key), audit events and outbox events (SPEC 2.13, 4.5, 8.1, 14.6)."""

import json

from models.base import utcnow
from models.ops import AuditEvent, OutboxEvent
from models.transactions import fetch_one


def queue_notice(kind, dedupe_key, payload):
    """Queue one notice per (kind, dedupe_key); a repeat (or a concurrent writer's) is a no-op. True if queued now."""
    row = fetch_one(
        "INSERT INTO operator_notices (kind, dedupe_key, status, payload, created_at) VALUES (%s, %s, %s, %s, %s)"
        " ON CONFLICT (kind, dedupe_key) DO NOTHING RETURNING id",
        (kind, dedupe_key, "pending", json.dumps(payload, sort_keys=True), utcnow()),
    )
    return row is not None


def queue_customer_notice(customer_id, kind, dedupe_key, payload):
    """Queue one notice for a customer per (kind, dedupe_key), for the bot to deliver; a repeat
    (or a concurrent writer's) is a no-op. True if queued now."""
    row = fetch_one(
        "INSERT INTO customer_notices (customer_id, kind, dedupe_key, payload, created_at) VALUES (%s, %s, %s, %s, %s)"
        " ON CONFLICT (kind, dedupe_key) DO NOTHING RETURNING id",
        (customer_id, kind, dedupe_key, json.dumps(payload, sort_keys=True), utcnow()),
    )
    return row is not None


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


def emit_event(topic, payload, aggregate=None):
    """An outbox event in the caller's transaction. Events that name the same
    `aggregate` (e.g. `customer:42`) reach each destination in the order they
    were emitted; an event without one is ordered with no other."""
    return OutboxEvent.create(
        topic=topic, payload=json.dumps(payload, sort_keys=True), aggregate=aggregate, created_at=utcnow()
    )
