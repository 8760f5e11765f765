"""SPEC 0.3: `web` and `bot` only insert jobs; they never execute them. Both real processes are
started on a database holding a due fulfillment job and run side by side past the time a worker
takes to claim one: the job is untouched (still available, never attempted), and neither process
registered as a queue worker (no heartbeat row) or took the queue's leadership."""

import os
import subprocess
import sys
import time

import pytest
import requests

from bot.lease import LEASE_NAME
from commerce.settlement import settle_order
from models.jobs import Job, JobLeader, JobWorker
from tests.support import commerce
from tests.support.bots import ROOT
from tests.support.processes import wait_for
from tests.test_dev_stack import free_port

pytestmark = pytest.mark.processes

# A worker claims a due job within a second of starting (its poll interval is shorter); the
# processes are watched twice as long after both are up.
WATCH_S = 2


def web_process(database_url, port, log_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("APP_", "DATABASE_URL"))}
    env.update(DATABASE_URL=database_url, PORT=str(port), LOG_LEVEL="INFO")
    with open(log_path, "w") as log:
        return subprocess.Popen([sys.executable, "omniflow.py", "web"], cwd=ROOT, env=env, stdout=log,
                                stderr=subprocess.STDOUT)  # fmt: skip


def ready(url):
    try:
        return requests.get(url, timeout=1).status_code == 200
    except requests.RequestException:
        return False


def untouched(job_id):
    job = Job.get_by_id(job_id)
    return (job.state, job.attempt, job.attempted_by, job.attempted_at)


# What is proved is the processes' code, not the database's: one backend is enough (SQLite).
@pytest.mark.parametrize("backend", ["sqlite"])
def test_web_and_bot_processes_leave_a_due_job_untouched(database_url, bots, tmp_path):
    settle_order(commerce.order(commerce.customer(), commerce.limited_plan()).id, "provider_webhook")
    [job] = Job.select().where(Job.kind == "fulfillment")
    before = untouched(job.id)
    assert before == ("available", 0, None, None)
    port = free_port()
    web = web_process(database_url, port, tmp_path / "web.log")
    try:
        bot = bots.start()
        wait_for(lambda: ready(f"http://127.0.0.1:{port}/readyz"), timeout=30, message="the web process")
        bots.wait_polling(bot)
        time.sleep(WATCH_S)
        assert web.poll() is None and bot.poll() is None
        assert untouched(job.id) == before
        assert JobWorker.select().count() == 0
        assert [row.name for row in JobLeader.select()] == [LEASE_NAME]  # the bot's own lease, not the queue's
    finally:
        web.terminate()
        web.wait(15)
