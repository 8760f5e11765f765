"""Open the database named by the settings and bind `models.db` to it.

PostgreSQL gets a connection pool (threads of one process share it); SQLite
gets WAL, a busy timeout and IMMEDIATE transactions, so a transaction that
reads and then writes takes the write lock up front instead of failing with
"database is locked" halfway through.
"""

import os

from peewee import PostgresqlDatabase, SqliteDatabase
from playhouse.pool import PooledPostgresqlDatabase

from models.base import db

SQLITE_BUSY_TIMEOUT_S = 30
SQLITE_PRAGMAS = (
    ("journal_mode", "wal"),
    ("synchronous", "normal"),
    ("foreign_keys", 1),
)
PG_POOL_WAIT_S = 30
PG_STALE_CONNECTION_S = 300


def open_database(target, pool_size=10):
    """A peewee Database for a DatabaseTarget (not yet bound to models)."""
    if target.is_postgres:
        return PooledPostgresqlDatabase(
            target.dsn,
            max_connections=pool_size,
            stale_timeout=PG_STALE_CONNECTION_S,
            timeout=PG_POOL_WAIT_S,
        )
    directory = os.path.dirname(os.path.abspath(target.path))
    os.makedirs(directory, exist_ok=True)
    return SqliteDatabase(
        target.path,
        pragmas=SQLITE_PRAGMAS,
        timeout=SQLITE_BUSY_TIMEOUT_S,
        lock_type="IMMEDIATE",
        check_same_thread=False,
    )


def bind_database(target, pool_size=10):
    """Point `models.db` at the target and return the concrete database."""
    database = open_database(target, pool_size=pool_size)
    db.initialize(database)
    return database


def is_postgres(database=None):
    return isinstance(database or db.obj, PostgresqlDatabase)
