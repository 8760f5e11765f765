"""Short transactions that own an invariant, the same on both databases.

`serializable()` is SERIALIZABLE on PostgreSQL and an IMMEDIATE transaction
(one writer at a time, so serializable by construction) on SQLite.
`locked(query)` adds FOR UPDATE where the database has it; SQLite's write
lock already covers the whole transaction. `retry_serializable(fn)` runs
`fn` in such a transaction and runs it again when the database refused to
serialize it (or, on SQLite, stayed busy past the timeout); `fn` must only
touch the database, never the outside world, so running it again is safe.
"""

import random
import time

from peewee import OperationalError, PostgresqlDatabase

from models.base import db

SERIALIZATION_RETRIES = 5
RETRYABLE_PG_CODES = ("40001", "40P01")  # serialization_failure, deadlock_detected


class SerializationRetriesExhausted(Exception):
    code = "serialization_failure"


def is_postgres():
    return isinstance(db.obj, PostgresqlDatabase)


def serializable():
    if is_postgres():
        return db.atomic(isolation_level="SERIALIZABLE")
    return db.atomic()


def locked(query):
    return query.for_update() if is_postgres() else query


def _is_retryable(error):
    cause = error.__cause__ or error.__context__
    code = getattr(cause, "pgcode", None) or getattr(error, "pgcode", None)
    if code in RETRYABLE_PG_CODES:
        return True
    return isinstance(error, OperationalError) and "database is locked" in str(error)


def retry_serializable(fn, retries=SERIALIZATION_RETRIES):
    for attempt in range(retries + 1):
        try:
            with serializable():
                return fn()
        except Exception as error:
            if not _is_retryable(error) or attempt == retries:
                if _is_retryable(error):
                    raise SerializationRetriesExhausted(str(error)) from error
                raise
            time.sleep(random.uniform(0.005, 0.05) * (attempt + 1))
