"""Versioned schema migrations, recorded in the `schema_migrations` table.

Each numbered file (`0001_*.py`) defines `up(migrator, db)`; applying is
idempotent: a file runs once, in order, inside a transaction, and its name is
written to the history table in that same transaction.
"""

from pathlib import Path

from playhouse.migrations import Runner

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
