"""The fake Bot API (a real HTTP server in the test process) and real bot processes against it."""

import pytest

from bot import services
from fakes.telegram import DEV_TOKEN, FakeTelegram
from integrations import telegram
from integrations.remnawave import RemnawaveClient
from models.base import db
from tests.support.shop import PANEL_TOKEN, PUBLIC_URL, shop, shop_fakes  # noqa: F401  (fixtures)


@pytest.fixture
def fake_telegram():
    fake = FakeTelegram().start()
    yield fake
    fake.stop()


@pytest.fixture
def bots(database, database_url, fake_telegram, tmp_path):
    from tests.support.bots import BotProcesses

    processes = BotProcesses(database_url, fake_telegram.base_url, tmp_path)
    yield processes
    processes.stop_all()
    print(processes.logs())


@pytest.fixture
def telebot(fake_telegram):
    """A TeleBot in this process, pointed at the fake."""
    telegram.configure(fake_telegram.base_url)
    return telegram.new_bot(DEV_TOKEN)


@pytest.fixture
def bot_services(shop):  # noqa: F811  (the fixture imported above)
    """The bot's outside services in this process: the shop's fake providers and fake panel."""
    services.use(services.Services(shop.providers, PUBLIC_URL, RemnawaveClient(shop.panel.base_url, PANEL_TOKEN)))
    yield shop
    services.use(None)


@pytest.fixture
def bot_api_calls(monkeypatch):
    """[(method, a database transaction open?)] of every Bot API call this process makes from here on:
    the real calls, each noted as it starts in the thread that makes it."""
    made = []
    real = telegram.call

    def noted(method, function, *args, **kwargs):
        made.append((method, db.in_transaction()))
        return real(method, function, *args, **kwargs)

    monkeypatch.setattr(telegram, "call", noted)
    return made
