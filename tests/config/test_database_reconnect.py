"""SPEC 1 (issue 9, 5a), the database layer: a pooled PostgreSQL connection
the server cut is replaced before the thread's next statement or transaction
(never reused as "connection already closed"), a transaction on it fails with
its own error, and the time the database has not answered is kept."""

import pytest
from peewee import OperationalError

from config.database import PostgresDatabase, server_name, unanswered_for
from models.base import db
from tests.support.cut import cut_this_threads_connection


def test_a_connection_the_server_cut_is_replaced_before_the_next_statement(pg_database):
    cut = cut_this_threads_connection()
    with pytest.raises(OperationalError):
        db.execute_sql("SELECT 1")
    assert unanswered_for() > 0
    assert db.execute_sql("SELECT pg_backend_pid()").fetchone()[0] != cut
    assert db.execute_sql("SELECT 2").fetchone()[0] == 2
    assert unanswered_for() == 0


def test_a_transaction_on_a_cut_connection_fails_with_its_own_error_and_the_next_one_reconnects(pg_database):
    cut_this_threads_connection()
    # Its own error, not "connection already closed" from a ROLLBACK sent on the dead connection.
    with pytest.raises(OperationalError):
        with db.atomic():
            db.execute_sql("INSERT INTO test_orders (status) VALUES ('lost')")
    with db.atomic():
        db.execute_sql("INSERT INTO test_orders (status) VALUES ('kept')")
    assert db.execute_sql("SELECT status FROM test_orders").fetchall() == [("kept",)]


def test_cut_connections_are_not_kept_by_the_pool(pg_database):
    for _ in range(3):
        cut_this_threads_connection()
        with pytest.raises(OperationalError):
            db.execute_sql("SELECT 1")
    db.execute_sql("SELECT 1")
    db.close()
    assert len(pg_database._in_use) == 0
    assert all(connection.closed == 0 for _, _, connection in pg_database._connections)


def test_server_name_names_host_port_and_database_never_the_password():
    database = PostgresDatabase("postgresql://omniflow:s3cret-pw@db.internal:6432/orders")
    assert server_name(database) == "db.internal:6432/orders"
