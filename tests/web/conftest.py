"""The web app served by waitress on 127.0.0.1, as in production."""

import threading
from contextlib import contextmanager

import pytest
import waitress

from config.settings import load_settings
from tests.support import sales
from web.app import create_app, server_options

OPERATOR_TOKEN = "operator-token-0123456789abcdef"


@contextmanager
def serving(environ=None, threads=4):
    """The app for these settings (the operator token unless told otherwise) on a free
    port; yields its base URL."""
    settings = load_settings({"APP_OPERATOR_TOKEN": OPERATOR_TOKEN, **(environ or {})})
    # A short select timeout lets the serving loop notice the closed socket at
    # teardown at once instead of after waitress's default second.
    server = waitress.create_server(
        create_app(settings),
        host="127.0.0.1",
        port=0,
        threads=threads,
        asyncore_loop_timeout=0.05,
        **server_options(settings),
    )

    def run():
        try:
            server.run()
        except OSError:
            pass  # the listening socket closed under the loop at teardown

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.effective_port}"
    finally:
        server.close()
        thread.join(5)


@pytest.fixture
def web(database, data_key):
    with serving({"APP_DATA_ENCRYPTION_KEY": data_key}) as base:
        yield base


@pytest.fixture
def shop_world(database):
    """A customer with a provisioned subscription bought in RUB at YooKassa, a second order
    still provisioning, and a wallet topped up."""
    buyer = sales.customer("Alice Shopper", "Alice_Shop")
    plan = sales.plan()
    order, settlement, intent = sales.paid_order(buyer, plan)
    subscription = sales.provision(settlement, username="omniflow_a1b2c3d4e5f60718")
    waiting, waiting_settlement, _ = sales.paid_order(buyer, plan, currency="USD", provider="cryptobot")
    topup = sales.topped_up(buyer, 50000)
    return {
        "customer": buyer,
        "plan": plan,
        "order": order,
        "settlement": settlement,
        "intent": intent,
        "subscription": subscription,
        "waiting": waiting,
        "waiting_settlement": waiting_settlement,
        "topup": topup,
    }


from tests.support.shop import shop, shop_fakes  # noqa: E402, F401  (fixtures: the web app with the fake providers)
