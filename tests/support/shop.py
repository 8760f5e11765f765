"""A shop for tests: the fake YooKassa, Crypto Pay and Remnawave panel as real HTTP servers on
127.0.0.1, the web app configured with them on waitress, the providers this process polls with,
and the fulfillment worker run in this process against the fake panel.

The `shop` fixture (tests/commerce/conftest.py, tests/web/conftest.py) yields a Shop; every
fake's faults, payments and users are reset per test, and each fake delivers its webhooks to
the test's web server.
"""

import json
import os
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from commerce import providers, webhooks
from commerce.catalogue import set_addon_price
from fakes.cryptobot import FakeCryptoBot
from fakes.remnawave import FakeRemnawave, api_token
from fakes.yookassa import FakeYooKassa
from integrations.payments.cryptobot import CryptoBotProvider
from integrations.payments.yookassa import YooKassaProvider
from integrations.remnawave import RemnawaveClient
from jobs.engine.states import CLAIMABLE_STATES
from jobs.fulfillment import use_panel
from models.base import utcnow
from models.catalogue import Addon
from models.jobs import Job
from models.payments import ProviderWebhookEvent
from tests.support import commerce
from tests.support.direct import run_all, run_next

YOOKASSA_SHOP_ID = "731904"
YOOKASSA_SECRET = "test_shopSecretKey-9Vd2kQ7rX4mP0sLw"
CRYPTOBOT_TOKEN = "31337:AAshopCryptoPayToken7Hq2Lr9Zx4Wm1Np"
PANEL_TOKEN = api_token("shop")
PUBLIC_URL = "https://shop.example.test"
OPERATOR_TOKEN = "operator-token-0123456789abcdef"  # the one tests/web/conftest.py serves with
LOOPBACK = "127.0.0.0/8,::1"
# The adapters' deadline in this process's polls, and the fakes' hold of a timeout fault.
CLIENT_TIMEOUT_S = 2.0


@dataclass
class Shop:
    web: str
    yookassa: FakeYooKassa
    cryptobot: FakeCryptoBot
    panel: FakeRemnawave
    providers: dict

    def fake(self, provider):
        return self.yookassa if provider == "yookassa" else self.cryptobot

    def checkout(self, **body):
        import requests

        return requests.post(
            self.web + "/v1/checkout", json=body, headers={"Authorization": f"Bearer {OPERATOR_TOKEN}"}, timeout=30
        )

    def webhook(self, provider, body, headers=None, web=None):
        import requests

        return requests.post(
            f"{web or self.web}/v1/webhooks/{provider}",
            data=body,
            headers={"Content-Type": "application/json", **(headers or {})},
            timeout=30,
        )


def environ(yookassa, cryptobot):
    """What the web process is configured with: both providers, at the fakes."""
    return {
        "APP_OPERATOR_TOKEN": OPERATOR_TOKEN,
        "APP_PUBLIC_URL": PUBLIC_URL,
        "APP_YOOKASSA_SHOP_ID": YOOKASSA_SHOP_ID,
        "APP_YOOKASSA_SECRET_KEY": YOOKASSA_SECRET,
        "APP_YOOKASSA_API_URL": yookassa.api_url,
        "APP_CRYPTOBOT_TOKEN": CRYPTOBOT_TOKEN,
        "APP_CRYPTOBOT_API_URL": cryptobot.base_url,
        "APP_YOOKASSA_WEBHOOK_ADDRESSES": LOOPBACK,  # the fakes notify from this machine
    }


def adapters(yookassa, cryptobot):
    return {
        "yookassa": YooKassaProvider(
            YOOKASSA_SHOP_ID, YOOKASSA_SECRET, api_url=yookassa.api_url, timeout=CLIENT_TIMEOUT_S
        ),
        "cryptobot": CryptoBotProvider(CRYPTOBOT_TOKEN, api_url=cryptobot.base_url, timeout=CLIENT_TIMEOUT_S),
    }


