"""Fakes on 127.0.0.1 per test (the Remnawave panel, YooKassa, Crypto Pay), and the real adapters pointed at them."""

import pytest

from fakes.cryptobot import FakeCryptoBot
from fakes.remnawave import FakeRemnawave, api_token
from fakes.yookassa import FakeYooKassa
from integrations.payments.cryptobot import CryptoBotProvider
from integrations.payments.yookassa import YooKassaProvider
from integrations.remnawave import RemnawaveClient
from tests.support.receiver import WebhookReceiver

PANEL_TOKEN = api_token("fake-panel")
YOOKASSA_SHOP_ID = "506751"
YOOKASSA_SECRET = "test_Fh8hUAVVBGUGbjmlzba6TB0iyUbos_lueTHE-axOwM0"
CRYPTOBOT_TOKEN = "9009:AAq9rjBtD7tw5Uc0WvMjTBa3T1nLL3KfTmX"
# Short client deadline and fault hold, so timeout faults cost a second, not ten.
CLIENT_TIMEOUT_S = 0.5
HOLD_SECONDS = 1.5


@pytest.fixture
def panel():
    fake = FakeRemnawave(token=PANEL_TOKEN, seed=1234)
    fake.start()
    fake.set_faults(hold_seconds=HOLD_SECONDS)
    yield fake
    fake.stop()


@pytest.fixture
def client(panel):
    return RemnawaveClient(panel.base_url, PANEL_TOKEN, timeout=CLIENT_TIMEOUT_S)


@pytest.fixture
def receiver():
    server = WebhookReceiver().start()
    yield server
    server.stop()


@pytest.fixture
def yookassa_fake(receiver):
    fake = FakeYooKassa(shop_id=YOOKASSA_SHOP_ID, secret_key=YOOKASSA_SECRET, webhook_url=receiver.url, seed=99)
    fake.start()
    fake.set_faults(hold_seconds=HOLD_SECONDS)
    yield fake
    fake.stop()


@pytest.fixture
def yookassa(yookassa_fake):
    return YooKassaProvider(YOOKASSA_SHOP_ID, YOOKASSA_SECRET, api_url=yookassa_fake.api_url, timeout=CLIENT_TIMEOUT_S)


@pytest.fixture
def cryptobot_fake(receiver):
    fake = FakeCryptoBot(token=CRYPTOBOT_TOKEN, webhook_url=receiver.url, seed=77)
    fake.start()
    fake.set_faults(hold_seconds=HOLD_SECONDS)
    yield fake
    fake.stop()


@pytest.fixture
def cryptobot(cryptobot_fake):
    return CryptoBotProvider(CRYPTOBOT_TOKEN, api_url=cryptobot_fake.base_url, timeout=CLIENT_TIMEOUT_S)
