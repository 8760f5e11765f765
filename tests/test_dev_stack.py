"""The README's first command, as a newcomer runs it: `bash scripts/dev.sh` in a
fresh checkout (sample data, then the fake panel, web, worker, fake Telegram
and bot from Procfile.dev under honcho) shows the whole flow, and the
README's other commands, run from a second shell with no extra environment,
see its data."""

import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from devtools import sample_payment, stack
from fakes.remnawave import DEV_TOKEN as DEV_PANEL_TOKEN
from fakes.telegram import DEV_TOKEN
from tests.support.processes import wait_for

ROOT = Path(__file__).resolve().parents[1]
PANEL_LATE_S = 3
pytestmark = pytest.mark.processes


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def fresh_checkout(target):
    """The repository's files (as they are on disk, tracked or new) without var/, sharing
    this checkout's virtualenv, so dev.sh finds its dependencies installed."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    for name in listed:
        source = ROOT / name
        if source.is_file() and not name.startswith("tests/contract/node_modules/"):
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    (target / ".venv").symlink_to((ROOT / ".venv").resolve())
    return target


def newcomer_environment(**extra):
    """A shell's environment with none of the project's variables set."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("APP_", "DATABASE_URL", "PORT", "DEV_"))}
    return {**env, **extra}


def statuses(path):
    """Operations by status; none while the file is missing or not yet migrated."""
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as connection:
            return dict(
                connection.execute("SELECT status, COUNT(*) FROM fulfillment_operations GROUP BY status").fetchall()
            )
    except sqlite3.OperationalError:
        return {}


def rows(path, sql):
    with sqlite3.connect(path) as connection:
        return connection.execute(sql).fetchall()


def fulfilled(path, kind):
    try:
        return rows(path, f"SELECT id FROM orders WHERE operation = '{kind}' AND status = 'fulfilled'")
    except sqlite3.OperationalError:
        return []


def sample_order(path):
    """The status of the sample YooKassa customer's order, once there is one."""
    try:
        found = rows(
            path,
            "SELECT o.status FROM orders o JOIN customers c ON c.id = o.customer_id"
            f" WHERE c.telegram_username = '{sample_payment.SAMPLE_CUSTOMER[1]}'",
        )
    except sqlite3.OperationalError:
        return None
    return found[0][0] if found else None


class DevStack:
    def __init__(self, checkout, web_port, telegram_port, log, env):
        self.checkout, self.web_port, self.log, self.env = checkout, web_port, log, env
        self.chat = f"http://127.0.0.1:{telegram_port}"
        self.database = checkout / "var" / "omniflow.sqlite3"  # the one default file
        self.base = f"http://127.0.0.1:{web_port}"

    def second_shell(self, *args):
        return subprocess.run(
            [sys.executable, "omniflow.py", *args],
            cwd=self.checkout,
            env=newcomer_environment(),
            capture_output=True,
            text=True,
            timeout=120,
        )


