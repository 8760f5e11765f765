"""SPEC 5.2: a worker logs at start which periodic passes it registered and which it left
out and why; `backup` is registered only with APP_BACKUP_DIR (and a key to seal with),
and then a fresh installation's first leader runs it at once."""

import os
import signal
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from fakes.remnawave import api_token
from tests.conftest import TEST_DATA_KEY as KEY
from tests.jobs.test_spec_passes import BEYOND_THE_TABLE, SPEC_5_1
from tests.support.processes import wait_for

pytestmark = pytest.mark.processes

ROOT = Path(__file__).resolve().parents[2]


class Worker:
    def __init__(self, database_url, log_path, **env):
        self.log_path = log_path
        unset = {"APP_BACKUP_DIR": "", "APP_DATA_ENCRYPTION_KEY": ""}
        environment = dict(os.environ, DATABASE_URL=database_url, LOG_LEVEL="INFO", **{**unset, **env})
        with open(log_path, "w") as log:
            self.process = subprocess.Popen(
                [sys.executable, "omniflow.py", "worker"], cwd=ROOT, env=environment, stdout=log,
                stderr=subprocess.STDOUT,
            )  # fmt: skip

    def log(self):
        return Path(self.log_path).read_text()

    def lines(self, message):
        return [line for line in self.log().splitlines() if f" {message} " in line + " "]

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(40)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def start_worker(database, database_url, tmp_path):
    started = []

    def start(**env):
        worker = Worker(database_url, tmp_path / f"worker-{len(started)}.log", **env)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.stop()
        print(worker.log()[-4000:])


def registered(worker):
    [line] = wait_for(lambda: worker.lines("periodic passes registered"), timeout=30, message="the passes line")
    return set(line.split("task=", 1)[1].split()[0].split(","))


def test_without_a_backup_directory_the_worker_leaves_backup_out_and_says_why(start_worker):
    worker = start_worker()
    passes = registered(worker)
    assert {"retention", "fulfillment_reconcile", "fulfillment_revive"} <= passes
    assert "backup" not in passes
    [left_out] = [line for line in worker.lines("periodic pass left out") if "task=backup" in line]
    assert "reason=APP_BACKUP_DIR is not set" in left_out


def test_a_backup_directory_without_a_key_leaves_backup_out_for_want_of_the_key(start_worker, tmp_path):
    worker = start_worker(APP_BACKUP_DIR=str(tmp_path / "backups"))
    assert "backup" not in registered(worker)
    [left_out] = [line for line in worker.lines("periodic pass left out") if "task=backup" in line]
    assert "reason=APP_DATA_ENCRYPTION_KEY is not set" in left_out


def test_with_a_directory_and_a_key_backup_is_registered_and_the_first_leader_runs_it(start_worker, tmp_path):
    directory = tmp_path / "backups"
    worker = start_worker(APP_BACKUP_DIR=str(directory), APP_DATA_ENCRYPTION_KEY=KEY)
    assert registered(worker) == set(SPEC_5_1) | BEYOND_THE_TABLE  # the start log names every pass
    assert worker.lines("periodic pass left out") == []
    written = wait_for(
        lambda: directory.exists() and [name for name in os.listdir(directory) if name.endswith(".backup")],
        timeout=60,
        message="the first backup",
    )
    assert len(written) == 1
    assert KEY not in worker.log()


def summary(worker):
    wait_for(lambda: worker.lines("periodic passes registered"), timeout=30, message="the worker's start")
    return [line for line in worker.log().splitlines() if line.startswith("worker: ")]


def test_a_worker_with_nothing_configured_says_what_it_runs_against_and_what_it_lacks(
    database, database_url, tmp_path
):
    secret = "s3cret-database-password"  # PostgreSQL's trust authentication takes it and ignores it
    parts = urlsplit(database_url)
    url = parts._replace(netloc=f"{parts.username}:{secret}@{parts.hostname}:{parts.port}").geturl()
    worker = Worker(url if parts.scheme.startswith("postgres") else database_url, tmp_path / "bare.log")
    try:
        lines = summary(worker)
    finally:
        worker.stop()
    [database_line] = [line for line in lines if line.startswith("worker: database: ")]
    assert ("PostgreSQL at " if parts.scheme.startswith("postgres") else "SQLite file ") in database_line
    [missing] = [line for line in lines if line.startswith("worker: not configured: ")]
    for lacking in ("panel (APP_REMNAWAVE_URL", "payment providers", "blocklist refresh", "backups (APP_BACKUP_DIR)"):
        assert lacking in missing
    [undeclared] = [line for line in lines if line.startswith("worker: not declared")]
    assert "periodic pass backup (APP_BACKUP_DIR is not set)" in undeclared
    assert "periodic pass outbox_publish (APP_DATA_ENCRYPTION_KEY is not set)" in undeclared
    assert "periodic pass anomaly_evaluation (APP_DATA_ENCRYPTION_KEY is not set)" in undeclared
    assert "periodic pass bulk_actions (APP_DATA_ENCRYPTION_KEY is not set)" in undeclared
    assert secret not in worker.log()


def test_a_configured_worker_names_its_panel_and_declares_every_pass(start_worker, tmp_path):
    worker = start_worker(
        APP_REMNAWAVE_URL="http://127.0.0.1:3010/panel",
        APP_REMNAWAVE_TOKEN=api_token("registration"),
        APP_BACKUP_DIR=str(tmp_path / "backups"),
        APP_DATA_ENCRYPTION_KEY=KEY,
    )
    lines = summary(worker)
    assert "worker: panel: http://127.0.0.1:3010/panel" in lines
    [missing] = [line for line in lines if line.startswith("worker: not configured: ")]
    assert "panel" not in missing.replace("payment providers", "") and "data key" not in missing
    assert not [line for line in lines if line.startswith("worker: not declared")]


def test_a_worker_on_the_development_file_says_so():
    import omniflow
    from config.settings import load_settings

    [database, *_] = omniflow.worker_summary(load_settings({}), {})
    assert database.startswith("database: SQLite file ")
    assert database.endswith("(DATABASE_URL is not set: the development file)")
