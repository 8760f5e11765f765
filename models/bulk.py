"""Bulk actions: one operator change previewed as a frozen list of subscriptions, applied item by item (SPEC 15.6)."""

import json

from peewee import BigAutoField, DateTimeField, ForeignKeyField, IntegerField, TextField

from models.base import BaseModel, utcnow
from models.commerce import Plan, Subscription
from models.fulfillment import FulfillmentOperation

BULK_ACTIONS = ("extend", "set_squads", "pause", "resume")
BULK_STATUSES = ("previewed", "running", "paused", "done", "cancelled")
ITEM_STATUSES = ("pending", "applied", "skipped", "cancelled")


class BulkAction(BaseModel):
    id = BigAutoField()
    action = TextField()
    status = TextField(default="previewed")
    plan = ForeignKeyField(Plan, null=True, column_name="plan_id")
    days = IntegerField(null=True)
    squad_ids = TextField(null=True)
    item_count = IntegerField()
    created_by = TextField()
    created_at = DateTimeField(default=utcnow)
    confirmed_by = TextField(null=True)
    confirmed_at = DateTimeField(null=True)
    reason = TextField(null=True)
    finished_at = DateTimeField(null=True)
    updated_at = DateTimeField(default=utcnow)

    class Meta:
        table_name = "bulk_actions"

    @property
    def squads(self):
        return json.loads(self.squad_ids) if self.squad_ids else None


class BulkActionItem(BaseModel):
    id = BigAutoField()
    bulk_action = ForeignKeyField(BulkAction, backref="+", column_name="bulk_action_id")
    position = IntegerField()
    subscription = ForeignKeyField(Subscription, backref="+", column_name="subscription_id")
    status = TextField(default="pending")
    operation = ForeignKeyField(FulfillmentOperation, null=True, backref="+", column_name="operation_id")
    error_code = TextField(null=True)
    applied_at = DateTimeField(null=True)

    class Meta:
        table_name = "bulk_action_items"
        indexes = ((("bulk_action", "position"), True),)


BULK_MODELS = [BulkAction, BulkActionItem]
