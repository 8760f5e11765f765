"""Blocklist sources and their current lists of Telegram ids (SPEC 15.8; migration 0036)."""

from peewee import (
    BigAutoField,
    BigIntegerField,
    BooleanField,
    CompositeKey,
    DateTimeField,
    ForeignKeyField,
    IntegerField,
    TextField,
)

from models.base import BaseModel, utcnow
from ops.sealing import SealedField

SOURCE_STATUSES = ("new", "ok", "failed")


class BlocklistSource(BaseModel):
    """A URL serving Telegram ids, its optional bearer token (sealed, never shown again),
    the validators of its last good list and what its last refresh did."""

    id = BigAutoField()
    url = TextField()
    token = SealedField(null=True)
    active = BooleanField(default=True)
    created_at = DateTimeField(default=utcnow)
    removed_at = DateTimeField(null=True)
    etag = TextField(null=True)
    last_modified = TextField(null=True)
    status = TextField(default="new")
    last_refresh_at = DateTimeField(null=True)
    last_success_at = DateTimeField(null=True)
    list_changed_at = DateTimeField(null=True)
    last_error = TextField(null=True)
    failure_count = IntegerField(default=0)
    entry_count = IntegerField(default=0)

    class Meta:
        table_name = "blocklist_sources"


class BlocklistEntry(BaseModel):
    source = ForeignKeyField(BlocklistSource, column_name="source_id", backref="+")
    telegram_id = BigIntegerField(index=True)

    class Meta:
        table_name = "blocklist_entries"
        primary_key = CompositeKey("source", "telegram_id")


BLOCKLIST_MODELS = [BlocklistSource, BlocklistEntry]
