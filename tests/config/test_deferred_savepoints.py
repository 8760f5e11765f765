"""The PostgreSQL database layer sends a savepoint's SAVEPOINT and RELEASE with
the transaction's next round trip: what a nested `atomic()` commits stays,
what it rolls back is gone (whether or not any of it reached the server), and
the transaction goes on either way."""

import pytest
from peewee import IntegrityError

from models.base import db


class RoundTrips:
    """Counts what reaches the server from this thread, by wrapping the pooled connection's cursor."""

    def __init__(self, database):
        self.database = database
        self.sent = []

    def __enter__(self):
        original = type(self.database).cursor
        sent = self.sent

        def cursor(database, *args, **kwargs):
            real = original(database, *args, **kwargs)
            return _Recording(real, sent)

        self._original = original
        type(self.database).cursor = cursor
        return self

    def __exit__(self, *exc):
        type(self.database).cursor = self._original


class _Recording:
    def __init__(self, cursor, sent):
        self._cursor, self._sent = cursor, sent

    def execute(self, sql, params=None):
        self._sent.append(sql)
        return self._cursor.execute(sql, params)

    def __getattr__(self, name):
        return getattr(self._cursor, name)


def _statuses():
    return [row[0] for row in db.execute_sql("SELECT status FROM test_orders ORDER BY id").fetchall()]


def test_a_released_savepoint_costs_no_round_trip_of_its_own(pg_database):
    with RoundTrips(pg_database) as trips:
        with db.atomic():
            db.execute_sql("INSERT INTO test_orders (status) VALUES ('outer')")
            with db.atomic():
                with db.atomic():
                    db.execute_sql("INSERT INTO test_orders (status) VALUES ('inner')")
    # BEGIN with the first INSERT; both SAVEPOINTs with the second; both RELEASEs with the COMMIT.
    assert len(trips.sent) == 3
    assert "SAVEPOINT" in trips.sent[1] and trips.sent[2].endswith("COMMIT")
    assert _statuses() == ["outer", "inner"]


def test_a_savepoint_rolled_back_before_anything_was_sent_is_never_sent(pg_database):
    with RoundTrips(pg_database) as trips:
        with db.atomic():
            db.execute_sql("INSERT INTO test_orders (status) VALUES ('kept')")
            with pytest.raises(RuntimeError):
                with db.atomic():
                    db.obj.defer([("INSERT INTO test_orders (status) VALUES ('undone')", None)])
                    raise RuntimeError("refused before anything in the savepoint was sent")
            db.execute_sql("INSERT INTO test_orders (status) VALUES ('after')")
    assert not any("undone" in sql or "ROLLBACK" in sql for sql in trips.sent)
    assert _statuses() == ["kept", "after"]


def test_a_savepoint_whose_statement_failed_is_rolled_back_and_the_transaction_goes_on(pg_database):
    db.execute_sql("CREATE UNIQUE INDEX IF NOT EXISTS test_orders_status ON test_orders (status)")
    try:
        with db.atomic():
            db.execute_sql("INSERT INTO test_orders (status) VALUES ('taken')")
            with pytest.raises(IntegrityError):
                with db.atomic():
                    db.obj.defer([("INSERT INTO test_orders (status) VALUES ('undone')", None)])
                    db.execute_sql("INSERT INTO test_orders (status) VALUES ('taken')")
            db.execute_sql("INSERT INTO test_orders (status) VALUES ('after')")
        assert _statuses() == ["taken", "after"]
    finally:
        db.execute_sql("DROP INDEX IF EXISTS test_orders_status")


def test_a_savepoint_rolled_back_after_some_of_it_was_sent_undoes_all_of_it(pg_database):
    with db.atomic():
        db.execute_sql("INSERT INTO test_orders (status) VALUES ('kept')")
        with pytest.raises(RuntimeError):
            with db.atomic():
                db.execute_sql("INSERT INTO test_orders (status) VALUES ('sent, undone')")
                db.obj.defer([("INSERT INTO test_orders (status) VALUES ('unsent, undone')", None)])
                raise RuntimeError("refused after a statement in the savepoint was sent")
    assert _statuses() == ["kept"]
