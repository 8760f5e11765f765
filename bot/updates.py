"""Applying one update at most once (SPEC 14.3): its effect, its `update_id` and the lease check in one transaction.

`UpdateApplier.apply(update)`:

1. opens the transaction, renews the lease in it (bot/lease.py: a process
   that lost the lease applies nothing) and inserts the `update_id` into
   `bot_updates` unless it is there: an update already recorded was applied
   before (Telegram delivers an update again until the bot confirms it) and
   is skipped;
2. runs the TeleBot handlers (registered in bot/handlers/) in the calling
   thread; they read and write through the services and queue their answers
   on the update's `Context`;
3. commits: the `update_id` with the effect. The caller moves the getUpdates
   offset past the update only after that (bot/polling.py), so a crash
   before the commit leaves it unconfirmed and it is applied by the next
   bot, and a crash after the commit finds it recorded.

Answers are sent after the commit. A crash between the commit and the send
loses that answer (the customer presses again and gets a fresh one), where
sending first would show an answer for an effect that may never commit.
What must reach a customer whatever happens (access ready, receipts) is a
notice row written in a transaction and delivered by a loop that marks it
sent, not an answer.

A handler that refuses (a forged button, a blocked customer, a message too
long) raises Refused: the transaction is rolled back — nothing is written,
the update id included, because an update that changed nothing needs no
protection against a second application — and the refusal is sent.
An unexpected error is logged (redacted), rolled back, and the customer is
told something went wrong; a database that cannot be reached raises
DatabaseUnavailable so the caller retries the same update later.
"""

import logging
import queue
from dataclasses import dataclass, field

from peewee import InterfaceError, OperationalError

from bot import texts
from bot.lease import LeaseLost
from commerce import customers
from integrations import telegram
from models.base import db, utcnow
from models.bot import BotUpdate

logger = logging.getLogger("omniflow.bot.updates")

APPLIED = "applied"
DUPLICATE = "duplicate"
REFUSED = "refused"
FAILED = "failed"
MAX_RATE_LIMIT_WAIT_S = 30  # a 429 on an answer longer than this drops the answer rather than stall every chat

UPDATE_KINDS = ("message", "callback_query", "pre_checkout_query", "edited_message")


class DatabaseUnavailable(Exception):
    """The update could not be applied because the database did not answer; try the same update again."""


@dataclass
class Answer:
    method: str  # send, edit, callback, pre_checkout, invoice, photo, later
    target: object  # chat id, (chat id, message id), a query id, or (later) what makes the answers
    text: str = ""
    keyboard: object = None
    alert: bool = False
    ok: bool = True
    payload: object = None  # an invoice's fields, a photo's bytes


@dataclass
class Context:
    """What the handlers of one update share: who sent it, their customer and language, the answers to send."""

    update_id: int
    kind: str
    user: object  # telebot.types.User or None
    origin: tuple = None
    customer: object = None
    language: str = texts.DEFAULT_LANGUAGE
    answers: list = field(default_factory=list)

    def send(self, chat_id, text, keyboard=None):
        self.answers.append(Answer("send", chat_id, text, keyboard))

    def edit(self, chat_id, message_id, text, keyboard=None):
        self.answers.append(Answer("edit", (chat_id, message_id), text, keyboard))

    def answer_callback(self, query_id, text="", alert=False):
        self.answers.append(Answer("callback", query_id, text, alert=alert))

    def answer_pre_checkout(self, query_id, ok, text=""):
        self.answers.append(Answer("pre_checkout", query_id, text, ok=ok))

    def send_invoice(self, chat_id, invoice, text=""):
        """sendInvoice with commerce.checkout's fields (title, description, payload, currency, amount)."""
        self.answers.append(Answer("invoice", chat_id, text, payload=invoice))

    def send_photo(self, chat_id, content, caption="", keyboard=None):
        self.answers.append(Answer("photo", chat_id, caption, keyboard, payload=content))

    def later(self, make_answers):
        """Answers made after the commit, outside the update's transaction: for what needs an
        outside service (the panel, a payment provider), so no HTTP call holds the transaction
        open. `make_answers()` returns a list of Answers; it must be safe to lose (a crash after
        the commit loses every answer) and to run once."""
        self.answers.append(Answer("later", make_answers))

    def text(self, key, **values):
        return texts.text(self.language, key, **values)

    def refusal(self, key, **values):
        """Refused, answered where the update came from: a callback answer for a press, a message otherwise."""
        if self.origin is None:
            return Refused()
        method, target = self.origin
        message = self.text(key, **values)
        if method == "callback":
            return Refused(Answer("callback", target, message, alert=True))
        if method == "pre_checkout":
            return Refused(Answer("pre_checkout", target, message, ok=False))
        return Refused(Answer("send", target, message))


class Refused(Exception):
    """Ends an update with these answers and nothing written."""

    def __init__(self, *answers):
        super().__init__("refused")
        self.answers = list(answers)


def origin_of(update):
    """Where an answer to this update goes: ("callback", query id), ("pre_checkout", query id), ("send", chat id)."""
    if update.callback_query is not None:
        return ("callback", update.callback_query.id)
    if update.pre_checkout_query is not None:
        return ("pre_checkout", update.pre_checkout_query.id)
    for part in (update.message, update.edited_message):
        if part is not None:
            return ("send", part.chat.id)
    return None


def _is_payment(update):
    return update.message is not None and update.message.successful_payment is not None


def kind_of(update):
    return next((kind for kind in UPDATE_KINDS if getattr(update, kind, None) is not None), "other")


