"""The Telegram Bot API through pyTelegramBotAPI: where the API is, how quiet the library is, what a failure means.

pyTelegramBotAPI keeps its base URL in the module-global `apihelper.API_URL`.
That is acceptable here because a process runs exactly one bot (SPEC 0.2):
`configure()` sets it once at start, before any call. The library's logger
writes through a handler of its own and, at DEBUG, logs every request's
parameters and every answer body (message texts, links); `configure()`
removes that handler, so its records go through the process's redacting
formatter (config/logging.py), and keeps it at WARNING. Request URLs carry
the token (`/bot<token>/<method>`): the token is a registered secret, and the
redactor also drops URL paths, so an exception text that quotes the URL
leaves the process without it.

Every failure of a call becomes a TelegramFailure with a code: `rate_limited`
(429, with Telegram's `retry_after`), `forbidden` (403: the user blocked the
bot, or the bot is not in the chat), `rejected` (another 4xx: this request
will never succeed as it is) and `unavailable` (5xx, timeouts, connection
failures, answers that are not the API's: the same call may succeed later).
"""

import logging

import requests
import telebot
from telebot import apihelper

RATE_LIMITED = "rate_limited"
FORBIDDEN = "forbidden"
REJECTED = "rejected"
UNAVAILABLE = "unavailable"

CONNECT_TIMEOUT_S = 5
REQUEST_TIMEOUT_S = 10  # every call but the long poll, whose own timeout is added to this
DEFAULT_RETRY_AFTER_S = 5  # a 429 without retry_after


class TelegramFailure(Exception):
    def __init__(self, code, method, status=None, retry_after=None, description=""):
        super().__init__(f"telegram {method}: {code}" + (f" (HTTP {status})" if status else ""))
        self.code = code
        self.method = method
        self.status = status
        self.retry_after = retry_after
        self.description = description

    @property
    def transient(self):
        return self.code in (RATE_LIMITED, UNAVAILABLE)


def configure(api_url):
    """Point pyTelegramBotAPI at `api_url` (no trailing slash) and route its logs through ours."""
    apihelper.API_URL = api_url + "/bot{0}/{1}"
    apihelper.FILE_URL = api_url + "/file/bot{0}/{1}"
    apihelper.CONNECT_TIMEOUT = CONNECT_TIMEOUT_S
    apihelper.READ_TIMEOUT = REQUEST_TIMEOUT_S
    apihelper.RETRY_ON_ERROR = False  # the callers decide what a failure means and when to try again
    library_logger = telebot.logger
    for handler in list(library_logger.handlers):
        library_logger.removeHandler(handler)
    library_logger.setLevel(logging.WARNING)
    library_logger.propagate = True


def new_bot(token):
    """A synchronous TeleBot whose handlers run in the calling thread (the update's transaction)."""
    return telebot.TeleBot(token, threaded=False, skip_pending=False)


def labeled_price(label, amount):
    """One line of an invoice (sendInvoice's `prices`)."""
    return telebot.types.LabeledPrice(label, amount)


def classify(error, method):
    """A TelegramFailure for an exception raised by a pyTelegramBotAPI call."""
    if isinstance(error, TelegramFailure):
        return error
    if isinstance(error, apihelper.ApiTelegramException):
        status = error.error_code
        parameters = (error.result_json or {}).get("parameters") or {}
        if status == 429:
            retry_after = parameters.get("retry_after")
            if not isinstance(retry_after, int) or retry_after < 0:
                retry_after = DEFAULT_RETRY_AFTER_S
            return TelegramFailure(RATE_LIMITED, method, status, retry_after=retry_after)
        if status == 403:
            return TelegramFailure(FORBIDDEN, method, status, description=str(error.description)[:200])
        if isinstance(status, int) and 400 <= status < 500:
            return TelegramFailure(REJECTED, method, status, description=str(error.description)[:200])
        return TelegramFailure(UNAVAILABLE, method, status)
    if isinstance(error, apihelper.ApiHTTPException):
        status = getattr(error.result, "status_code", None)
        code = REJECTED if isinstance(status, int) and 400 <= status < 500 and status != 429 else UNAVAILABLE
        return TelegramFailure(code, method, status)
    if isinstance(error, (apihelper.ApiException, requests.RequestException, ValueError)):
        return TelegramFailure(UNAVAILABLE, method)
    raise error


def call(method, function, *args, **kwargs):
    """Run one pyTelegramBotAPI call; any failure of the call comes out as a TelegramFailure."""
    try:
        return function(*args, **kwargs)
    except Exception as error:  # noqa: BLE001 - classify() re-raises what is not a failure of the call
        raise classify(error, method) from None
