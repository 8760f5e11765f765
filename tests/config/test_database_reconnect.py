"""SPEC 1 (issue 9, 5a), the database layer: a pooled PostgreSQL connection
the server cut is replaced before the thread's next statement or transaction
(never reused as "connection already closed"), a transaction on it fails with
its own error, and the time the database has not answered is kept."""

import pytest
from peewee import OperationalError

from config.database import PostgresDatabase, server_name, unanswered_for
from models.base import db
from tests.support.cut import backend_pids, cut_this_threads_connection, terminate


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


def _last_statement_of(pid):
    [query] = backend_pids("SELECT query FROM pg_stat_activity WHERE pid = %s", [pid])
    return query


def test_checking_out_a_pooled_connection_sends_nothing_to_the_server(pg_database):
    marker = "SELECT pg_backend_pid(), 'checked in, then out'"
    pid = db.execute_sql(marker).fetchone()[0]
    db.close()  # back to the pool
    db.connect()  # the same connection out again: checked by its socket, no SELECT 1
    assert pg_database._state.conn.get_backend_pid() == pid
    assert _last_statement_of(pid) == marker
    db.close()


def test_a_pooled_connection_the_server_cut_while_idle_is_never_handed_out(pg_database):
    pid = db.execute_sql("SELECT pg_backend_pid()").fetchone()[0]
    db.close()  # idle in the pool when the server ends it
    terminate(pid)
    assert db.execute_sql("SELECT pg_backend_pid()").fetchone()[0] != pid
    assert unanswered_for() == 0
    db.close()
    assert all(connection.closed == 0 for _, _, connection in pg_database._connections)


def _silent_server():
    """A port whose connections are accepted by the kernel and never answered: a server that hangs."""
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    return listener


def test_a_server_that_never_answers_fails_the_connection_after_the_connect_timeout(monkeypatch):
    import time

    from config import database
    from config.settings import DatabaseTarget

    monkeypatch.setattr(database, "PG_CONNECT_TIMEOUT_S", 1)
    listener = _silent_server()
    try:
        port = listener.getsockname()[1]
        silent = database.open_database(DatabaseTarget("postgres", dsn=f"postgresql://postgres@127.0.0.1:{port}/x"))
        started = time.monotonic()
        with pytest.raises(OperationalError, match="timeout"):
            silent.connect()
        assert time.monotonic() - started < 5
        # A DATABASE_URL that sets its own connect_timeout keeps it.
        own = database.open_database(
            DatabaseTarget("postgres", dsn=f"postgresql://postgres@127.0.0.1:{port}/x?connect_timeout=3")
        )
        assert "connect_timeout" not in own.connect_params
    finally:
        listener.close()
