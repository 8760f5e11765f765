"""Open the database named by the settings and bind `models.db` to it.

PostgreSQL gets a connection pool (threads of one process share it) whose
transactions spend as few round trips as they can, and which outlives a
server restart (see PostgresDatabase); SQLite gets WAL, a busy timeout and
IMMEDIATE transactions, so a transaction that reads and then writes takes the
write lock up front instead of failing with "database is locked" halfway
through. `transaction_with_lock_timeout` is a transaction that gives up on a
lock after a few seconds instead of waiting (PostgreSQL's lock_timeout,
SQLite's busy timeout).
"""

import contextlib
import logging
import os
import select
import threading
import time
from urllib.parse import urlsplit

from peewee import InterfaceError, OperationalError, PostgresqlDatabase, SqliteDatabase, _savepoint
from playhouse.pool import PooledPostgresqlDatabase
from psycopg2.extensions import TRANSACTION_STATUS_IDLE

from config.logging import log_repeated
from models.base import db

logger = logging.getLogger("omniflow.database")

SQLITE_BUSY_TIMEOUT_S = 30
SQLITE_PRAGMAS = (
    ("journal_mode", "wal"),
    ("synchronous", "normal"),
    ("foreign_keys", 1),
)
PG_POOL_WAIT_S = 30
PG_STALE_CONNECTION_S = 300
PG_DEFAULT_PORT = 5432
# A server that does not answer a connection attempt (a host gone, packets dropped) fails it after
# this long instead of after the OS's TCP timeout (minutes); a DATABASE_URL's own connect_timeout wins.
PG_CONNECT_TIMEOUT_S = 10


class DatabaseUnreachable(Exception):
    """The database did not open; the one-line message says where it is (never a password) and why."""


