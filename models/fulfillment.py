"""Fulfillment records (SPEC 2): entitlements, operations, their history, drifts."""

import json

from peewee import BigAutoField, BigIntegerField, DateTimeField, ForeignKeyField, IntegerField, TextField

from models.base import BaseModel, utcnow
from models.commerce import Order, Plan, Subscription

ENTITLEMENT_STATUSES = ("pending", "active", "limited", "disabled", "expired", "superseded", "failed", "paused")
OPERATIONS = ("create", "reconcile", "extend", "set_limits", "set_squads", "enable", "disable", "reset_traffic")
OPERATION_STATUSES = ("pending", "running", "succeeded", "retrying", "failed", "cancelled")
DRIFT_KINDS = ("missing_remote", "expiry", "traffic", "device_limit", "squads", "status", "external_edit")


class Entitlement(BaseModel):
    id = BigAutoField()
    order = ForeignKeyField(Order, unique=True, backref="entitlement", column_name="order_id")
    subscription = ForeignKeyField(Subscription, backref="entitlements", column_name="subscription_id")
    plan = ForeignKeyField(Plan, column_name="plan_id")
    status = TextField(default="pending")
    starts_at = DateTimeField()
    ends_at = DateTimeField()
    traffic_allowance_bytes = BigIntegerField(null=True)
    device_limit = IntegerField(null=True)
    squad_ids = TextField(default="[]")
    grace_period_hours = IntegerField(default=0)
    paused_at = DateTimeField(null=True)
    reconciled_at = DateTimeField(null=True)
    observed_state = TextField(null=True)
    created_at = DateTimeField(default=utcnow)
    updated_at = DateTimeField(default=utcnow)

    class Meta:
        table_name = "entitlements"

    @property
    def squads(self):
        return json.loads(self.squad_ids)


class FulfillmentOperation(BaseModel):
    id = BigAutoField()
    entitlement = ForeignKeyField(Entitlement, backref="operations", column_name="entitlement_id")
    operation = TextField()
    status = TextField(default="pending")
    idempotency_key = TextField(unique=True)
    desired_state = TextField()
    attempt_count = IntegerField(default=0)
    next_attempt_at = DateTimeField(null=True)
    last_error_code = TextField(null=True)
    correlation_id = TextField()
    request_summary = TextField(null=True)
    response_summary = TextField(null=True)
    created_at = DateTimeField(default=utcnow)
    updated_at = DateTimeField(default=utcnow)
    completed_at = DateTimeField(null=True)

    class Meta:
        table_name = "fulfillment_operations"


class FulfillmentHistory(BaseModel):
    id = BigAutoField()
    operation = ForeignKeyField(FulfillmentOperation, backref="history", column_name="operation_id")
    attempt = IntegerField()
    status = TextField()
    error_code = TextField(null=True)
    correlation_id = TextField()
    request_summary = TextField(null=True)
    response_summary = TextField(null=True)
    created_at = DateTimeField(default=utcnow)

    class Meta:
        table_name = "fulfillment_history"


class EntitlementDrift(BaseModel):
    id = BigAutoField()
    entitlement = ForeignKeyField(Entitlement, backref="drifts", column_name="entitlement_id")
    kind = TextField()
    status = TextField(default="open")
    expected = TextField()
    observed = TextField()
    detected_at = DateTimeField(default=utcnow)
    resolved_at = DateTimeField(null=True)

    class Meta:
        table_name = "entitlement_drifts"
