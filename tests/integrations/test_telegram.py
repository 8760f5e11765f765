"""integrations/telegram.py: pyTelegramBotAPI pointed at our API URL, its logs redacted, its failures classified."""

import logging

import requests
import telebot
from telebot import apihelper

from config.logging import configure_logging
from integrations import telegram
from security.redactor import register_secret

TOKEN = "987654321:AAHsecretsecretsecretsecretsecret99"


def test_the_library_logs_through_the_redactor_and_never_shows_the_token(capsys):
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    try:
        configure_logging("DEBUG")
        _log_through_the_library()
    finally:
        root.handlers[:], root.level = saved
    error = capsys.readouterr().err
    assert "WARNING TeleBot Request to http://127.0.0.1:9/[redacted] failed" in error  # through our formatter
    assert TOKEN not in error and "secretsecret" not in error and "with a body" not in error
    assert apihelper.API_URL == "http://127.0.0.1:9/bot{0}/{1}"


def _log_through_the_library():
    register_secret(TOKEN)
    telegram.configure("http://127.0.0.1:9")
    assert telebot.logger.handlers == [] and telebot.logger.level == logging.WARNING
    telebot.logger.warning(f"Request to http://127.0.0.1:9/bot{TOKEN}/getUpdates?offset=3 failed")
    telebot.logger.debug(f"The server returned: bot{TOKEN} with a body")  # below WARNING: not written at all


def test_a_connection_failure_is_unavailable_and_its_text_has_no_token():
    telegram.configure("http://127.0.0.1:9")
    bot = telegram.new_bot(TOKEN)
    try:
        telegram.call("getMe", bot.get_me)
    except telegram.TelegramFailure as failure:
        assert failure.code == telegram.UNAVAILABLE and failure.transient
        assert TOKEN not in str(failure)
    else:
        raise AssertionError("a call to a closed port succeeded")


def test_failures_are_classified_by_status():
    class Result:
        def __init__(self, status):
            self.status_code = status
            self.reason = "x"
            self.text = "<html>Bad Gateway</html>"

    def api_error(status, **parameters):
        body = {"ok": False, "error_code": status, "description": "Forbidden: bot was blocked by the user"}
        if parameters:
            body["parameters"] = parameters
        return apihelper.ApiTelegramException("sendMessage", Result(status), body)

    assert telegram.classify(api_error(429, retry_after=9), "m").retry_after == 9
    assert telegram.classify(api_error(429), "m").retry_after == telegram.DEFAULT_RETRY_AFTER_S
    assert telegram.classify(api_error(403), "m").code == telegram.FORBIDDEN
    assert telegram.classify(api_error(400), "m").code == telegram.REJECTED
    assert telegram.classify(api_error(500), "m").code == telegram.UNAVAILABLE
    assert telegram.classify(apihelper.ApiHTTPException("m", Result(502)), "m").code == telegram.UNAVAILABLE
    assert telegram.classify(requests.ReadTimeout("read timed out"), "m").code == telegram.UNAVAILABLE
