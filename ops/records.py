"""Writes that ride along in the caller's transaction: operator notices
(deduplicated on kind + key), audit events and outbox events (SPEC 2.13, 4.5, 8.1)."""

import json

from peewee import IntegrityError

from models.base import db, utcnow
from models.ops import AuditEvent, OperatorNotice, OutboxEvent


def queue_notice(kind, dedupe_key, payload):
    """Queue one notice per (kind, dedupe_key); a repeat is a no-op. True if queued now."""
    if OperatorNotice.select().where(OperatorNotice.kind == kind, OperatorNotice.dedupe_key == dedupe_key).exists():
        return False
    try:
        with db.atomic():
            OperatorNotice.create(kind=kind, dedupe_key=dedupe_key, payload=json.dumps(payload, sort_keys=True))
    except IntegrityError:
        return False  # a concurrent writer queued it first
    return True


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