class PostgresDatabase(PooledPostgresqlDatabase):
    """Pooled PostgreSQL whose transactions cost fewer round trips.

    A short transaction's round trips are most of its length, and under
    SERIALIZABLE a longer transaction overlaps more others and fails more
    often. So BEGIN is not sent on its own: it goes out with the
    transaction's first statement. Writes handed to `defer` go out with the
    next statement, or with the COMMIT, and so do a savepoint's SAVEPOINT and
    RELEASE (a nested `atomic()`): a savepoint rolled back before anything
    in it was sent is never sent at all. A transaction that sent nothing
    sends no COMMIT either. The statements still run in order, on the server, in
    one transaction; an error in any of them fails the call that sent them.

    A connection the server cut (a restart, a failover) is dropped by the
    thread that holds it before its next statement or transaction, never in
    the middle of a transaction, so that thread reconnects instead of failing
    with "connection already closed" forever. The pool checks an idle
    connection before handing it out by looking at its socket
    (`_is_closed`). The database also keeps the time since statements
    started failing for want of a connection with none answered since:
    `unanswered_for()`.
    """

    def __init__(self, *args, direct_dsn=None, **kwargs):
        self.direct_dsn = direct_dsn  # DATABASE_DIRECT_URL: the server itself, when the pool goes through a pooler
        self._outage_lock = threading.Lock()
        self._unanswered_since = None
        self._outage_logged = False
        super().__init__(*args, **kwargs)

    def begin(self, isolation_level=None):
        level = self._isolation_level if isolation_level is None else isolation_level
        if level:
            begin = "BEGIN TRANSACTION ISOLATION LEVEL %s" % self._adapter.isolation_level_str(level)
        else:
            begin = "BEGIN"
        self._drop_lost_connection()
        try:
            self.connection()  # open (or take from the pool) now: opening resets the transaction stack
        except OperationalError as error:
            self._unanswered(error)
            raise
        self._state.unsent = [(begin, None)]

    def defer(self, statements):
        """Queue writes of the open transaction; they are sent with the next statement or the COMMIT."""
        if not self.in_transaction():
            for sql, params in statements:
                super().execute_sql(sql, params)
            return
        self._unsent().extend(statements)

    def savepoint(self):
        return _DeferredSavepoint(self)

    def unsent_statements(self):
        """The statements waiting to go out with the next one (the transaction's BEGIN among them)."""
        return list(getattr(self._state, "unsent", None) or [])

    def execute_sql(self, sql, params=None):
        unsent = self._take_unsent()
        if unsent:
            sql, params = _joined(unsent + [(sql, params)])
        elif not self.in_transaction():
            self._drop_lost_connection()
        try:
            cursor = super().execute_sql(sql, params)
        except (InterfaceError, OperationalError) as error:
            if self._connection_lost():
                self._unanswered(error)
            raise
        if self._unanswered_since is not None:
            self._answered_again()
        return cursor

    def commit(self):
        unsent = self._take_unsent()
        if unsent and unsent[0][0].startswith("BEGIN") and all(_is_control(sql) for sql, _ in unsent[1:]):
            return  # nothing was sent (savepoints taken and released hold nothing), so there is nothing to commit
        if unsent:
            sql, params = _joined(unsent + [("COMMIT", None)])
            return super().execute_sql(sql, params)
        return super().commit()

    def rollback(self):
        unsent = self._take_unsent()
        if unsent and unsent[0][0].startswith("BEGIN"):
            return  # the transaction never reached the server
        if self._connection_lost():
            return  # the server ended the transaction with the connection
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

    # -- connections the server cut --------------------------------------------

    def _connection_lost(self):
        """This thread has no working connection: none could be opened, or the server cut it."""
        return self._state.closed or self._state.conn.closed != 0

    def _drop_lost_connection(self):
        if not self._state.closed and self._state.conn.closed != 0:
            self.close()  # the pool sees it cannot be reused and discards it

    def _is_closed(self, conn):
        """Whether a pooled connection is unusable, checked at check-out without a round trip when it can be.

        peewee's check sends `SELECT 1` on every check-out, and a worker
        checks out once per claim and once per record: a round trip more per
        transaction, with its wait for the server and the GIL handed to the
        other threads and back. An idle connection's socket has nothing to
        read unless the server sent something, which for a connection in the
        pool means it is ending it (a restart, a failover, a terminated
        backend: its FATAL message, then EOF). So only a connection with
        something to read, or not idle, gets peewee's check; any other is
        handed out as it is. One cut without a word (a network that drops
        packets) fails its first statement, as it would have failed the
        `SELECT 1`, and is replaced before the thread's next one.
        """
        if conn.closed:
            return True
        if conn.info.transaction_status != TRANSACTION_STATUS_IDLE or _readable(conn):
            return super()._is_closed(conn)
        return False

    def _unanswered(self, error):
        with self._outage_lock:
            if self._unanswered_since is not None:
                return
            self._unanswered_since = time.monotonic()
        # Rate-limited: a server refusing some connections (too many clients)
        # alternates failures and answers without ever being down.
        logged = log_repeated(logger, logging.WARNING, "database not answering; statements reconnect", error=error)
        self._outage_logged = logged

    def _answered_again(self):
        with self._outage_lock:
            since, self._unanswered_since = self._unanswered_since, None
        if since is not None and self._outage_logged:
            self._outage_logged = False
            logger.warning(f"database answering again after {time.monotonic() - since:.1f} s")

    def unanswered_for(self):
        """Seconds since statements started failing for want of a connection, none answered since (else 0)."""
        since = self._unanswered_since
        return time.monotonic() - since if since is not None else 0.0


class _DeferredSavepoint(_savepoint):
    """A savepoint whose SAVEPOINT and RELEASE ride with the transaction's next round trip.

    A settlement nests several savepoints (its own, enqueueing's, the job
    insert's), each around one or two statements: sent on their own they were
    a third of its round trips. Rolling back sends ROLLBACK TO only when the
    SAVEPOINT reached the server; otherwise the SAVEPOINT and whatever was
    deferred after it are dropped unsent, which undoes them just the same."""

    def _begin(self):
        self.db._unsent().append((f"SAVEPOINT {self.quoted_sid}", None))

    def commit(self, begin=True):
        self.db._unsent().append((f"RELEASE SAVEPOINT {self.quoted_sid}", None))
        if begin:
            self._begin()

    def rollback(self, begin=True):
        unsent = self.db._unsent()
        mark = (f"SAVEPOINT {self.quoted_sid}", None)
        if mark in unsent:
            del unsent[unsent.index(mark) :]
        else:
            # Everything still unsent came after the SAVEPOINT (which was sent): it is undone unsent.
            del unsent[:]
            self.db.execute_sql(f"ROLLBACK TO SAVEPOINT {self.quoted_sid}")
        if begin:
            self._begin()


def _is_control(sql):
    return sql.startswith(("SAVEPOINT ", "RELEASE SAVEPOINT "))


