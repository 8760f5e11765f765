"""The fake Bot API (a real HTTP server in the test process) and real bot processes against it."""

import pytest

from fakes.telegram import DEV_TOKEN, FakeTelegram
from integrations import telegram


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
