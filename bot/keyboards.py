"""Inline keyboards and their callback data: what a button may say, and the check every press passes.

Callback data is `<action>` or `<action>:<argument>`, at most 64 bytes
(Telegram's limit). `parse()` accepts only the actions below with an
argument their validator takes; anything else — a stale button, a forged
press — is None, and the press gets a polite refusal (bot/handlers/menu.py).
"""

import re
from dataclasses import dataclass

from telebot.types import InlineKeyboardButton, InlineKeyboardMarkup

from bot import texts

MAX_CALLBACK_DATA_BYTES = 64

MENU = "menu"
SUBSCRIPTIONS = "subs"
LANGUAGE = "lang"
SUPPORT = "support"

# action -> the arguments it takes (None: no argument)
ACTIONS = {
    MENU: None,
    SUBSCRIPTIONS: None,
    LANGUAGE: re.compile("|".join(texts.LANGUAGES) + "|"),
    SUPPORT: None,
}


@dataclass(frozen=True)
class Press:
    action: str
    argument: str = ""


def data(action, argument=""):
    value = f"{action}:{argument}" if argument else action
    if len(value.encode()) > MAX_CALLBACK_DATA_BYTES:
        raise ValueError(f"callback data for {action} is longer than Telegram allows")
    return value


def parse(raw):
    """The Press a button's callback data names, or None when it is not one the bot made."""
    if not isinstance(raw, str) or not raw or len(raw.encode()) > MAX_CALLBACK_DATA_BYTES:
        return None
    action, _, argument = raw.partition(":")
    if action not in ACTIONS:
        return None
    allowed = ACTIONS[action]
    if allowed is None:
        return Press(action) if ":" not in raw else None
    if not allowed.fullmatch(argument):
        return None
    return Press(action, argument)


def _markup(rows):
    markup = InlineKeyboardMarkup()
    for row in rows:
        markup.row(*(InlineKeyboardButton(label, callback_data=value) for label, value in row))
    return markup


def main_menu(language):
    return _markup(
        [
            [(texts.text(language, "button_subscriptions"), data(SUBSCRIPTIONS))],
            [(texts.text(language, "button_language"), data(LANGUAGE))],
            [(texts.text(language, "button_support"), data(SUPPORT))],
        ]
    )


def language_menu(language):
    return _markup(
        [
            [(texts.LANGUAGE_NAMES[code], data(LANGUAGE, code)) for code in texts.LANGUAGES],
            [(texts.text(language, "button_back"), data(MENU))],
        ]
    )


def back(language):
    return _markup([[(texts.text(language, "button_back"), data(MENU))]])
