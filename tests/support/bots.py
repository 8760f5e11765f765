"""Real bot processes (`python omniflow.py bot`) against the test database and a fake Bot API."""

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from fakes.telegram import DEV_TOKEN

ROOT = Path(__file__).resolve().parents[2]
# Short enough to keep takeover tests quick, long enough for two loaded cores: the
# renewal runs every ttl/6 = 1 s, a starting bot watches a holder for 3 s.
TEST_LEASE_TTL_S = 6


class BotProcesses:
    def __init__(self, database_url, api_url, log_dir, token=DEV_TOKEN):
        self.database_url = database_url
        self.api_url = api_url
        self.token = token
        self.log_dir = Path(log_dir)
        self.processes = []

    def start(self, env=None):
        index = len(self.processes)
        log = open(self.log_dir / f"bot-{index}.log", "w")
        environment = {key: value for key, value in os.environ.items() if not key.startswith("APP_TELEGRAM_")}
        environment.update(
            DATABASE_URL=self.database_url,
            APP_TELEGRAM_API_URL=self.api_url,
            APP_TELEGRAM_BOT_TOKEN=self.token,
            OMNIFLOW_TEST_BOT_LEASE_TTL_SECONDS=str(TEST_LEASE_TTL_S),
            LOG_LEVEL="INFO",
            **(env or {}),
        )
        process = subprocess.Popen(
            [sys.executable, "omniflow.py", "bot"],
            cwd=ROOT,
            env=environment,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        process.log_path = log.name
        self.processes.append(process)
        return process

    def log(self, process):
        return Path(process.log_path).read_text()

    def logs(self):
        return "\n".join(f"--- {p.log_path} ---\n" + self.log(p)[-4000:] for p in self.processes)

    def wait_polling(self, process, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if "bot lease taken; polling" in self.log(process):
                return
            if process.poll() is not None:
                raise AssertionError(f"the bot exited with {process.returncode}:\n{self.log(process)}")
            time.sleep(0.1)
        raise AssertionError(f"the bot did not start polling in {timeout}s:\n{self.log(process)}")

    def stop_all(self):
        for process in self.processes:
            if process.poll() is None:
                try:
                    process.send_signal(signal.SIGCONT)  # a test may have paused it
                    process.send_signal(signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.time() + 20
        for process in self.processes:
            try:
                process.wait(max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@contextlib.contextmanager
def holding_the_update_table(backend, database_url):
    """Make a bot's update transaction wait (a crash can then be placed before its commit).

    SQLite: this connection holds the write lock, so the bot's BEGIN IMMEDIATE
    waits. PostgreSQL: it holds an exclusive lock on bot_updates, so the bot's
    lookup of the update id waits.
    """
    if backend == "sqlite":
        import sqlite3

        connection = sqlite3.connect(database_url[len("sqlite:///") :], isolation_level=None)
        connection.execute("BEGIN IMMEDIATE")
    else:
        import psycopg2

        connection = psycopg2.connect(database_url)
        connection.cursor().execute("LOCK TABLE bot_updates IN ACCESS EXCLUSIVE MODE")
    try:
        yield
    finally:
        connection.rollback()
        connection.close()
