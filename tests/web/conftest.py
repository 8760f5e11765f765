"""The web app served by waitress on 127.0.0.1, as in production."""

import threading

import pytest
import waitress

from config.settings import load_settings
from web.app import create_app

OPERATOR_TOKEN = "operator-token-0123456789abcdef"


@pytest.fixture
def web(database):
    settings = load_settings({"APP_OPERATOR_TOKEN": OPERATOR_TOKEN})
    # A short select timeout lets the serving loop notice the closed socket at
    # teardown at once instead of after waitress's default second.
    server = waitress.create_server(
        create_app(settings), host="127.0.0.1", port=0, threads=4, asyncore_loop_timeout=0.05
    )

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
