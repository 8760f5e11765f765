"""The fakes the dev stack runs keep their world across a restart (fakes/state_file.py): the panel's users,
YooKassa's payments, refunds and idempotence keys, Crypto Pay's invoices and their paid updates — read back
through the real adapters from a new process of the fake; `--fresh` and no file at all start empty."""

import datetime
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from fakes.cryptobot import FakeCryptoBot
from fakes.remnawave import FakeRemnawave
from fakes.state_file import StateFileError
from fakes.yookassa import FakeYooKassa
from integrations.payments.cryptobot import CryptoBotProvider
from integrations.payments.yookassa import YooKassaProvider
from integrations.remnawave import RemnawaveClient
from tests.integrations.conftest import CRYPTOBOT_TOKEN, PANEL_TOKEN, YOOKASSA_SECRET, YOOKASSA_SHOP_ID
from tests.support.pgcluster import free_port
from tests.support.processes import wait_for

ROOT = Path(__file__).resolve().parents[2]
RETURN_URL = "https://shop.example.test/paid"
CONTROL = {"Authorization": f"Bearer {PANEL_TOKEN}"}
SQUAD = "0b9a2f3e-4c1d-4e5f-8a7b-6c5d4e3f2a1b"
EXPIRY = datetime.datetime(2027, 1, 31, 12, 0, tzinfo=datetime.timezone.utc)


def test_a_restarted_panel_has_the_users_it_had_and_never_reuses_their_ids(tmp_path):
    path = str(tmp_path / "fake-remnawave.json")
    with FakeRemnawave(token=PANEL_TOKEN, require_forwarded=False) as first:
        first.keep_state_in(path)
        made = RemnawaveClient(first.base_url, PANEL_TOKEN).create_user("omniflow_kept", EXPIRY, 1024, 3, [SQUAD])
    with FakeRemnawave(token=PANEL_TOKEN, require_forwarded=False) as again:
        again.keep_state_in(path)
        client = RemnawaveClient(again.base_url, PANEL_TOKEN)
        kept = client.get_user_by_username("omniflow_kept")
        assert (kept.id, kept.expire_at, kept.traffic_limit_bytes, kept.hwid_device_limit) == (made.id, EXPIRY, 1024, 3)
        assert kept.squad_uuids == (SQUAD,) and kept.short_uuid == made.short_uuid
        assert client.create_user("omniflow_next", EXPIRY, 0, 0, []).id > made.id
    with FakeRemnawave(token=PANEL_TOKEN, require_forwarded=False) as fresh:
        fresh.keep_state_in(path, fresh=True)
        assert fresh.users() == []
    with FakeRemnawave(token=PANEL_TOKEN, require_forwarded=False) as in_memory:
        assert in_memory.users() == [] and in_memory.state_line().startswith("state: in memory")


def test_a_restarted_yookassa_knows_its_payments_refunds_and_idempotence_keys(tmp_path):
    path = str(tmp_path / "fake-yookassa.json")

    def provider(fake):
        return YooKassaProvider(YOOKASSA_SHOP_ID, YOOKASSA_SECRET, api_url=fake.api_url)

    def create(fake):
        return provider(fake).create_payment(
            order_id=7, amount_minor=19900, currency="RUB", description="Order 7", return_url=RETURN_URL,
            idempotence_key="order-7",
        )  # fmt: skip

    with FakeYooKassa(shop_id=YOOKASSA_SHOP_ID, secret_key=YOOKASSA_SECRET) as first:
        first.keep_state_in(path)
        payment = create(first)
        first.complete(payment.payment_id)
        first.save_state()  # a change made in-process, not through a request
        refund = provider(first).refund(
            payment_id=payment.payment_id, amount_minor=900, currency="RUB", idempotence_key="refund-7"
        )
    with FakeYooKassa(shop_id=YOOKASSA_SHOP_ID, secret_key=YOOKASSA_SECRET) as again:
        again.keep_state_in(path)
        kept = provider(again).fetch_payment(payment.payment_id)
        assert (kept.status, kept.amount_minor, kept.refunded_minor, kept.order_id) == ("succeeded", 19900, 900, 7)
        assert provider(again).fetch_refund(refund.refund_id).status == refund.status
        assert create(again).payment_id == payment.payment_id  # the same key finds the same payment
        assert again.stats()["payments"] == 1