@pytest.fixture(scope="session")
def shop_fakes():
    fakes = (
        FakeYooKassa(shop_id=YOOKASSA_SHOP_ID, secret_key=YOOKASSA_SECRET, seed=7),
        FakeCryptoBot(token=CRYPTOBOT_TOKEN, seed=11),
        FakeRemnawave(token=PANEL_TOKEN),
    )
    for fake in fakes:
        fake.start()
    yield fakes
    for fake in fakes:
        fake.stop()


@contextmanager
def open_shop(shop_fakes):
    from tests.web.conftest import serving  # imported here: that conftest imports this module's fixtures

    yookassa, cryptobot, panel = shop_fakes
    for fake in shop_fakes:
        fake.reset()
    for fake in (yookassa, cryptobot):
        fake.set_faults(hold_seconds=CLIENT_TIMEOUT_S + 0.5)
    polled = adapters(yookassa, cryptobot)
    providers.use(polled)
    use_panel(RemnawaveClient(panel.base_url, PANEL_TOKEN))
    try:
        with serving(environ(yookassa, cryptobot)) as web:
            yookassa.webhook_url = f"{web}/v1/webhooks/yookassa"
            cryptobot.webhook_url = f"{web}/v1/webhooks/cryptobot"
            yield Shop(web, yookassa, cryptobot, panel, polled)
    finally:
        yookassa.webhook_url = cryptobot.webhook_url = None
        providers.use(None)
        use_panel(None)


@pytest.fixture
def shop(database, shop_fakes):
    with open_shop(shop_fakes) as opened:
        yield opened


@contextmanager
def web_process(database_url, shop, log_dir=None):
    """A second web process (`python omniflow.py web`) on the same database and fakes; yields its base URL."""
    import requests

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = dict(
        os.environ,
        **environ(shop.yookassa, shop.cryptobot),
        DATABASE_URL=database_url,
        PORT=str(port),
        LOG_LEVEL="WARNING",
    )
    env.pop("APP_REMNAWAVE_URL", None)
    root = Path(__file__).resolve().parents[2]
    process = subprocess.Popen([sys.executable, "omniflow.py", "web"], cwd=root, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if requests.get(base + "/readyz", timeout=1).status_code == 200:
                    break
            except requests.RequestException:
                pass
            if time.monotonic() > deadline or process.poll() is not None:
                raise AssertionError("the second web process did not start")
            time.sleep(0.1)
        yield base
    finally:
        process.terminate()
        process.wait(15)


# -- what the tests buy -------------------------------------------------------------------------


def rub_plan(code="monthly", price=19900, traffic=100 * commerce.GIB, devices=3):
    """A plan on sale for `price` kopecks, 250 XTR and 5.00 USD."""
    plan = commerce.priced_plan(code, prices={"RUB": price, "XTR": 250, "USD": 500})
    plan.traffic_allowance_bytes, plan.device_limit = traffic, devices
    plan.squad_ids = json.dumps([commerce.SQUAD_A])
    plan.save()
    return plan


def addon(code="more-devices", devices=2, traffic=0, price=9900):
    extra = Addon.create(
        code=code, name=code.replace("-", " ").title(), extra_devices=devices, extra_traffic_bytes=traffic
    )
    set_addon_price(extra, "RUB", price)
    set_addon_price(extra, "XTR", 100)
    return extra


def fulfil():
    """Run every due job in this process (the fulfillment worker against the fake panel)."""
    return run_all()


def settle_deliveries():
    """Run the webhook_delivery jobs due now, and only those, as the worker runs them: what it does with
    the deliveries the web process stored. Returns the outcome each left on its delivery."""
    outcomes = []
    while (job_id := run_next(webhooks.JOB_KIND)) is not None:
        job = Job.get_by_id(job_id)
        outcomes.append(ProviderWebhookEvent.get_by_id(job.args_dict["deliveryId"]).outcome)
    return outcomes


def due_deliveries():
    return Job.select().where(
        Job.kind == webhooks.JOB_KIND, Job.state.in_(CLAIMABLE_STATES), Job.scheduled_at <= utcnow()
    )
