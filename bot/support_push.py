"""Support reply push (SPEC 6, 14.6): every INTERVAL_S (30 s), up to BATCH (200) operator replies still pending
are sent to their ticket's chat, oldest first (index `support_messages_unpushed`).

A reply is marked `sent` in its own transaction only after Telegram
accepted it (a crash in between sends that one reply again: a reply seen
twice beats a reply lost). A 403 (the customer blocked the bot) marks it
`unreachable` and the customer's `telegram_unreachable_at`; another 4xx
marks it `failed`; a 429 ends the tick and the next one waits its
retry_after; 5xx, timeouts and broken connections end the tick and the
next one retries.
"""

import logging

from bot import texts
from commerce import customers
from integrations import telegram
from models.base import db, utcnow
from models.commerce import Customer
from models.support import SupportMessage, SupportTicket

logger = logging.getLogger("omniflow.bot.support_push")

INTERVAL_S = 30
BATCH = 200
MAX_MESSAGE_LENGTH = 4096


class SupportReplyPush:
    def __init__(self, bot, stop, interval_s=INTERVAL_S):
        self.bot = bot
        self.stop = stop
        self.interval_s = interval_s

    def run(self):
        logger.info("support reply push started", extra={"task": "support_push"})
        while not self.stop.is_set():
            wait = self.interval_s
            try:
                wait = max(wait, self.tick())
            except Exception:
                logger.exception("support reply push tick failed", extra={"task": "support_push"})
            finally:
                db.close()
            self.stop.wait(wait)

    def pending(self):
        return list(
            SupportMessage.select(
                SupportMessage.id, SupportMessage.text, SupportTicket.id.alias("ticket"), SupportTicket.chat_id,
                SupportTicket.customer.alias("customer"), Customer.language_code,
            )  # fmt: skip
            .join(SupportTicket, on=(SupportMessage.ticket == SupportTicket.id))
            .join(Customer, on=(SupportTicket.customer == Customer.id))
            .where(SupportMessage.push_status == "pending")
            .order_by(SupportMessage.id)
            .limit(BATCH)
            .dicts()
        )

    def tick(self):
        """One bounded pass; returns how long Telegram asked us to wait (0 when it did not)."""
        for reply in self.pending():
            if self.stop.is_set():
                return 0
            language = texts.language_of(reply["language_code"])
            text = texts.text(language, "support_reply", ticket=reply["ticket"], text=reply["text"])
            try:
                telegram.call("sendMessage", self.bot.send_message, reply["chat_id"], text[:MAX_MESSAGE_LENGTH])
            except telegram.TelegramFailure as failure:
                if failure.code == telegram.FORBIDDEN:
                    self._mark(reply, "unreachable")
                    customers.mark_unreachable(reply["customer"])
                    continue
                if failure.code == telegram.REJECTED:
                    self._mark(reply, "failed")
                    logger.error("support reply refused by Telegram", extra={"task": "support_push",
                                                                              "error": failure.status})  # fmt: skip
                    continue
                logger.warning("support replies not pushed; retrying next tick",
                               extra={"task": "support_push", "error": failure.code})  # fmt: skip
                return failure.retry_after or 0
            self._mark(reply, "sent")
        return 0

    def _mark(self, reply, status):
        with db.atomic():
            SupportMessage.update(push_status=status, pushed_at=utcnow()).where(
                SupportMessage.id == reply["id"], SupportMessage.push_status == "pending"
            ).execute()
