"""Short transactions that own an invariant, the same on both databases.

`serializable()` is SERIALIZABLE on PostgreSQL and an IMMEDIATE transaction
(one writer at a time, so serializable by construction) on SQLite.
`locked(query)` adds FOR UPDATE where the database has it; SQLite's write
lock already covers the whole transaction. `retry_serializable(fn)` runs
`fn` in such a transaction and runs it again when the database refused to
serialize it (or, on SQLite, stayed busy past the timeout); `fn` must only
touch the database, never the outside world, so running it again is safe.

`fetch_one`, `fetch_all` and `execute_all` run hand-written SQL (written with `%s`
placeholders) on either database. Inside a SERIALIZABLE transaction every
round trip lengthens the window in which concurrent transactions conflict,
so `execute_all` sends a group of writes as one round trip on PostgreSQL,
together with the COMMIT when they are the transaction's last; `defer` does
the same for peewee queries.
"""

import contextlib
import functools
import random
import time

from peewee import OperationalError, PostgresqlDatabase

from models.base import db

SERIALIZATION_RETRIES = 20
RETRYABLE_PG_CODES = ("40001", "40P01")  # serialization_failure, deadlock_detected


class SerializationRetriesExhausted(Exception):
    code = "serialization_failure"


def is_postgres():
    return isinstance(db.obj, PostgresqlDatabase)


@contextlib.contextmanager
def serializable():
    if not is_postgres():
        with db.atomic():
            yield
        return
    with db.atomic(isolation_level=_PG_SERIALIZABLE):
        yield


# A sequential scan takes a predicate lock on the whole table, and two such
# transactions writing one row each then refuse to serialize: on small tables
# the planner picks exactly those scans. Index scans lock only what they read
# (PostgreSQL's own advice for SSI). Peewee begins with "BEGIN TRANSACTION
# ISOLATION LEVEL <level>", so the SET LOCAL rides in the same round trip.
_PG_SERIALIZABLE = "SERIALIZABLE; SET LOCAL enable_seqscan = off"


@functools.lru_cache(maxsize=256)
def _for_sqlite(sql):
    return sql.replace("%s", "?")


def _dialect(sql):
    return sql if is_postgres() else _for_sqlite(sql)


def fetch_one(sql, params=()):
    """The first row of a hand-written query, or None."""
    return db.execute_sql(_dialect(sql), params).fetchone()


def fetch_all(sql, params=()):
    """Every row of a hand-written query."""
    return db.execute_sql(_dialect(sql), params).fetchall()


def execute_all(statements):
    """Run [(sql, params), …] in order. On PostgreSQL inside a transaction they
    go out in one round trip with the transaction's next statement or its
    COMMIT; on SQLite (whose driver takes one statement per call) one by one."""
    statements = [(sql, params) for sql, params in statements if sql]
    if not statements:
        return
    if is_postgres():
        db.obj.defer(statements)
        return
    for sql, params in statements:
        db.execute_sql(_for_sqlite(sql), params)


def defer(*queries):
    """Peewee write queries whose results nothing reads, sent as execute_all sends its statements."""
    execute_all([query.sql() for query in queries])


_COMPILED = {}


def cached_select(name, build, params):
    """The rows (model instances) of a peewee select on the hot path, its SQL built once per
    process and dialect. Building a select's SQL costs peewee more than the round trip on a
    settled webhook; the text only changes with the dialect (FOR UPDATE, placeholders).

    `build()` makes the query with this call's values; `params` are those values in the order
    the SQL takes them. The first build checks that order against peewee's own, so a change to
    the query that moves its parameters fails at once instead of binding the wrong values."""
    key = (name, is_postgres())
    compiled = _COMPILED.get(key)
    if compiled is None:
        query = build()
        sql, expected = query.sql()
        if list(expected) != list(params):
            raise RuntimeError(f"cached_select {name!r}: parameters {list(params)!r}, the query takes {expected!r}")
        compiled = _COMPILED[key] = (query, sql)
    query, sql = compiled
    return list(query._get_cursor_wrapper(db.execute_sql(sql, list(params))))


def locked(query):
    return query.for_update() if is_postgres() else query


def _is_retryable(error):
    cause = error.__cause__ or error.__context__
    code = getattr(cause, "pgcode", None) or getattr(error, "pgcode", None)
    if code in RETRYABLE_PG_CODES:
        return True
    return isinstance(error, OperationalError) and "database is locked" in str(error)


def retry_serializable(fn, retries=SERIALIZATION_RETRIES, gate=None, transaction=serializable):
    """fn() in a serializable transaction, run again while the database refuses to serialize it.

    `gate` (a semaphore) is held from before BEGIN to after COMMIT of each
    attempt, not across the backoff, so it bounds how many such transactions
    run at once. `transaction=db.atomic` runs it at the default isolation (a
    caller whose row locks are its whole guarantee), retried the same way on a
    deadlock or a busy SQLite file."""
    for attempt in range(retries + 1):
        try:
            with gate or contextlib.nullcontext(), transaction():
                return fn()
        except Exception as error:
            if not _is_retryable(error) or attempt == retries:
                if _is_retryable(error):
                    raise SerializationRetriesExhausted(str(error)) from error
                raise
            # The transaction that won has committed, so the first retry cannot
            # lose to it again: run it at once. Later ones back off a little
            # (jittered; the competing transactions are milliseconds long).
            if attempt:
                time.sleep(random.uniform(0.001, 0.005) * min(attempt, 5))
