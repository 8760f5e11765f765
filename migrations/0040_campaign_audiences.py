"""Campaigns with an audience and a schedule (SPEC 15.5): who a campaign goes to, when it starts, and how far
the `campaign_expansion` pass has written its recipients.

- `campaigns.status` gains `draft` (not started: an operator previews and
  starts it later), `scheduled` (starts at `start_at`) and `paused` (the bot
  sends none of its recipients until it is resumed); `sending` and `done`
  stay what they were.
- `audience`: `all`, `active`, `expired`, `trial-only`, `never-paid`,
  `plan` (holders of `plan_id`'s active period) or `named` (the customers
  an operator listed, written when the campaign is created).
- `start_at`: when it starts (NULL while a draft). `expanded_at`: when its
  recipients were all written (NULL while the pass still has some to
  write); `expansion_cursor`: the last customer id the pass went through,
  so a run that stopped carries on where it was.
- `left_out_blocked`, `left_out_unreachable`: customers of the audience the
  campaign does not go to — blocked by an operator (a campaign, not an
  announcement), or unreachable (Telegram answered 403 to an earlier send).

Campaigns made before this migration were written whole when created:
`audience` `all`, started and expanded at their creation. SQLite cannot
change a CHECK constraint in place, so its `campaigns` table is built anew
(the runner has turned foreign keys off for the migration, SqliteMigrator).
"""

from peewee import PostgresqlDatabase

STATUSES = "'draft', 'scheduled', 'sending', 'paused', 'done'"
STATUSES_BEFORE = "'sending', 'done'"
AUDIENCES = "'all', 'active', 'expired', 'trial-only', 'never-paid', 'plan', 'named'"
COPIED = "id, kind, text, status, recipients, created_by, created_at, finished_at"
NEW_COLUMNS = [
    f"audience TEXT NOT NULL DEFAULT 'all' CHECK (audience IN ({AUDIENCES}))",
    "plan_id BIGINT REFERENCES plans (id)",
    "start_at TIMESTAMP",
    "expanded_at TIMESTAMP",
    "expansion_cursor TEXT",
    "left_out_blocked INTEGER NOT NULL DEFAULT 0",
    "left_out_unreachable INTEGER NOT NULL DEFAULT 0",
]


def _table(name, statuses, extra):
    columns = [
        "id INTEGER PRIMARY KEY AUTOINCREMENT",
        "kind TEXT NOT NULL CHECK (kind IN ('campaign', 'announcement'))",
        "text TEXT NOT NULL CHECK (length(text) BETWEEN 1 AND 4096)",
        f"status TEXT NOT NULL DEFAULT 'sending' CHECK (status IN ({statuses}))",
        "recipients INTEGER NOT NULL DEFAULT 0",
        "created_by TEXT NOT NULL",
        "created_at TIMESTAMP NOT NULL",
        "finished_at TIMESTAMP",
        *extra,
    ]
    return f"CREATE TABLE {name} ({', '.join(columns)})"


def _rebuild_sqlite(db, definition, copied, values):
    """Build `campaigns` anew, copy the rows, keep the id sequence, swap."""
    db.execute_sql(definition)
    db.execute_sql(f"INSERT INTO campaigns_rebuilt ({copied}) SELECT {values} FROM campaigns")
    db.execute_sql("DELETE FROM sqlite_sequence WHERE name = 'campaigns_rebuilt'")
    db.execute_sql(
        "INSERT INTO sqlite_sequence (name, seq) SELECT 'campaigns_rebuilt', seq FROM sqlite_sequence"
        " WHERE name = 'campaigns'"
    )
    db.execute_sql("DROP TABLE campaigns")
    db.execute_sql("ALTER TABLE campaigns_rebuilt RENAME TO campaigns")
    broken = db.execute_sql("PRAGMA foreign_key_check").fetchall()
    if broken:
        raise RuntimeError(f"rebuilding campaigns left {len(broken)} broken references")


def up(migrator, db):
    if isinstance(db, PostgresqlDatabase):
        for column in NEW_COLUMNS:
            db.execute_sql(f"ALTER TABLE campaigns ADD COLUMN {column}")
        db.execute_sql("ALTER TABLE campaigns DROP CONSTRAINT campaigns_status_check")
        db.execute_sql(f"ALTER TABLE campaigns ADD CONSTRAINT campaigns_status_check CHECK (status IN ({STATUSES}))")
        db.execute_sql("UPDATE campaigns SET start_at = created_at, expanded_at = created_at")
    else:
        _rebuild_sqlite(
            db,
            _table("campaigns_rebuilt", STATUSES, NEW_COLUMNS),
            f"{COPIED}, start_at, expanded_at",
            f"{COPIED}, created_at, created_at",
        )


def down(migrator, db):
    # Drafts, scheduled and paused campaigns have no place in the older schema: they are sent as they are.
    db.execute_sql("UPDATE campaigns SET status = 'sending' WHERE status IN ('draft', 'scheduled', 'paused')")
    if isinstance(db, PostgresqlDatabase):
        db.execute_sql("ALTER TABLE campaigns DROP CONSTRAINT campaigns_status_check")
        db.execute_sql(
            f"ALTER TABLE campaigns ADD CONSTRAINT campaigns_status_check CHECK (status IN ({STATUSES_BEFORE}))"
        )
        for column in reversed(NEW_COLUMNS):
            db.execute_sql(f"ALTER TABLE campaigns DROP COLUMN {column.split()[0]}")
    else:
        _rebuild_sqlite(db, _table("campaigns_rebuilt", STATUSES_BEFORE, []), COPIED, COPIED)
