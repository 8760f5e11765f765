"""The outbox publisher (SPEC 8.2, 15.2): destinations, one delivery row per
event and destination, and what an event needs to be routed and ordered.

- `outbox_destinations`: URL, topics ('*' or a JSON list), the signing secret
  (sealed: `v1:<key id>:…`), active (a removed destination is kept, inactive,
  for its history and audit).
- `outbox_deliveries`: one per (event, destination), never two (UNIQUE). The
  unfinished ones (pending, retrying) are what the publisher works through:
  by stream (destination, aggregate) in the order they were made (`id`:
  routing order, which is the events' commit order), and by due time for the
  dispatcher's sweep; the not-delivered ones are what the Outbox page counts.
  Deleting an event (retention) deletes its deliveries.
- `outbox_events` gains `aggregate` (events of one aggregate are delivered in
  order) and `routed_at` (when its deliveries were made; the dispatcher reads
  the unrouted ones by id). The per-event retry columns nothing ever wrote go:
  retries are per destination now, in the delivery rows.
"""

from peewee import PostgresqlDatabase

UNFINISHED = "status IN ('pending', 'retrying')"

POSTGRES = [
    """CREATE TABLE outbox_destinations (
        id BIGSERIAL PRIMARY KEY,
        url TEXT NOT NULL,
        topics TEXT NOT NULL,
        secret TEXT NOT NULL,
        active BOOLEAN NOT NULL DEFAULT TRUE,
        created_at TIMESTAMP NOT NULL
    )""",
    """CREATE TABLE outbox_deliveries (
        id BIGSERIAL PRIMARY KEY,
        event_id BIGINT NOT NULL REFERENCES outbox_events (id) ON DELETE CASCADE,
        destination_id BIGINT NOT NULL REFERENCES outbox_destinations (id),
        aggregate TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('pending', 'retrying', 'delivered', 'dead')),
        attempts INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
        next_attempt_at TIMESTAMP NOT NULL,
        last_error_code TEXT,
        delivered_at TIMESTAMP,
        created_at TIMESTAMP NOT NULL,
        UNIQUE (event_id, destination_id)
    )""",
    f"""CREATE INDEX outbox_deliveries_stream ON outbox_deliveries (destination_id, aggregate, id)
       WHERE {UNFINISHED}""",
    f"CREATE INDEX outbox_deliveries_due ON outbox_deliveries (next_attempt_at, id) WHERE {UNFINISHED}",
    """CREATE INDEX outbox_deliveries_undelivered ON outbox_deliveries (destination_id, status)
       WHERE status <> 'delivered'""",
    "ALTER TABLE outbox_events ADD COLUMN aggregate TEXT",
    "ALTER TABLE outbox_events ADD COLUMN routed_at TIMESTAMP",
    "CREATE INDEX outbox_events_unrouted ON outbox_events (id) WHERE routed_at IS NULL",
    "ALTER TABLE outbox_events DROP COLUMN attempt_count",
    "ALTER TABLE outbox_events DROP COLUMN next_attempt_at",
    "ALTER TABLE outbox_events DROP COLUMN last_error",
]

SQLITE = [
    statement.replace("BIGSERIAL PRIMARY KEY", "INTEGER PRIMARY KEY AUTOINCREMENT").replace("DEFAULT TRUE", "DEFAULT 1")
    for statement in POSTGRES
]


def up(migrator, db):
    for statement in POSTGRES if isinstance(db, PostgresqlDatabase) else SQLITE:
        db.execute_sql(statement)


def down(migrator, db):
    db.execute_sql("DROP TABLE IF EXISTS outbox_deliveries")
    db.execute_sql("DROP TABLE IF EXISTS outbox_destinations")
    db.execute_sql("DROP INDEX IF EXISTS outbox_events_unrouted")
    for statement in (
        "ALTER TABLE outbox_events ADD COLUMN attempt_count INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE outbox_events ADD COLUMN next_attempt_at TIMESTAMP",
        "ALTER TABLE outbox_events ADD COLUMN last_error TEXT",
        "ALTER TABLE outbox_events DROP COLUMN routed_at",
        "ALTER TABLE outbox_events DROP COLUMN aggregate",
    ):
        db.execute_sql(statement)
