"""Long polling with an offset of our own (SPEC 14.3): getUpdates, apply each update, then move the offset past it.

TeleBot's own polling moves its offset (`last_update_id`) when it reads an
update, before the handlers ran, so a crash between the two would confirm an
update that was never applied. Here the offset is ours: the first call of a
process asks for every unconfirmed update (no offset: Telegram starts from
the earliest one it still has, and bot_updates tells which of those were
applied already), and after that the offset is the last *applied* update
plus one. The updates of one answer are applied APPLY_TOGETHER at a time, each
slice in one transaction (bot/updates.py), and the offset moves past a slice
once it committed. A slice the database could not take stops the batch: the
next getUpdates starts from it again.
"""

import logging

from bot.updates import DatabaseUnavailable
from integrations import telegram

logger = logging.getLogger("omniflow.bot.polling")

LONG_POLL_S = 25  # Telegram holds getUpdates open this long when nothing arrives
BATCH = 100
# Updates per transaction: one commit for many, while the first one's answer waits
# for the slice's commit only a few milliseconds, and a SQLite write lock as long.
APPLY_TOGETHER = 25
ALLOWED_UPDATES = ["message", "callback_query", "pre_checkout_query"]
BACKOFF_S = (1, 2, 5, 10)


class Poller:
    def __init__(self, bot, applier, stop, interruptible):
        self.bot = bot
        self.applier = applier
        self.stop = stop
        self.interruptible = interruptible  # a context manager: SIGTERM may abort the call inside it
        self.offset = None
        self.failures = 0

    def run(self):
        while not self.stop.is_set():
            updates = self._poll()
            if updates is None:
                self._back_off()
                continue
            self.failures = 0
            for start in range(0, len(updates), APPLY_TOGETHER):
                if self.stop.is_set():
                    return  # the rest stay unconfirmed: the next bot gets them
                applied = updates[start : start + APPLY_TOGETHER]
                try:
                    self.applier.apply_all(applied)
                except DatabaseUnavailable:
                    logger.warning("database unavailable; the updates will be applied when it is back")
                    self._back_off()
                    break
                self.offset = applied[-1].update_id + 1

    def _poll(self):
        try:
            with self.interruptible():
                return telegram.call(
                    "getUpdates",
                    self.bot.get_updates,
                    offset=self.offset,
                    limit=BATCH,
                    timeout=telegram.REQUEST_TIMEOUT_S,
                    long_polling_timeout=LONG_POLL_S,
                    allowed_updates=ALLOWED_UPDATES,
                )
        except telegram.TelegramFailure as failure:
            if failure.code == telegram.RATE_LIMITED:
                self.stop.wait(failure.retry_after)
                return []
            logger.warning("getUpdates failed", extra={"error": failure.code})
            return None

    def _back_off(self):
        delay = BACKOFF_S[min(self.failures, len(BACKOFF_S) - 1)]
        self.failures += 1
        self.stop.wait(delay)