def user_of(update):
    for kind in ("message", "callback_query", "pre_checkout_query", "edited_message"):
        part = getattr(update, kind, None)
        if part is not None:
            return part.from_user
    return None


class AnswerSender:
    """Sends applied updates' answers on a thread of its own, in the order the updates were
    applied, while the main thread applies the next update: a Bot API round trip no longer
    waits behind a database transaction, nor the next transaction behind it. What is queued
    was committed already, so queueing changes nothing a crash could lose that sending at
    once would keep. The queue is bounded: a slow Bot API slows the applying down rather than
    letting answers pile up in memory. close() lets it send what is queued, then end."""

    QUEUE_BOUND = 100

    def __init__(self, deliver):
        self._deliver = deliver
        self._queue = queue.Queue(self.QUEUE_BOUND)

    def put(self, answers):
        if answers:
            self._queue.put(answers)

    def run(self):
        while (answers := self._queue.get()) is not None:
            try:
                self._deliver(answers)
            except Exception:
                logger.exception("answers could not be sent", extra={"task": "answer"})

    def close(self):
        self._queue.put(None)


class UpdateApplier:
    def __init__(self, bot, lease, stop):
        self.bot = bot
        self.lease = lease
        self.stop = stop
        self.current = None  # the Context of the update being applied; handlers read it
        self.sender = None  # an AnswerSender (the bot process); without one, answers are sent before apply returns

    def apply(self, update):
        """Apply one update; returns APPLIED, DUPLICATE, REFUSED or FAILED."""
        context = Context(update.update_id, kind_of(update), user_of(update), origin_of(update))
        if context.user is not None:
            context.language = texts.language_of(context.user.language_code)
        try:
            outcome = self._apply_in_transaction(update, context)
        except Refused as refusal:
            context.answers = refusal.answers
            outcome = REFUSED
        except (LeaseLost, DatabaseUnavailable):
            raise
        except (OperationalError, InterfaceError) as error:
            raise DatabaseUnavailable(str(error)) from None
        except Exception:
            logger.exception("update failed; nothing of it was written", extra={"kind": context.kind})
            context.answers = context.refusal("failure").answers
            outcome = FAILED
        if self.sender is not None:
            self.sender.put(context.answers)
        else:
            self.deliver(context.answers)
        return outcome

    def _apply_in_transaction(self, update, context):
        with db.atomic():
            self.lease.confirm()
            # The row goes in first: one statement both records the update and tells a
            # repeat (nothing inserted), and it commits with the effect or not at all.
            recorded = (
                BotUpdate.insert(update_id=update.update_id, kind=context.kind, applied_at=utcnow())
                .on_conflict_ignore()
                .as_rowcount()
                .execute()
            )
            if not recorded:
                return DUPLICATE
            if context.user is not None:
                context.customer = customers.find_by_telegram(context.user.id)
                if context.customer is not None:
                    context.language = texts.language_of(context.customer.language_code)
                    if context.customer.blocked and not _is_payment(update):
                        raise context.refusal("blocked")  # money that already moved is still recorded
            self.current = context
            try:
                self.bot.process_new_updates([update])
            finally:
                self.current = None
        return APPLIED

    # --- answers, after the commit ------------------------------------------------

    def deliver(self, answers):
        for answer in answers:
            if answer.method == "later":
                self.deliver(self._made_later(answer.target))
                continue
            self._deliver_one(answer, retry=True)

    def _made_later(self, make_answers):
        try:
            return list(make_answers())
        except Exception:
            logger.exception("an answer could not be made", extra={"task": "answer"})
            return []

    def _deliver_one(self, answer, retry):
        method, function, args, kwargs = self._call_of(answer)
        try:
            telegram.call(method, function, *args, **kwargs)
        except telegram.TelegramFailure as failure:
            if failure.code == telegram.RATE_LIMITED and retry and failure.retry_after <= MAX_RATE_LIMIT_WAIT_S:
                if not self.stop.wait(failure.retry_after):
                    self._deliver_one(answer, retry=False)
                return
            if failure.code == telegram.FORBIDDEN:
                logger.info("an answer was not delivered: the user blocked the bot", extra={"task": method})
                return
            logger.warning("an answer was not delivered", extra={"task": method, "error": failure.code})

    def _call_of(self, answer):
        bot = self.bot
        if answer.method == "send":
            return "sendMessage", bot.send_message, (answer.target, answer.text), {"reply_markup": answer.keyboard}
        if answer.method == "edit":
            chat, message_id = answer.target
            return (
                "editMessageText",
                bot.edit_message_text,
                (answer.text, chat, message_id),
                {"reply_markup": answer.keyboard},
            )
        if answer.method == "invoice":
            invoice = answer.payload
            prices = [telegram.labeled_price(invoice["title"], invoice["amount"])]
            return (
                "sendInvoice",
                bot.send_invoice,
                (answer.target, invoice["title"], invoice["description"], invoice["payload"], None),
                {"currency": invoice["currency"], "prices": prices},
            )
        if answer.method == "photo":
            return (
                "sendPhoto",
                bot.send_photo,
                (answer.target, answer.payload),
                {"caption": answer.text or None, "reply_markup": answer.keyboard},
            )
        if answer.method == "callback":
            return (
                "answerCallbackQuery",
                bot.answer_callback_query,
                (answer.target,),
                {"text": answer.text or None, "show_alert": answer.alert},
            )
        return (
            "answerPreCheckoutQuery",
            bot.answer_pre_checkout_query,
            (answer.target, answer.ok),
            {"error_message": None if answer.ok else answer.text},
        )
