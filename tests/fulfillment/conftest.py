"""Fulfillment tests run the real worker code against the fake Remnawave panel,
a real HTTP server on 127.0.0.1, through the real adapter."""

import pytest

from fakes.remnawave import FakeRemnawave, api_token
from integrations.remnawave import RemnawaveClient
from jobs.fulfillment import use_panel

PANEL_TOKEN = api_token("test")


@pytest.fixture(scope="session")
def panel_server():
    server = FakeRemnawave(token=PANEL_TOKEN)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def panel(panel_server, database):
    panel_server.reset()
    use_panel(RemnawaveClient(panel_server.base_url, PANEL_TOKEN))
    yield panel_server
    use_panel(None)
