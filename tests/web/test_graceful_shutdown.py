"""A rolling deploy stops the web process with SIGTERM: it stops accepting,
answers the requests already in flight, and exits 0 within the platform's grace."""

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import psycopg2
import pytest
import requests

from tests.support.processes import wait_for
from tests.test_dev_stack import free_port

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "graceful-shutdown-operator-token-0123"
pytestmark = pytest.mark.processes


def web_process(database_url, port, log_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("APP_", "DATABASE_URL"))}
    env.update(DATABASE_URL=database_url, PORT=str(port), APP_OPERATOR_TOKEN=TOKEN, LOG_LEVEL="INFO")
    return subprocess.Popen(
        [sys.executable, "omniflow.py", "web"], cwd=ROOT, env=env, stdout=open(log_path, "w"), stderr=subprocess.STDOUT
    )


def refused(url):
    try:
        requests.get(url, timeout=2)
    except requests.ConnectionError:
        return True
    return False


def test_sigterm_lets_a_request_in_flight_finish_refuses_new_ones_and_exits_0(pg_database, pg_url, tmp_path):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log_path = tmp_path / "web.log"
    web = web_process(pg_url, port, log_path)
    holder = psycopg2.connect(pg_url)
    try:
        wait_for(lambda: not refused(base + "/healthz"), timeout=30, message="web answers")
        # The request in flight: it waits on a lock this test holds, for as long as the test wants.
        holder.cursor().execute("LOCK TABLE outbox_events IN ACCESS EXCLUSIVE MODE")
        answers = []
        slow = threading.Thread(
            target=lambda: answers.append(
                requests.get(base + "/v1/admin/outbox", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
            )
        )
        slow.start()
        watcher = holder.cursor()

        def request_waits_on_the_lock():
            watcher.execute(
                "SELECT count(*) FROM pg_locks WHERE relation = 'outbox_events'::regclass AND NOT granted"
            )
            return watcher.fetchone()[0] == 1

        wait_for(request_waits_on_the_lock, timeout=15, message="the request waiting on the lock")
        web.send_signal(signal.SIGTERM)
        wait_for(lambda: refused(base + "/healthz"), timeout=5, message="new connections refused")
        assert web.poll() is None and answers == []  # still running: the request in flight is not answered yet
        holder.rollback()  # the lock goes; the request finishes
        slow.join(30)
        assert answers and answers[0].status_code == 200 and answers[0].json()["pendingCount"] == 0
        assert web.wait(15) == 0
        log = log_path.read_text()
        assert "finishing 1 request(s) in flight" in log and "every request in flight was answered" in log
    finally:
        holder.close()
        if web.poll() is None:
            web.kill()
            web.wait()
        print(log_path.read_text()[-3000:])


def test_sigint_on_an_idle_web_process_exits_0_at_once(pg_database, pg_url, tmp_path):
    port = free_port()
    web = web_process(pg_url, port, tmp_path / "web.log")
    try:
        wait_for(lambda: not refused(f"http://127.0.0.1:{port}/healthz"), timeout=30, message="web answers")
        web.send_signal(signal.SIGINT)
        assert web.wait(5) == 0
    finally:
        if web.poll() is None:
            web.kill()
            web.wait()
