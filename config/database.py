"""Open the database named by the settings and bind `models.db` to it.

PostgreSQL gets a connection pool (threads of one process share it) whose
transactions spend as few round trips as they can (see PostgresDatabase);
SQLite gets WAL, a busy timeout and IMMEDIATE transactions, so a transaction that
reads and then writes takes the write lock up front instead of failing with
"database is locked" halfway through. `transaction_with_lock_timeout` is a
transaction that gives up on a lock after a few seconds instead of waiting
(PostgreSQL's lock_timeout, SQLite's busy timeout).
"""

import contextlib
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


class PostgresDatabase(PooledPostgresqlDatabase):
    """Pooled PostgreSQL whose transactions cost fewer round trips.

    A short transaction's round trips are most of its length, and under
    SERIALIZABLE a longer transaction overlaps more others and fails more
    often. So BEGIN is not sent on its own: it goes out with the
    transaction's first statement. Writes handed to `defer` go out with the
    next statement, or with the COMMIT. A transaction that sent nothing sends
    no COMMIT either. The statements still run in order, on the server, in
    one transaction; an error in any of them fails the call that sent them.
    """

    def begin(self, isolation_level=None):
        level = self._isolation_level if isolation_level is None else isolation_level
        if level:
            begin = "BEGIN TRANSACTION ISOLATION LEVEL %s" % self._adapter.isolation_level_str(level)
        else:
            begin = "BEGIN"
        self.connection()  # open (or take from the pool) now: opening resets the transaction stack
        self._state.unsent = [(begin, None)]

    def defer(self, statements):
        """Queue writes of the open transaction; they are sent with the next statement or the COMMIT."""
        if not self.in_transaction():
            for sql, params in statements:
                super().execute_sql(sql, params)
            return
        self._unsent().extend(statements)

    def execute_sql(self, sql, params=None):
        unsent = self._take_unsent()
        if unsent:
            sql, params = _joined(unsent + [(sql, params)])
        return super().execute_sql(sql, params)

    def commit(self):
        unsent = self._take_unsent()
        if unsent and len(unsent) == 1 and unsent[0][0].startswith("BEGIN"):
            return  # nothing was sent, so there is nothing to commit
        if unsent:
            sql, params = _joined(unsent + [("COMMIT", None)])
            return super().execute_sql(sql, params)
        return super().commit()

    def rollback(self):
        unsent = self._take_unsent()
        if unsent and unsent[0][0].startswith("BEGIN"):
            return  # the transaction never reached the server
        return super().rollback()

    def _unsent(self):
        unsent = getattr(self._state, "unsent", None)
        if unsent is None:
            unsent = self._state.unsent = []
        return unsent

    def _take_unsent(self):
        unsent = getattr(self._state, "unsent", None)
        if not unsent:
            return None
        self._state.unsent = None
        return unsent

    def close(self):
        self._state.unsent = None
        return super().close()


def _joined(statements):
    """Several statements as one string for one round trip (psycopg2 fills `%s` client side)."""
    texts, values = [], []
    for sql, params in statements:
        if params is None:
            texts.append(sql.replace("%", "%%"))
        else:
            texts.append(sql)
            values.extend(params)
    return ";\n".join(texts), values


def open_database(target, pool_size=10):
    """A peewee Database for a DatabaseTarget (not yet bound to models)."""
    if target.is_postgres:
        return PostgresDatabase(
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


@contextlib.contextmanager
def transaction_with_lock_timeout(seconds, database=None):
    """`db.atomic()` that fails with OperationalError when a lock is not granted within `seconds`.

    PostgreSQL waits per lock (SET LOCAL ends with the transaction). SQLite
    has one write lock for the whole file, taken by BEGIN IMMEDIATE, and waits
    for it as long as the connection's busy timeout, so that is shortened
    for this transaction and put back afterwards.
    """
    database = database or db.obj
    milliseconds = max(1, int(seconds * 1000))
    if is_postgres(database):
        with database.atomic():
            database.execute_sql(f"SET LOCAL lock_timeout = {milliseconds}")
            yield
        return
    database.execute_sql(f"PRAGMA busy_timeout = {milliseconds}")
    try:
        with database.atomic():
            yield
    finally:
        database.execute_sql(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_S * 1000}")
