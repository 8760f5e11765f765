"""Retention (SPEC 7): support attachment rows, and an index for sweeping published outbox events.

`support_attachments` is the row behind each support file: the file is named
by its content digest, so several rows may share one file (the retention
sweep removes a file only when no surviving row names its digest). Ticket
and message references stay plain nullable columns until the support
tables exist.

The outbox sweep deletes published events by `published_at`; the only
outbox index so far covers the unpublished ones.
"""

from peewee import PostgresqlDatabase

POSTGRES = [
    """CREATE TABLE support_attachments (
        id BIGSERIAL PRIMARY KEY,
        ticket_id BIGINT,
        message_id BIGINT,
        digest TEXT NOT NULL CHECK (length(digest) = 64),
        size_bytes BIGINT NOT NULL CHECK (size_bytes >= 0),
        content_type TEXT NOT NULL,
        expires_at TIMESTAMP NOT NULL,
        created_at TIMESTAMP NOT NULL
    )""",
    "CREATE INDEX support_attachments_expiry ON support_attachments (expires_at)",
    "CREATE INDEX support_attachments_digest ON support_attachments (digest)",
    "CREATE INDEX outbox_events_published ON outbox_events (published_at) WHERE published_at IS NOT NULL",
]

SQLITE = [statement.replace("BIGSERIAL PRIMARY KEY", "INTEGER PRIMARY KEY AUTOINCREMENT") for statement in POSTGRES]


def up(migrator, db):
    for statement in POSTGRES if isinstance(db, PostgresqlDatabase) else SQLITE:
        db.execute_sql(statement)


def down(migrator, db):
    db.execute_sql("DROP INDEX IF EXISTS outbox_events_published")
    db.execute_sql("DROP TABLE IF EXISTS support_attachments")
