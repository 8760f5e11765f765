"""The web app served by waitress on 127.0.0.1, as in production."""

import threading

import pytest
import waitress

from config.settings import load_settings
from web.app import create_app

OPERATOR_TOKEN = "operator-token-0123456789abcdef"


@pytest.fixture
def web(database, data_key):
    settings = load_settings({"APP_OPERATOR_TOKEN": OPERATOR_TOKEN, "APP_DATA_ENCRYPTION_KEY": data_key})
    server = waitress.create_server(create_app(settings), host="127.0.0.1", port=0, threads=4)

    def run():
        try:
            server.run()
        except OSError:
            pass  # the listening socket closed under the loop at teardown

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.effective_port}"
    server.close()
    thread.join(5)
