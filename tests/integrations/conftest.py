"""A fake Remnawave panel on 127.0.0.1 per test, and the real adapter pointed at it."""

import pytest

from fakes.remnawave import FakeRemnawave
from integrations.remnawave import RemnawaveClient

PANEL_TOKEN = "fake-panel-token-5d1e9b7c3a"
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
