"""Channel membership (SPEC 6, 14.6): with APP_TELEGRAM_REQUIRED_CHANNEL set, only members of that channel may buy;
unset, nothing is checked and getChatMember is never called.

The buy flow asks `allowed(user id)` before it shows plans or takes a
payment; the answer comes from `getChatMember` on the channel. A member is
remembered for RECHECK_S (10 min, the spec's re-verification interval), so
a customer going through the flow costs one call, and someone who left is
refused again within ten minutes. A refusal is never remembered: who has
just joined may buy at once. When Telegram cannot answer (a 5xx, a
timeout, the bot not an administrator of the channel), the purchase is let
through and the failure logged — a sale is not lost to an outage of the
check, and the check is a shop policy, not a safeguard of money.

One process runs one bot (SPEC 0.2), so the memory is this process's: a
restart forgets it and asks again.
"""

import logging
import threading
import time

from telebot import apihelper

from integrations import telegram

logger = logging.getLogger("omniflow.bot.membership")

RECHECK_S = 10 * 60
MEMBER_STATUSES = ("creator", "administrator", "member")


class ChannelMembership:
    def __init__(self, bot, channel, recheck_s=RECHECK_S, clock=time.monotonic):
        self.bot = bot
        self.channel = channel
        self.recheck_s = recheck_s
        self.clock = clock
        self._members = {}  # telegram user id -> when membership was last confirmed
        self._lock = threading.Lock()

    @property
    def required(self):
        return bool(self.channel)

    def allowed(self, user_id):
        if not self.channel:
            return True
        with self._lock:
            confirmed = self._members.get(user_id)
        if confirmed is not None and self.clock() - confirmed < self.recheck_s:
            return True
        try:
            # The raw answer: only `status` and `is_member` matter, and TeleBot's typed ChatMember objects
            # refuse an answer that lacks a field of a newer API version.
            member = telegram.call("getChatMember", apihelper.get_chat_member, self.bot.token, self.channel, user_id)
        except telegram.TelegramFailure as failure:
            logger.warning(
                "channel membership could not be checked; the purchase goes on",
                extra={"task": "channel_membership", "error": failure.code},
            )
            return True
        status = member.get("status") if isinstance(member, dict) else None
        is_member = status in MEMBER_STATUSES or (status == "restricted" and member.get("is_member") is True)
        with self._lock:
            if is_member:
                self._members[user_id] = self.clock()
            else:
                self._members.pop(user_id, None)
        return is_member


_current = ChannelMembership(None, "")


def configure(bot, channel):
    global _current
    _current = ChannelMembership(bot, channel or "")


def current():
    return _current
