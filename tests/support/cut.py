"""Cut a connection from the server side, as a PostgreSQL restart or failover does."""

import time

from models.base import db
from tests.support import backends


def backend_pids(sql, params=()):
    connection = backends.admin_connection()
    try:
        cursor = connection.cursor()
        cursor.execute(sql, params)
        return [pid for (pid,) in cursor.fetchall()]
    finally:
        connection.close()


def terminate(pid, timeout=10):
    """End one server backend and wait until it is gone."""
    backend_pids("SELECT pg_terminate_backend(%s)", [pid])
    deadline = time.time() + timeout
    while backend_pids("SELECT pid FROM pg_stat_activity WHERE pid = %s", [pid]):
        if time.time() > deadline:
            raise AssertionError(f"backend {pid} still alive after {timeout}s")
        time.sleep(0.02)


def cut_this_threads_connection():
    """Terminate the backend behind the calling thread's connection; return its pid."""
    pid = db.execute_sql("SELECT pg_backend_pid()").fetchone()[0]
    terminate(pid)
    return pid
