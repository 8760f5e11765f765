"""The durable job queue: job rows, worker heartbeats, the leader lease,
the periodic schedule, and Huey's key/value store (results, locks, counters).

DDL is written out per dialect because the queue depends on details a
generic schema tool would blur: partial indexes for the fetch path and the
unique key, a CHECK that ties final states to `finalized_at`, AUTOINCREMENT
on SQLite so a cleaned-up job id is never handed out again.
"""

from peewee import PostgresqlDatabase

STATES = "'available','scheduled','running','retryable','completed','discarded','cancelled','pending'"
FINAL = "'completed','discarded','cancelled'"

POSTGRES = [
    f"""
    CREATE TABLE jobs (
        id BIGSERIAL PRIMARY KEY,
        kind TEXT NOT NULL,
        queue TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ({STATES})),
        args TEXT NOT NULL DEFAULT '{{}}',
        payload BYTEA,
        attempt INTEGER NOT NULL DEFAULT 0 CHECK (attempt >= 0),
        max_attempts INTEGER NOT NULL CHECK (max_attempts > 0),
        priority INTEGER NOT NULL DEFAULT 0,
        errors TEXT NOT NULL DEFAULT '[]',
        unique_key TEXT,
        unique_states INTEGER NOT NULL DEFAULT 0,
        created_at TIMESTAMP NOT NULL,
        scheduled_at TIMESTAMP NOT NULL,
        attempted_at TIMESTAMP,
        attempted_by TEXT,
        finalized_at TIMESTAMP,
        CONSTRAINT jobs_finalized_at_matches_state CHECK (
            (state IN ({FINAL}) AND finalized_at IS NOT NULL)
            OR (state NOT IN ({FINAL}) AND finalized_at IS NULL))
    )""",
    """CREATE INDEX jobs_fetch ON jobs (queue, priority DESC, scheduled_at, id)
       WHERE state IN ('available', 'scheduled', 'retryable')""",
    "CREATE UNIQUE INDEX jobs_unique_key ON jobs (unique_key) WHERE unique_key IS NOT NULL",
    "CREATE INDEX jobs_state_id ON jobs (state, id)",
    "CREATE INDEX jobs_finalized ON jobs (state, finalized_at) WHERE finalized_at IS NOT NULL",
    "CREATE INDEX jobs_running_by ON jobs (attempted_by) WHERE state = 'running'",
    """CREATE TABLE job_workers (
        id TEXT PRIMARY KEY,
        hostname TEXT NOT NULL,
        pid INTEGER NOT NULL,
        queues TEXT NOT NULL,
        started_at TIMESTAMP NOT NULL,
        heartbeat_at TIMESTAMP NOT NULL
    )""",
    """CREATE TABLE job_leader (
        name TEXT PRIMARY KEY,
        leader_id TEXT NOT NULL,
        elected_at TIMESTAMP NOT NULL,
        expires_at TIMESTAMP NOT NULL
    )""",
    """CREATE TABLE job_periodic (
        name TEXT PRIMARY KEY,
        last_run_at TIMESTAMP NOT NULL
    )""",
    """CREATE TABLE huey_kv (
        name TEXT NOT NULL,
        key TEXT NOT NULL,
        value BYTEA NOT NULL,
        expires_at TIMESTAMP,
        PRIMARY KEY (name, key)
    )""",
    """CREATE TABLE huey_counters (
        name TEXT NOT NULL,
        key TEXT NOT NULL,
        value BIGINT NOT NULL,
        PRIMARY KEY (name, key)
    )""",
]

SQLITE = [
    statement.replace("BIGSERIAL PRIMARY KEY", "INTEGER PRIMARY KEY AUTOINCREMENT")
    .replace("BYTEA", "BLOB")
    .replace("BIGINT", "INTEGER")
    for statement in POSTGRES
]


def up(migrator, db):
    for statement in POSTGRES if isinstance(db, PostgresqlDatabase) else SQLITE:
        db.execute_sql(statement)


def down(migrator, db):
    for table in ("huey_counters", "huey_kv", "job_periodic", "job_leader", "job_workers", "jobs"):
        db.execute_sql(f"DROP TABLE IF EXISTS {table}")