def test_a_restarted_crypto_pay_knows_its_invoices_their_paid_updates_and_the_next_ids(tmp_path):
    path = str(tmp_path / "fake-cryptobot.json")

    def create(fake, order_id):
        return CryptoBotProvider(CRYPTOBOT_TOKEN, api_url=fake.base_url).create_payment(
            order_id=order_id, amount_minor=19900, currency="RUB", description="Order", return_url=RETURN_URL,
            idempotence_key=f"order-{order_id}",
        )  # fmt: skip

    with FakeCryptoBot(token=CRYPTOBOT_TOKEN) as first:
        first.keep_state_in(path)
        invoice = create(first, 8)
        first.pay(invoice.payment_id)
        first.save_state()
        update = first.signed_update(invoice.payment_id)
    with FakeCryptoBot(token=CRYPTOBOT_TOKEN) as again:
        again.keep_state_in(path)
        kept = CryptoBotProvider(CRYPTOBOT_TOKEN, api_url=again.base_url).fetch_payment(invoice.payment_id)
        assert (kept.status, kept.amount_minor, kept.order_id) == ("succeeded", 19900, 8)
        assert again.signed_update(invoice.payment_id) == update  # a replay sends the very bytes again
        assert int(create(again, 9).payment_id) > int(invoice.payment_id)


def test_a_state_file_that_cannot_be_read_stops_the_fake_and_names_the_way_out(tmp_path):
    path = tmp_path / "fake-remnawave.json"
    path.write_text("{not json")
    with pytest.raises(StateFileError) as error:
        FakeRemnawave(token=PANEL_TOKEN).keep_state_in(str(path))
    assert "--fresh" in str(error.value)


def test_the_dev_stack_runs_each_fake_with_a_state_file_and_the_command_keeps_it_across_a_restart(tmp_path):
    procfile = (ROOT / "Procfile.dev").read_text()
    for name, what in (("panel", "remnawave"), ("yookassa", "yookassa"), ("cryptobot", "cryptobot")):
        [line] = [line for line in procfile.splitlines() if line.startswith(f"{name}:")]
        assert (
            f'--state-file "${{DEV_FAKE_STATE_DIR}}/fake-{what}.json"' in line and "${DEV_FRESH_FAKES:+--fresh}" in line
        )
    assert "DEV_FAKE_STATE_DIR" in (ROOT / "scripts" / "dev.sh").read_text()

    path, port = tmp_path / "panel.json", free_port()
    env = {**os.environ, "APP_REMNAWAVE_TOKEN": PANEL_TOKEN}
    command = [sys.executable, "omniflow.py", "fake-remnawave", "--port", str(port), "--dev-mode"]
    url = f"http://127.0.0.1:{port}/_fake/users"

    def run(*extra):
        process = subprocess.Popen([*command, "--state-file", str(path), *extra], cwd=ROOT, env=env)
        wait_for(lambda: _answers(url), timeout=20, message="the fake panel")
        return process

    def stop(process):
        process.send_signal(signal.SIGTERM)
        assert process.wait(10) == 0

    first = run()
    try:
        RemnawaveClient(f"http://127.0.0.1:{port}", PANEL_TOKEN).create_user("omniflow_cli", EXPIRY, 0, 0, [])
    finally:
        stop(first)
    again = run()
    try:
        assert [user["username"] for user in requests.get(url, headers=CONTROL, timeout=5).json()["users"]] == [
            "omniflow_cli"
        ]
    finally:
        stop(again)
    fresh = run("--fresh")
    try:
        assert requests.get(url, headers=CONTROL, timeout=5).json()["users"] == []
    finally:
        stop(fresh)


def _answers(url):
    try:
        return requests.get(url, headers=CONTROL, timeout=1).status_code == 200
    except requests.ConnectionError:
        return False
