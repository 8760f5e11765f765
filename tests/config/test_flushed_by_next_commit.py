"""A write flushed by the next commit (models/transactions.py) is committed on its own at once,
in one round trip, and leaves the connection's commits waiting for the disk as before."""

import psycopg2
import pytest

from models.base import db
from models.transactions import fetch_one_flushed_by_next_commit


def test_the_write_is_committed_at_once_and_the_session_still_commits_synchronously(pg_database, pg_url):
    row = fetch_one_flushed_by_next_commit("INSERT INTO test_orders (status) VALUES (%s) RETURNING id", ("stored",))
    with psycopg2.connect(pg_url) as other, other.cursor() as cursor:  # another session sees it committed
        cursor.execute("SELECT status FROM test_orders WHERE id = %s", (row[0],))
        assert cursor.fetchone() == ("stored",)
    assert db.execute_sql("SELECT current_setting('synchronous_commit')").fetchone() == ("on",)
    with db.atomic():
        assert db.execute_sql("SELECT current_setting('synchronous_commit')").fetchone() == ("on",)


def test_it_refuses_to_run_inside_a_transaction(pg_database):
    with db.atomic():
        with pytest.raises(RuntimeError):
            fetch_one_flushed_by_next_commit("INSERT INTO test_orders (status) VALUES (%s) RETURNING id", ("x",))
    assert db.execute_sql("SELECT count(*) FROM test_orders").fetchone() == (0,)
