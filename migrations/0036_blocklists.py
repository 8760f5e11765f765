"""Blocklists (SPEC 15.8): sources of Telegram ids whose customers cannot buy.

- `blocklist_sources`: the URL, an optional bearer token (sealed: `v1:<key
  id>:…`), active (a removed source is kept, inactive, for its history and
  audit), the validators of the current list (`etag`, `last_modified`, sent
  back as a conditional GET), and what the last refresh did: `status`
  (`new` until the first answer, `ok`, `failed`), `last_refresh_at` (the last
  attempt), `last_success_at` (the last 200 or 304), `list_changed_at`,
  `last_error` (a code and a short reason, never the body), the consecutive
  `failure_count` and the current list's `entry_count`.
- `blocklist_entries`: the current (last good) list of each source, one row
  per Telegram id; `blocklist_entries_telegram` finds the sources listing an id.

A customer is blocked by a list through `customers.blocked` with
`blocked_reason` = 'blocklist'; nothing here is disposable (SPEC 7).
"""

from peewee import PostgresqlDatabase

POSTGRES = [
    """CREATE TABLE blocklist_sources (
        id BIGSERIAL PRIMARY KEY,
        url TEXT NOT NULL,
        token TEXT,
        active BOOLEAN NOT NULL DEFAULT TRUE,
        created_at TIMESTAMP NOT NULL,
        removed_at TIMESTAMP,
        etag TEXT,
        last_modified TEXT,
        status TEXT NOT NULL DEFAULT 'new' CHECK (status IN ('new', 'ok', 'failed')),
        last_refresh_at TIMESTAMP,
        last_success_at TIMESTAMP,
        list_changed_at TIMESTAMP,
        last_error TEXT,
        failure_count INTEGER NOT NULL DEFAULT 0 CHECK (failure_count >= 0),
        entry_count INTEGER NOT NULL DEFAULT 0 CHECK (entry_count >= 0)
    )""",
    """CREATE TABLE blocklist_entries (
        source_id BIGINT NOT NULL REFERENCES blocklist_sources (id),
        telegram_id BIGINT NOT NULL,
        PRIMARY KEY (source_id, telegram_id)
    )""",
    "CREATE INDEX blocklist_entries_telegram ON blocklist_entries (telegram_id)",
]

SQLITE = [
    statement.replace("BIGSERIAL PRIMARY KEY", "INTEGER PRIMARY KEY AUTOINCREMENT").replace("DEFAULT TRUE", "DEFAULT 1")
    for statement in POSTGRES
]


def up(migrator, db):
    for statement in POSTGRES if isinstance(db, PostgresqlDatabase) else SQLITE:
        db.execute_sql(statement)


def down(migrator, db):
    db.execute_sql("DROP TABLE IF EXISTS blocklist_entries")
    db.execute_sql("DROP TABLE IF EXISTS blocklist_sources")
