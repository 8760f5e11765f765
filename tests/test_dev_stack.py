"""The README's first command: scripts/dev.sh's stack (sample data, then the fake
panel, web, worker, fake Telegram and bot from Procfile.dev under honcho) shows the whole flow."""

import os
import signal
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from devtools import stack
from fakes.telegram import DEV_TOKEN
from tests.support.processes import wait_for

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.processes


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def statuses(path):
    with sqlite3.connect(path) as connection:
        return dict(
            connection.execute("SELECT status, COUNT(*) FROM fulfillment_operations GROUP BY status").fetchall()
        )


def test_the_dev_stack_provisions_the_sample_orders_and_shows_the_failed_one_on_the_panel(tmp_path):
    database = tmp_path / "dev.sqlite3"
    web_port, panel_port, telegram_port = free_port(), free_port(), free_port()
    env = dict(
        os.environ,
        PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        DATABASE_URL=f"sqlite:///{database}",
        PORT=str(web_port),
        DEV_WEB_PORT=str(web_port),
        APP_FAKE_PANEL_PORT=str(panel_port),
        APP_REMNAWAVE_URL=f"http://127.0.0.1:{panel_port}",
        APP_REMNAWAVE_TOKEN="omniflow-fake-remnawave-dev-token",
        APP_OPERATOR_TOKEN="dev-operator-token-0123456789",
        APP_FAKE_TELEGRAM_PORT=str(telegram_port),
        APP_TELEGRAM_API_URL=f"http://127.0.0.1:{telegram_port}",
        APP_TELEGRAM_BOT_TOKEN=DEV_TOKEN,
        LOG_LEVEL="WARNING",
    )
    seeded = subprocess.run(
        [sys.executable, "omniflow.py", "dev-seed"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert seeded.returncode == 0, seeded.stderr
    assert f"user {stack.DEV_OPERATOR}  password {stack.DEV_PASSWORD}" in seeded.stdout
    again = subprocess.run(
        [sys.executable, "omniflow.py", "dev-seed"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert "already there" in again.stdout

    log = open(tmp_path / "honcho.log", "w")
    honcho = subprocess.Popen(
        [str(Path(sys.executable).parent / "honcho"), "-f", "Procfile.dev", "start"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        base = f"http://127.0.0.1:{web_port}"
        wait_for(
            lambda: statuses(database).get("succeeded") == stack.PAID_ORDERS, timeout=60, message="orders provisioned"
        )
        wait_for(lambda: statuses(database).get("failed") == 1, timeout=30, message="the corrupt operation failed")
        session = requests.Session()

        def signed_in():
            try:
                answer = session.post(
                    base + "/v1/panel/session",
                    json={"username": stack.DEV_OPERATOR, "password": stack.DEV_PASSWORD},
                    timeout=5,
                )
            except requests.ConnectionError:
                return False
            return answer.status_code == 200

        wait_for(signed_in, timeout=30, message="web answers")
        cookie = {"Cookie": f"omniflow_session={session.cookies['omniflow_session']}"}
        failed = requests.get(base + "/v1/panel/system/jobs", headers=cookie, timeout=5).json()["operations"]
        assert [row["errorCode"] for row in failed] == ["invalid_desired_state"]
        page = requests.get(base + "/panel/system/jobs", headers=cookie, timeout=5)
        assert "invalid_desired_state" in page.text

        # The bot answers a customer on the fake Telegram's chat page.
        chat = f"http://127.0.0.1:{telegram_port}"
        assert requests.get(chat + "/chat", timeout=5).status_code == 200
        user = {"id": 4242, "first_name": "Dev", "language_code": "en"}
        requests.post(chat + "/_fake/messages", json={"user": user, "text": "/start"}, timeout=5)

        def bot_answered():
            messages = requests.get(chat + "/_fake/chats/4242", timeout=5).json()["messages"]
            return [m["text"] for m in messages if m["from"] == "bot"]

        assert wait_for(bot_answered, timeout=30, message="the bot's answer")[0].startswith("Welcome, Dev!")
        assert DEV_TOKEN in (ROOT / "scripts" / "dev.sh").read_text()  # the stack's bot uses the fake's token
    finally:
        os.killpg(honcho.pid, signal.SIGTERM)
        try:
            honcho.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(honcho.pid, signal.SIGKILL)
        print((tmp_path / "honcho.log").read_text()[-3000:])
