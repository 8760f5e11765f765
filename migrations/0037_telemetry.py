"""Telemetry (SPEC 15.9): this installation's anonymous id, and the heartbeats a collector receives.

- `telemetry_installation`: one row (id 1) holding the random id this
  installation's heartbeats carry, made by the first heartbeat; it names no
  customer, operator or host.
- `telemetry_events`: heartbeats received in collector mode (the installation
  id and version they carry, their validated JSON body, `received_at`).
  Disposable (SPEC 7): the retention pass deletes them by `received_at`
  after APP_RETENTION_TELEMETRY_DAYS, and a collector's web process after
  180 days; `telemetry_events_received` is the order both delete in.
"""

from peewee import PostgresqlDatabase

POSTGRES = [
    """CREATE TABLE telemetry_installation (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        installation_id TEXT NOT NULL,
        created_at TIMESTAMP NOT NULL
    )""",
    """CREATE TABLE telemetry_events (
        id BIGSERIAL PRIMARY KEY,
        kind TEXT NOT NULL,
        installation_id TEXT NOT NULL,
        version TEXT NOT NULL,
        payload TEXT NOT NULL,
        received_at TIMESTAMP NOT NULL
    )""",
    "CREATE INDEX telemetry_events_received ON telemetry_events (received_at)",
]

SQLITE = [statement.replace("BIGSERIAL PRIMARY KEY", "INTEGER PRIMARY KEY AUTOINCREMENT") for statement in POSTGRES]


def up(migrator, db):
    for statement in POSTGRES if isinstance(db, PostgresqlDatabase) else SQLITE:
        db.execute_sql(statement)


def down(migrator, db):
    db.execute_sql("DROP TABLE IF EXISTS telemetry_events")
    db.execute_sql("DROP TABLE IF EXISTS telemetry_installation")
