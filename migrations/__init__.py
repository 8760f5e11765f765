"""Versioned schema migrations, recorded in the `schema_migrations` table.

Each numbered file (`0001_*.py`) defines `up(migrator, db)`; applying is
idempotent: a file runs once, in order, inside a transaction, and its name is
written to the history table in that same transaction.

A file that declares `atomic = False` runs outside a transaction (its name is
recorded after it): what PostgreSQL builds without blocking writes —
`create_index_concurrently` — cannot run inside one. Such a file must be
idempotent, since a release phase killed before the record runs it again.

Deploys roll (expand/contract): the running release's code keeps working on
the next release's schema while `release` migrates. So a migration adds
columns nullable or with a default, backfills, and only a later release uses
them; a column or table is dropped in the release after the last code that
reads it; and an index on a table that grows is built with
`create_index_concurrently`.
"""

from pathlib import Path

from peewee import PostgresqlDatabase
from playhouse.migrations import MigrationError, Runner

MIGRATIONS_DIR = Path(__file__).resolve().parent
HISTORY_TABLE = "schema_migrations"


def runner(database):
    return Runner(database, directory=str(MIGRATIONS_DIR), table_name=HISTORY_TABLE)


def apply(database):
    """Apply every pending migration; return the names applied (empty when current)."""
    return runner(database).up()


def pending(database):
    """Names of migrations not yet applied to this database."""
    return [m.name for m in runner(database).status() if m.path and not m.applied]


def create_index_concurrently(database, name, on):
    """Build index `name` ON `on` (e.g. "payment_intents (created_at) WHERE status = 'pending'").

    On PostgreSQL, CONCURRENTLY: writes to the table go on during the build
    (a plain CREATE INDEX blocks them until it ends). It cannot run in a
    transaction, so the migration declares `atomic = False`. A build that was
    interrupted leaves an INVALID index behind, which is dropped and built
    anew; a valid one is left as it is. SQLite has one writer at a time and
    no concurrent build: a plain CREATE INDEX IF NOT EXISTS.
    """
    if not isinstance(database, PostgresqlDatabase):
        database.execute_sql(f"CREATE INDEX IF NOT EXISTS {name} ON {on}")
        return
    if database.in_transaction():
        raise MigrationError(f"index {name} is built concurrently: its migration must declare atomic = False")
    (valid,) = database.execute_sql(
        "SELECT (SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(%s))", (name,)
    ).fetchone()
    if valid is False:
        database.execute_sql(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
    database.execute_sql(f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON {on}")