def _readable(conn):
    """The server sent something this idle connection has not read (or closed it): no waiting."""
    poller = select.poll()
    poller.register(conn.fileno(), select.POLLIN | select.POLLERR | select.POLLHUP)
    return bool(poller.poll(0))


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


def _connect_options(dsn):
    from psycopg2.extensions import parse_dsn

    return {} if "connect_timeout" in parse_dsn(dsn) else {"connect_timeout": PG_CONNECT_TIMEOUT_S}


def open_database(target, pool_size=10, direct=None):
    """A peewee Database for a DatabaseTarget (not yet bound to models); `direct` is DATABASE_DIRECT_URL's."""
    if target.is_postgres:
        return PostgresDatabase(
            target.dsn,
            direct_dsn=direct.dsn if direct is not None else None,
            max_connections=pool_size,
            stale_timeout=PG_STALE_CONNECTION_S,
            timeout=PG_POOL_WAIT_S,
            **_connect_options(target.dsn),
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


def bind_database(target, pool_size=10, direct=None):
    """Point `models.db` at the target and return the concrete database."""
    database = open_database(target, pool_size=pool_size, direct=direct)
    db.initialize(database)
    return database


def session_dsn(database=None):
    """(dsn, connect options) of a PostgreSQL connection that is a session of its own, for LISTEN.

    Through a transaction-pooling PgBouncer (DATABASE_URL), consecutive
    statements of one client run on whichever server connection is free, so
    nothing that outlives a transaction (LISTEN, session advisory locks,
    SET, prepared statements) may go through it. DATABASE_DIRECT_URL names
    the server itself for those; without it, DATABASE_URL is the server.
    """
    database = database or db.obj
    direct_dsn = getattr(database, "direct_dsn", None)
    if direct_dsn:
        return direct_dsn, _connect_options(direct_dsn)
    return database.database, dict(database.connect_params)


def is_postgres(database=None):
    return isinstance(database or db.obj, PostgresqlDatabase)


def unanswered_for(database=None):
    """How long the database has not answered this process (seconds; a SQLite file always answers)."""
    database = database or db.obj
    return database.unanswered_for() if isinstance(database, PostgresDatabase) else 0.0


def server_name(database=None):
    """`host:port/dbname` of a PostgreSQL database, or the SQLite file: for messages, never with a password."""
    database = database or db.obj
    if not isinstance(database, PostgresqlDatabase):
        return database.database
    from psycopg2.extensions import parse_dsn

    parts = parse_dsn(database.database)
    return f"{parts.get('host', 'localhost')}:{parts.get('port', 5432)}/{parts.get('dbname', '')}"


def is_unavailable(error):
    """The database did not answer (lost or refused connection, a lock wait), as opposed to a statement being wrong."""
    import psycopg2

    return isinstance(error, (InterfaceError, OperationalError, psycopg2.InterfaceError, psycopg2.OperationalError))


def location(target):
    """Where a database is, for a message: host, port and name, or the file; never the credentials."""
    if not target.is_postgres:
        return f"SQLite file {target.path}"
    parts = urlsplit(target.dsn)
    try:
        port = parts.port or PG_DEFAULT_PORT
    except ValueError:
        port = "?"
    return f"PostgreSQL at {parts.hostname or 'localhost'}:{port}, database {parts.path.lstrip('/')}"


def require_reachable(database, target):
    """Open one connection now (and one to DATABASE_DIRECT_URL when it is set), so a process that
    cannot reach its database says so at start."""
    try:
        database.connect(reuse_if_open=True)
    except OperationalError as error:
        raise DatabaseUnreachable(f"cannot connect to the database ({location(target)}): {_reason(error)}") from None
    database.close()
    if getattr(database, "direct_dsn", None):
        import psycopg2

        from config.settings import DatabaseTarget

        direct = DatabaseTarget("postgres", dsn=database.direct_dsn)
        try:
            psycopg2.connect(database.direct_dsn, **_connect_options(database.direct_dsn)).close()
        except psycopg2.OperationalError as error:
            raise DatabaseUnreachable(
                f"cannot connect to DATABASE_DIRECT_URL ({location(direct)}): {_reason(error)}"
            ) from None


def _reason(error):
    lines = str(error).strip().splitlines()
    return lines[0].strip() if lines else type(error).__name__


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