@pytest.fixture(scope="module")
def dev_stack(tmp_path_factory):
    checkout = fresh_checkout(tmp_path_factory.mktemp("checkout"))
    web_port, panel_port, telegram_port = free_port(), free_port(), free_port()
    log_path = checkout / "dev.log"
    log = open(log_path, "w")
    env = newcomer_environment(
        PORT=str(web_port),
        APP_FAKE_PANEL_PORT=str(panel_port),
        APP_FAKE_TELEGRAM_PORT=str(telegram_port),
        APP_FAKE_YOOKASSA_PORT=str(free_port()),
        APP_FAKE_CRYPTOBOT_PORT=str(free_port()),
        APP_FAKE_GOODS_PORT=str(free_port()),
    )
    process = subprocess.Popen(
        ["bash", "scripts/dev.sh"],
        cwd=checkout,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    running = DevStack(checkout, web_port, telegram_port, log_path, env)
    running.pid = process.pid
    try:
        wait_for(
            lambda: statuses(running.database).get("succeeded", 0) >= stack.PAID_ORDERS,
            timeout=90,
            message="orders provisioned",
        )
        wait_for(
            lambda: statuses(running.database).get("failed") == 1, timeout=30, message="the corrupt operation failed"
        )
        wait_for(
            lambda: len(fulfilled(running.database, "renewal")) == 1 and sample_order(running.database) == "fulfilled",
            timeout=90,
            message="the daily plan renewed and the sample YooKassa payment's order fulfilled",
        )
        yield running
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
        log.close()
        print(log_path.read_text()[-4000:])


def test_the_dev_stack_provisions_the_sample_orders_and_shows_the_failed_one_on_the_panel(dev_stack):
    def signed_in():
        try:
            answer = requests.post(
                dev_stack.base + "/v1/panel/session",
                json={"username": stack.DEV_OPERATOR, "password": stack.DEV_PASSWORD},
                timeout=5,
            )
        except requests.ConnectionError:
            return None
        return answer if answer.status_code == 200 else None

    answer = wait_for(signed_in, timeout=30, message="web answers")
    assert "secure" not in answer.headers["Set-Cookie"].lower()  # usable over plain http from another machine
    cookie = {"Cookie": f"omniflow_session={answer.cookies['omniflow_session']}"}
    failed = requests.get(dev_stack.base + "/v1/panel/system/jobs", headers=cookie, timeout=5).json()["operations"]
    assert [row["errorCode"] for row in failed] == ["invalid_desired_state"]
    page = requests.get(dev_stack.base + "/panel/system/operations", headers=cookie, timeout=5)
    assert "invalid_desired_state" in page.text
    again = dev_stack.second_shell("dev-seed")
    assert again.returncode == 0 and "already there" in again.stdout


def test_the_bot_answers_a_customer_on_the_fake_telegrams_chat_page(dev_stack):
    assert requests.get(dev_stack.chat + "/chat", timeout=5).status_code == 200
    user = {"id": 4242, "first_name": "Dev", "language_code": "en"}
    requests.post(dev_stack.chat + "/_fake/messages", json={"user": user, "text": "/start"}, timeout=5)

    def bot_answered():
        messages = requests.get(dev_stack.chat + "/_fake/chats/4242", timeout=5).json()["messages"]
        return [m["text"] for m in messages if m["from"] == "bot"]

    assert wait_for(bot_answered, timeout=30, message="the bot's answer")[0].startswith("Welcome, Dev!")
    assert DEV_TOKEN in (ROOT / "scripts" / "dev.sh").read_text()  # the stack's bot uses the fake's token


def test_the_sample_data_fills_the_back_office_with_revenue_per_currency_and_a_wallet(dev_stack):
    answer = requests.post(
        dev_stack.base + "/v1/panel/session",
        json={"username": stack.DEV_OPERATOR, "password": stack.DEV_PASSWORD},
        timeout=5,
    )
    cookie = {"Cookie": f"omniflow_session={answer.cookies['omniflow_session']}"}

    def get(path, **params):
        return requests.get(dev_stack.base + path, headers=cookie, params=params, timeout=5).json()

    revenue = get("/v1/panel/overview")["revenue"]["today"]
    assert [row["currency"] for row in revenue] == ["RUB", "USD", "XTR"]
    # Monthly: the YooKassa customer, the wallet customer, the corrupt order's and the sample payment's;
    # daily: the wallet customer's purchase and its renewal.
    rub = 4 * stack.MONTHLY_PRICES["RUB"] + 2 * stack.DAILY_PRICES["RUB"]
    assert {row["currency"]: row["amountMinor"] for row in revenue}["RUB"] == rub
    (customer,) = get("/v1/panel/customers", q="@" + stack.WALLET_CUSTOMER[1])["customers"]
    assert customer["telegramId"] is not None
    wallet = get(f"/v1/panel/customers/{customer['id']}/wallet")
    spent = stack.MONTHLY_PRICES["RUB"] + 2 * stack.DAILY_PRICES["RUB"]
    assert wallet["balances"] == [{"currency": "RUB", "amountMinor": stack.TOPUP_MINOR - spent}]
    home = requests.get(dev_stack.base + "/panel", headers=cookie, timeout=5)
    assert home.status_code == 200 and "RUB" in home.text
    support = requests.get(dev_stack.base + "/panel/support", headers=cookie, timeout=5)
    assert support.status_code == 200 and support.text.count("<tr data-ticket=") == 1  # the first customer's question
    # The sample voucher, bought from the fake goods provider and delivered by the worker.
    wait_for(lambda: fulfilled(dev_stack.database, "goods"), timeout=60, message="the sample voucher delivered")


def test_starting_the_dev_stack_twice_says_so_in_one_line_and_starts_nothing(dev_stack):
    jobs_before = rows(dev_stack.database, "SELECT COUNT(*) FROM jobs")
    again = subprocess.run(
        ["bash", "scripts/dev.sh"],
        cwd=dev_stack.checkout,
        env=dev_stack.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert again.returncode != 0 and again.stdout == ""
    assert again.stderr.splitlines() == [
        f"dev: a dev stack is already running on :{dev_stack.web_port} (pid {dev_stack.pid});"
        f" stop it first (Ctrl-C in its shell, or kill {dev_stack.pid})"
    ]
    assert rows(dev_stack.database, "SELECT COUNT(*) FROM jobs") == jobs_before  # no second dev-seed
    assert requests.get(dev_stack.base + "/healthz", timeout=5).status_code == 200  # the first stack runs on


def test_the_dev_stack_does_not_start_on_a_port_another_program_holds(tmp_path):
    checkout = fresh_checkout(tmp_path / "checkout")
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        refused = subprocess.run(
            ["bash", "scripts/dev.sh"],
            cwd=checkout,
            env=newcomer_environment(PORT=str(port)),
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert refused.returncode != 0 and refused.stdout == ""
    assert refused.stderr.splitlines() == [
        f"dev: port {port} is already in use by another program; stop it or choose other ports (PORT, APP_FAKE_*_PORT)"
    ]
    assert not (checkout / "var").exists()  # nothing seeded, nothing started


def no_first_attempt_failed(database, log):
    succeeded = rows(
        database, "SELECT attempt_count FROM fulfillment_operations WHERE status = 'succeeded' AND operation = 'create'"
    )
    assert len(succeeded) >= stack.PAID_ORDERS
    assert {attempts for (attempts,) in succeeded} == {1}
    assert rows(database, "SELECT error_code FROM fulfillment_history WHERE status = 'retrying'") == []
    assert "job retryable" not in log


def test_the_sample_yookassa_payment_settles_through_the_fakes_webhook_and_the_renewal_from_the_wallet(dev_stack):
    settled = rows(
        dev_stack.database,
        "SELECT e.provider, e.verdict, e.outcome, o.status, o.settled_by, s.remote_user_id"
        " FROM provider_webhook_events e JOIN payment_intents i ON i.id = e.payment_intent_id"
        " JOIN orders o ON o.id = i.order_id JOIN subscriptions s ON s.id = o.subscription_id"
        " WHERE e.outcome = 'settled'",
    )
    assert len(settled) == 1
    provider, verdict, outcome, status, settled_by, remote_user = settled[0]
    assert (provider, verdict, status, settled_by) == ("yookassa", "confirmed", "fulfilled", "provider_webhook")
    assert remote_user is not None  # the worker made its user on the fake panel
    wait_for(lambda: "the webhook settled order" in dev_stack.log.read_text(), timeout=10, message="the log")
    assert "the fake YooKassa completed payment" in dev_stack.log.read_text()
    (renewal,) = fulfilled(dev_stack.database, "renewal")
    renewed_from = rows(dev_stack.database, f"SELECT settled_by FROM orders WHERE id = {renewal[0]}")
    assert renewed_from == [("renewal",)]
    # Every paid order became access, the corrupt one aside (its operation failed).
    assert len(rows(dev_stack.database, "SELECT id FROM orders WHERE status = 'paid'")) == 1


def test_no_sample_order_fails_its_first_attempt(dev_stack):
    no_first_attempt_failed(dev_stack.database, dev_stack.log.read_text())


def test_the_worker_starts_only_once_a_panel_slow_to_come_up_answers(tmp_path):
    """The stack's processes start together; here the panel the stack is pointed at
    comes up only after the worker would have claimed the sample orders."""
    from fakes.remnawave import FakeRemnawave

    database = tmp_path / "dev.sqlite3"
    web_port, late_port, telegram_port = free_port(), free_port(), free_port()
    token = DEV_PANEL_TOKEN
    env = newcomer_environment(
        PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        DATABASE_URL=f"sqlite:///{database}",
        DEV_WEB_PORT=str(web_port),
        APP_FAKE_PANEL_PORT=str(free_port()),  # the stack's own fake panel, unused here
        APP_REMNAWAVE_URL=f"http://127.0.0.1:{late_port}",
        APP_REMNAWAVE_TOKEN=token,
        APP_FAKE_TELEGRAM_PORT=str(telegram_port),  # the stack's fake Telegram and its bot, unused here
        APP_TELEGRAM_API_URL=f"http://127.0.0.1:{telegram_port}",
        APP_TELEGRAM_BOT_TOKEN=DEV_TOKEN,
        APP_FAKE_YOOKASSA_PORT=str(free_port()),  # the stack's fake providers, unused here
        APP_FAKE_CRYPTOBOT_PORT=str(free_port()),
    )
    seeded = subprocess.run([sys.executable, "omniflow.py", "dev-seed"], cwd=ROOT, env=env, capture_output=True)
    assert seeded.returncode == 0, seeded.stderr
    log_path = tmp_path / "honcho.log"
    log = open(log_path, "w")
    honcho = subprocess.Popen(
        [str(Path(sys.executable).parent / "honcho"), "-f", "Procfile.dev", "start"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    panel = FakeRemnawave(token=token, port=late_port)
    try:
        wait_for(
            lambda: "worker started" in log_path.read_text() or "dev-wait-panel: waiting" in log_path.read_text(),
            timeout=60,
            message="the worker starting or waiting",
        )
        time.sleep(PANEL_LATE_S)  # long enough for a worker that did not wait to claim and fail every order
        panel.start()
        wait_for(
            lambda: statuses(database).get("succeeded", 0) >= stack.PAID_ORDERS,
            timeout=90,
            message="orders provisioned",
        )
        no_first_attempt_failed(database, log_path.read_text())
    finally:
        os.killpg(honcho.pid, signal.SIGTERM)
        try:
            honcho.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(honcho.pid, signal.SIGKILL)
        panel.stop()
        log.close()
        print(log_path.read_text()[-3000:])


def test_jobs_list_from_a_second_shell_sees_the_stacks_data_without_extra_environment(dev_stack):
    listing = dev_stack.second_shell("jobs", "list")
    assert listing.returncode == 0, listing.stderr
    fulfillment = [line for line in listing.stdout.splitlines() if " fulfillment " in line]
    assert len(fulfillment) >= stack.PAID_ORDERS + 1
    assert "critical/completed: " in listing.stdout


def test_the_demo_from_a_second_shell_leaves_the_dev_data_alone(dev_stack):
    tables = ("customers", "orders", "fulfillment_operations", "entitlements", "jobs")
    before = {table: rows(dev_stack.database, f"SELECT * FROM {table} ORDER BY id") for table in tables}
    demo = dev_stack.second_shell("demo", "--seconds", "3")
    assert demo.returncode == 0, demo.stderr
    after = {table: rows(dev_stack.database, f"SELECT * FROM {table} ORDER BY id") for table in tables}
    assert after["customers"] == before["customers"] and after["orders"] == before["orders"]
    assert {t: len(r) for t, r in after.items() if t != "jobs"} == {t: len(r) for t, r in before.items() if t != "jobs"}
    assert "settled 5 orders" in demo.stdout  # on a file of its own
    assert (dev_stack.checkout / "var" / "demo.sqlite3").exists()
