"""Operational records: operator and customer notices, audit events, the outbox and its deliveries, maintenance mode,
anomaly rules and their samples."""

from peewee import BigAutoField, BigIntegerField, BooleanField, DateTimeField, ForeignKeyField, IntegerField, TextField

from models.base import BaseModel, utcnow
from models.commerce import Customer
from ops.sealing import SealedField

NOTICE_STATUSES = ("pending", "sent", "suppressed", "failed")
CUSTOMER_NOTICE_STATUSES = ("pending", "sent", "failed")
DELIVERY_STATUSES = ("pending", "retrying", "delivered", "dead")


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


class CustomerNotice(BaseModel):
    """A message for one customer, delivered by the bot (SPEC 14.4, 14.6): one per
    (kind, dedupe key), e.g. `dunning` per subscription and period; `pending` until
    delivered (`sent`, `sent_at`) or given up on (`failed`, with its `failure_code`)."""

    id = BigAutoField()
    customer = ForeignKeyField(Customer, backref="+", column_name="customer_id")
    kind = TextField()
    dedupe_key = TextField()
    payload = TextField(default="{}")
    created_at = DateTimeField(default=utcnow)
    sent_at = DateTimeField(null=True)
    status = TextField(default="pending")
    failure_code = TextField(null=True)
    # Shown to the customer once and erased when the notice is sent: a bought gift card's code (migration 0025).
    secret = SealedField(null=True)

    class Meta:
        table_name = "customer_notices"
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
    """An event written with the change it reports (SPEC 8.1). `aggregate` (e.g.
    `customer:42`) orders it with the other events of that aggregate; `routed_at`
    is when its deliveries were made, `published_at` when every one of them ended
    (delivered, or dead after 24 h)."""

    id = BigAutoField()
    topic = TextField()
    payload = TextField()
    aggregate = TextField(null=True)
    created_at = DateTimeField(default=utcnow)
    routed_at = DateTimeField(null=True)
    published_at = DateTimeField(null=True)

    class Meta:
        table_name = "outbox_events"


class OutboxDestination(BaseModel):
    """Where events are published (SPEC 15.2): a URL, the topics it takes ('*' or a
    JSON list) and its Standard Webhooks signing secret, sealed."""

    id = BigAutoField()
    url = TextField()
    topics = TextField()
    secret = SealedField()
    active = BooleanField(default=True)
    created_at = DateTimeField(default=utcnow)

    class Meta:
        table_name = "outbox_destinations"


class OutboxDelivery(BaseModel):
    """One event on its way to one destination. `aggregate` is the event's (or
    `event:<id>` for an event without one): the stream delivered in `id` (routing) order."""

    id = BigAutoField()
    event = ForeignKeyField(OutboxEvent, on_delete="CASCADE")
    destination = ForeignKeyField(OutboxDestination)
    aggregate = TextField()
    status = TextField(default="pending")
    attempts = IntegerField(default=0)
    next_attempt_at = DateTimeField()
    last_error_code = TextField(null=True)
    delivered_at = DateTimeField(null=True)
    created_at = DateTimeField(default=utcnow)

    class Meta:
        table_name = "outbox_deliveries"
        indexes = ((("event", "destination"), True),)


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


class AnomalyRule(BaseModel):
    """One anomaly rule's stored settings (SPEC 15.7, ops/anomalies.py): `threshold` in the rule's
    unit (percent, count or seconds), the `window_s` it looks back over (one notice per window)."""

    rule = TextField(primary_key=True)
    threshold = BigIntegerField()
    window_s = IntegerField()
    enabled = BooleanField(default=True)
    updated_at = DateTimeField(default=utcnow)
    updated_by = TextField(null=True)

    class Meta:
        table_name = "anomaly_rules"


class AnomalySample(BaseModel):
    """A count that leaves no row of its own (e.g. operations a revive run gave a job again), by time."""

    id = BigAutoField()
    rule = TextField()
    value = BigIntegerField()
    observed_at = DateTimeField(default=utcnow)

    class Meta:
        table_name = "anomaly_samples"
