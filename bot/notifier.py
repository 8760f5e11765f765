"""The operator notifier loop (SPEC 6, 14.6): pending operator notices to forum topics of the operator chat.

Every INTERVAL_S (10 s) a tick first makes sure each notice topic has its
forum topic in APP_TELEGRAM_OPERATOR_CHAT_ID (createForumTopic once; the
thread id is kept in `bot_forum_topics`), then sends up to BATCH (50)
pending notices, oldest first. A notice is marked `sent` in its own
transaction only after Telegram accepted it, so a success is never sent
again; a notice whose send failed stays pending:

- 5xx, timeouts, connection failures: the tick stops, the next one retries;
- 429: the tick stops and the loop waits Telegram's `retry_after` first;
- 403 / another 4xx on the chat (the bot is not in it, no such topic):
  logged, the tick stops, the next one retries (an operator fixes the chat);
- 400 about the notice itself: it is marked `failed` and logged.

A crash between Telegram's acceptance and the mark sends that one notice a
second time; nothing else can. Notices carry ids, kinds and codes only (the
writers keep them narrow); the text passes the redactor anyway (SPEC 12.2).
"""

import json
import logging

from bot import texts
from integrations import telegram
from models.base import db, utcnow
from models.bot import BotForumTopic
from models.ops import OperatorNotice
from security.redactor import redact

logger = logging.getLogger("omniflow.bot.notifier")

INTERVAL_S = 10
BATCH = 50
MAX_MESSAGE_LENGTH = 4096


def topic_of(kind):
    return texts.TOPIC_OF_KIND.get(kind, texts.DEFAULT_TOPIC)


def render(notice):
    try:
        payload = json.loads(notice.payload or "{}")
    except ValueError:
        payload = {}
    if not isinstance(payload, dict):
        payload = {}
    return redact(texts.notice_text(notice.kind, payload))[:MAX_MESSAGE_LENGTH]


class OperatorNotifier:
    def __init__(self, bot, chat_id, stop):
        self.bot = bot
        self.chat_id = chat_id
        self.stop = stop

    def run(self):
        """The loop's thread: a tick, then INTERVAL_S (or a 429's retry_after, if longer), until stopped."""
        logger.info("operator notifier started", extra={"task": "operator_notifier"})
        while not self.stop.is_set():
            wait = INTERVAL_S
            try:
                wait = max(wait, self.tick())
            except Exception:
                logger.exception("operator notifier tick failed", extra={"task": "operator_notifier"})
            finally:
                db.close()
            self.stop.wait(wait)

    def tick(self):
        """One bounded pass; returns how long Telegram asked us to wait (0 when it did not)."""
        pending = list(
            OperatorNotice.select().where(OperatorNotice.status == "pending").order_by(OperatorNotice.id).limit(BATCH)
        )
        if not pending:
            return 0
        threads = self._threads()
        for notice in pending:
            if self.stop.is_set():
                return 0
            topic = topic_of(notice.kind)
            try:
                if topic not in threads:
                    threads[topic] = self._create_topic(topic)
                telegram.call(
                    "sendMessage",
                    self.bot.send_message,
                    self.chat_id,
                    render(notice),
                    message_thread_id=threads[topic],
                )
            except telegram.TelegramFailure as failure:
                if failure.code == telegram.REJECTED and failure.method == "sendMessage" and _about_the_notice(failure):
                    self._mark(notice, "failed")
                    logger.error(
                        "operator notice refused by Telegram; marked failed",
                        extra={"task": "operator_notifier", "error": failure.status},
                    )
                    continue
                logger.warning(
                    "operator notices not delivered; retrying next tick",
                    extra={"task": failure.method, "error": failure.code},
                )
                return failure.retry_after or 0
            self._mark(notice, "sent")
        return 0

    def _threads(self):
        rows = BotForumTopic.select().where(BotForumTopic.chat_id == self.chat_id)
        return {row.topic: row.message_thread_id for row in rows}

    def _create_topic(self, topic):
        created = telegram.call(
            "createForumTopic", self.bot.create_forum_topic, self.chat_id, texts.TOPIC_NAMES.get(topic, topic)
        )
        with db.atomic():
            BotForumTopic.create(chat_id=self.chat_id, topic=topic, message_thread_id=created.message_thread_id)
        logger.info("forum topic created in the operator chat", extra={"task": topic})
        return created.message_thread_id

    def _mark(self, notice, status):
        with db.atomic():
            OperatorNotice.update(status=status, sent_at=utcnow() if status == "sent" else None).where(
                OperatorNotice.id == notice.id, OperatorNotice.status == "pending"
            ).execute()


def _about_the_notice(failure):
    """A 400 that names the message (too long, bad entities), not the chat or the topic."""
    description = (failure.description or "").lower()
    return failure.status == 400 and "message" in description and "thread" not in description
