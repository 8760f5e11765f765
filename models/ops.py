"""Operational records: operator notices, audit events, the outbox, maintenance mode."""

from peewee import BigAutoField, BooleanField, DateTimeField, IntegerField, TextField

from models.base import BaseModel, utcnow

NOTICE_STATUSES = ("pending", "sent", "suppressed", "failed")


class OperatorNotice(BaseModel):
    id = BigAutoField()
    kind = TextField()
    dedupe_key = TextField()
    status = TextField(default="pending")
    payload = TextField(default="{}")
    created_at = DateTimeField(default=utcnow)
    sent_at = DateTimeField(null=True)

    class Meta:
        table_name = "operator_notices"
        indexes = ((("kind", "dedupe_key"), True),)


class AuditEvent(BaseModel):
    id = BigAutoField()
    category = TextField()
    action = TextField()
    actor = TextField()
    reason = TextField(null=True)
    subject_type = TextField(null=True)
    subject_id = TextField(null=True)
    details = TextField(default="{}")
    created_at = DateTimeField(default=utcnow)

    class Meta:
        table_name = "audit_events"


class OutboxEvent(BaseModel):
    id = BigAutoField()
    topic = TextField()
    payload = TextField()
    created_at = DateTimeField(default=utcnow)
    published_at = DateTimeField(null=True)
    attempt_count = IntegerField(default=0)
    next_attempt_at = DateTimeField(null=True)
    last_error = TextField(null=True)

    class Meta:
        table_name = "outbox_events"


class MaintenanceState(BaseModel):
    """One row (id 1): whether maintenance mode holds fulfillment and purchases (SPEC 9)."""

    id = IntegerField(primary_key=True)
    active = BooleanField(default=False)
    since = DateTimeField(null=True)
    reason = TextField(null=True)
    set_by = TextField(null=True)
    updated_at = DateTimeField(default=utcnow)

    class Meta:
        table_name = "maintenance_state"
