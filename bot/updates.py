"""Applying updates at most once (SPEC 14.3): each one's effect and `update_id` in one transaction, under the lease.

`UpdateApplier.apply_all(updates)` applies the updates of one getUpdates
answer (or a slice of it) in one transaction:

0. before it opens, the preparers (registered by bot/handlers/) make the
   Bot API calls the handlers will need — getChatMember for a purchase's
   channel check (bot/membership.py), getFile and the download of a support
   photo (bot/handlers/support.py) — and keep the answers on each update's
   Context, so no HTTP round trip holds the transaction (SQLite's one write
   lock; PostgreSQL's row locks and a pooled connection). They write
   nothing; what they fetched is written, or not, with the update;
1. one statement inserts every `update_id` into `bot_updates` unless it is
   there, and only if this process's lease row reads live (bot/lease.py: a
   process that lost the lease applies nothing). An update recorded within
   UPDATE_REPEAT_WINDOW (models/bot.py) was applied before (Telegram delivers
   an update again until the bot confirms it, for a day at most) and is
   skipped. A record older than that is of another update with the same id
   (after a week without updates Telegram numbers the next ones from a
   random point): it is overwritten, and the update applied. The lease is checked, not written: the lease
   thread renews it; on PostgreSQL the check locks the row FOR SHARE until
   the commit and on SQLite the transaction holds the write lock, so no
   takeover commits in between. A lease that reads expired is renewed in the
   transaction, or LeaseLost raised when another process holds it;
2. for each update, a savepoint, then the TeleBot handlers (registered in
   bot/handlers/) in the calling thread; they read and write through the
   services and queue their answers on the update's `Context`;
3. one commit: each `update_id` with its effect. The caller moves the
   getUpdates offset past the updates only after that (bot/polling.py), so a
   crash before the commit leaves them unconfirmed and they are applied by
   the next bot, and a crash after the commit finds them recorded.

Batching costs no guarantee: the batch commits whole or not at all, and an
update's effect never commits without its id nor its id without its effect.
It saves a commit and a lease check per update, which on a busy chat were
most of an update's time. The batch is bounded (bot/polling.py) so its
answers wait for its commit a few milliseconds at most.

Answers are sent after the commit. A crash between the commit and the send
loses that answer (the customer presses again and gets a fresh one), where
sending first would show an answer for an effect that may never commit.
What must reach a customer whatever happens (access ready, receipts) is a
notice row written in a transaction and delivered by a loop that marks it
sent, not an answer.

A handler that refuses (a forged button, a blocked customer, a message too
long) raises Refused: the update is rolled back to its savepoint — nothing
of it is written, its update id included, because an update that changed
nothing needs no protection against a second application — and the refusal
is sent. An unexpected error is logged (redacted), rolled back the same way,
and the customer is told something went wrong; a database that cannot be
reached raises DatabaseUnavailable so the caller retries the same updates
later.
"""

import logging
import queue
import threading
from dataclasses import dataclass, field

from peewee import InterfaceError, OperationalError, PostgresqlDatabase

from bot import texts
from bot.lease import LEASE_NAME, LeaseLost
from integrations import telegram
from models.base import db, utcnow
from models.bot import UPDATE_REPEAT_WINDOW
from models.commerce import Customer

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
    # What the batch's preparers fetched before its transaction (bot/updates.py UpdateApplier.prepare),
    # by what it is (a membership answer, a photo's bytes): the handler reads it instead of calling out.
    prepared: dict = field(default_factory=dict)

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
    """Sends applied updates' answers on threads of their own while the main thread applies
    the next updates: a Bot API round trip no longer waits behind a database transaction, nor
    the next transaction behind it. What is queued was committed already, so queueing changes
    nothing a crash could lose that sending at once would keep.

    Each user's answers go through one lane (the user id picks it), so one chat sees its
    answers in the order its updates were applied, while `lanes` chats are answered at once
    and a slow answer holds back only the chats of its lane. The lanes are bounded: a slow
    Bot API slows the applying down rather than letting answers pile up in memory. run()
    drives every lane and returns when all are done; close() lets them send what is queued,
    then end."""

    QUEUE_BOUND = 100
    LANES = 4  # Bot API round trips under way at once; the bare library's echo bot runs 2 handler threads

    def __init__(self, deliver, lanes=LANES):
        self._deliver = deliver
        self._queues = [queue.Queue(self.QUEUE_BOUND) for _ in range(lanes)]

    def put(self, answers, key=0):
        """Queue one update's answers; `key` (the user's id) keeps one user's answers in order."""
        if answers:
            self._queues[key % len(self._queues)].put(answers)

    def run(self):
        others = [
            threading.Thread(target=self._run_lane, args=(lane,), name=f"bot-answers-{index}", daemon=True)
            for index, lane in enumerate(self._queues[1:], start=1)
        ]
        for thread in others:
            thread.start()
        self._run_lane(self._queues[0])
        for thread in others:
            thread.join()

    def _run_lane(self, lane):
        while (answers := lane.get()) is not None:
            try:
                self._deliver(answers)
            except Exception:
                logger.exception("answers could not be sent", extra={"task": "answer"})

    def close(self):
        for lane in self._queues:
            lane.put(None)


class _Statements:
    """The hot path's SQL, written once per database (peewee builds a query's SQL on every call otherwise)."""

    def __init__(self, database):
        self.database = database
        postgres = isinstance(database, PostgresqlDatabase)
        self.mark = "%s" if postgres else "?"
        # FOR SHARE holds the lease row until the commit: another process's takeover (an
        # upsert of that row) waits for this transaction, so nothing commits after a loss.
        # SQLite's IMMEDIATE transaction holds the one write lock the takeover needs.
        self.lock = " FOR SHARE" if postgres else ""
        columns_sql, _ = Customer.select().sql()  # the model's columns, in its order
        # "%s" here is where the IN list goes; the "%" of the SQL itself doubled for the formatting.
        self.customers_sql = columns_sql.replace("%", "%%") + ' WHERE ("t1"."telegram_id" IN (%s))'
        self.savepoint_name = "bot_update"

    def record(self, rows, holder_id, now):
        """Record (update_id, kind, applied_at) rows if this holder's lease is live; the ids recorded.
        An id recorded within the repeat window is not (a repeat); one recorded before it is recorded anew."""
        values = ", ".join(f"({self.mark}, {self.mark}, {self.mark})" for _ in rows)
        sql = (
            "INSERT INTO bot_updates (update_id, kind, applied_at) "
            f"SELECT column1, column2, column3 FROM (VALUES {values}) AS fresh "
            "WHERE EXISTS (SELECT 1 FROM job_leader WHERE name = {m} AND leader_id = {m} AND expires_at > {m}{lock}) "
            "ON CONFLICT (update_id) DO UPDATE SET kind = excluded.kind, applied_at = excluded.applied_at "
            "WHERE bot_updates.applied_at < {m} RETURNING update_id"
        ).format(m=self.mark, lock=self.lock)
        params = [value for row in rows for value in row] + [LEASE_NAME, holder_id, now, now - UPDATE_REPEAT_WINDOW]
        return {row[0] for row in self.database.execute_sql(sql, params).fetchall()}

    def recorded_before(self, update_ids, now):
        """Which of these ids were recorded within the repeat window."""
        marks = ", ".join([self.mark] * len(update_ids))
        sql = f"SELECT update_id FROM bot_updates WHERE update_id IN ({marks}) AND applied_at >= {self.mark}"
        cursor = self.database.execute_sql(sql, [*update_ids, now - UPDATE_REPEAT_WINDOW])
        return {row[0] for row in cursor.fetchall()}

    def customers(self, telegram_ids):
        """{telegram id: Customer} of those of these Telegram users who are customers, in one read."""
        if not telegram_ids:
            return {}
        marks = ", ".join([self.mark] * len(telegram_ids))
        return {customer.telegram_id: customer for customer in Customer.raw(self.customers_sql % marks, *telegram_ids)}

    def send_with_next(self, sql):
        """A statement whose answer nobody reads: on PostgreSQL it rides with the next one (no round trip)."""
        defer = getattr(self.database, "defer", None)
        if defer is not None:
            defer([(sql, None)])
        else:
            self.database.execute_sql(sql)

    def savepoint(self, release_previous):
        # One savepoint per update, released when the next one starts: an update that is
        # refused or fails is rolled back alone while the others of the batch commit.
        if release_previous:
            self.send_with_next(f"RELEASE SAVEPOINT {self.savepoint_name}")
        self.send_with_next(f"SAVEPOINT {self.savepoint_name}")

    def send_deferred_writes(self):
        """Send what the update's handlers deferred (models/transactions.py) before the next update
        starts: a deferred write that fails must fail its own update, inside its savepoint, not the
        next update's first statement. Nothing to send (the usual case) costs no round trip."""
        unsent = getattr(self.database, "unsent_statements", None)
        if unsent is None:
            return
        if any(not (sql.startswith("BEGIN") or sql.endswith(self.savepoint_name)) for sql, _ in unsent()):
            self.database.execute_sql("SELECT 1")

    def undo_update(self, update_id):
        """Back to the update's savepoint, its update_id row with it: a refused update writes nothing."""
        self.database.execute_sql(f"ROLLBACK TO SAVEPOINT {self.savepoint_name}")
        self.database.execute_sql(f"DELETE FROM bot_updates WHERE update_id = {self.mark}", [update_id])


def _runs_of_distinct_users(applied):
    """{index where a run starts: the Telegram user ids of the run}: consecutive updates, no user twice."""
    runs, users, start = {}, set(), 0
    for index, (_, context) in enumerate(applied):
        user = None if context.user is None else context.user.id
        if user is not None and user in users:
            runs[start] = users
            users, start = set(), index
        if user is not None:
            users.add(user)
    if applied:
        runs[start] = users
    return runs


class UpdateApplier:
    def __init__(self, bot, lease, stop):
        self.bot = bot
        self.lease = lease
        self.stop = stop
        self.current = None  # the Context of the update being applied; handlers read it
        self.sender = None  # an AnswerSender (the bot process); without one, answers are sent before apply returns
        # preparer(pairs): given the batch's (update, context) pairs in order, makes the Bot API calls
        # their handlers will need and keeps the answers in context.prepared — before the transaction.
        self.preparers = []
        self._statements = None

    def apply(self, update):
        """Apply one update; returns APPLIED, DUPLICATE, REFUSED or FAILED."""
        return self.apply_all([update])[0]

    def apply_all(self, updates):
        """Apply updates (in Telegram's order) in one transaction; their outcomes, in the same order.

        One commit and one lease check serve them all; each update still has its effect and its
        update_id committed together (SPEC 14.3) — the batch commits whole or not at all. A refused
        or failed update is rolled back to its own savepoint, so it writes nothing and the others
        keep their effects. LeaseLost and DatabaseUnavailable leave the whole batch uncommitted: the
        caller keeps its offset, and the next getUpdates delivers the same updates again."""
        contexts = [self._context_of(update) for update in updates]
        self.prepare(updates, contexts)
        outcomes = self._apply_batch(updates, contexts)
        for context in contexts:
            context.prepared = {}  # a photo's bytes are not kept while the answers wait to be sent
            if self.sender is not None:
                self.sender.put(context.answers, context.user.id if context.user is not None else context.update_id)
            else:
                self.deliver(context.answers)
        return outcomes

    def prepare(self, updates, contexts):
        """The HTTP calls the batch's handlers need (getChatMember, a support photo's getFile and
        download), made before its transaction opens: a call held inside it would hold SQLite's one
        write lock (every other writer waits) or, on PostgreSQL, the batch's row locks and a pooled
        connection for a Bot API round trip. Preparers read the database (autocommit reads, no lock
        kept) and write nothing: what they fetch is used, and written, by the handlers in the
        transaction; an update whose effect is refused or rolled back wrote nothing either way."""
        pairs = list(zip(updates, contexts, strict=True))
        for preparer in self.preparers:
            try:
                preparer(pairs)
            except (OperationalError, InterfaceError) as error:
                raise DatabaseUnavailable(str(error)) from None
            except Exception:
                # The handlers find nothing prepared and answer without the call (membership: the
                # stored state, else let through as in an outage; a photo: a failure to send again).
                logger.exception("updates could not be prepared", extra={"task": "prepare"})

    def _apply_batch(self, updates, contexts):
        try:
            outcomes = self._apply_in_transaction(updates, contexts)
        except (LeaseLost, DatabaseUnavailable):
            raise
        except (OperationalError, InterfaceError) as error:
            raise DatabaseUnavailable(str(error)) from None
        except Exception:
            # Undoing one update failed (a write it queued failed when sent): nothing of the
            # batch committed. Each update alone again; one alone that fails this way failed.
            # What was prepared is kept: the calls are not made again.
            if len(updates) > 1:
                outcomes = []
                for update, context in zip(updates, contexts, strict=True):
                    context.answers, context.customer = [], None
                    context.language = self._context_of(update).language  # a handler may have changed it
                    outcomes += self._apply_batch([update], [context])
                return outcomes
            logger.exception("update failed; nothing of it was written", extra={"kind": contexts[0].kind})
            contexts[0].answers = contexts[0].refusal("failure").answers
            outcomes = [FAILED]
        return outcomes

    def _context_of(self, update):
        context = Context(update.update_id, kind_of(update), user_of(update), origin_of(update))
        if context.user is not None:
            context.language = texts.language_of(context.user.language_code)
        return context

    def _sql(self):
        if self._statements is None or self._statements.database is not db.obj:
            self._statements = _Statements(db.obj)
        return self._statements

    def _record(self, sql, contexts):
        """Record the batch's update ids under a live lease; the set of ids this transaction inserted.

        The lease is checked by a read in the insert itself (no write per update: the lease
        thread renews it). Only when it reads expired (a renewal late, or a takeover) is it
        renewed here, and LeaseLost raised when another process holds it now."""
        now = utcnow()
        rows = list({context.update_id: (context.update_id, context.kind, now) for context in contexts}.values())
        recorded = sql.record(rows, self.lease.holder_id, now)
        missing = [row[0] for row in rows if row[0] not in recorded]
        if missing:
            repeats = sql.recorded_before(missing, now)
            missing_now = [update_id for update_id in missing if update_id not in repeats]
            if missing_now:  # not there before and not inserted: the lease did not read live
                self.lease.confirm()
                recorded |= sql.record([row for row in rows if row[0] in missing_now], self.lease.holder_id, now)
        return recorded

    def _apply_in_transaction(self, updates, contexts):
        sql = self._sql()
        with db.atomic():
            fresh = self._record(sql, contexts)
            applied = []  # (update, context) to apply: the first copy of each id not recorded before
            for update, context in zip(updates, contexts, strict=True):
                if context.update_id in fresh:
                    fresh.discard(context.update_id)  # a second copy in the same batch is a repeat
                    applied.append((update, context))
            runs = _runs_of_distinct_users(applied)
            outcome_of = {}
            savepoint_open = False
            for index, (update, context) in enumerate(applied):
                if index in runs:
                    # One read for the customers of a run of updates from distinct users; a user's
                    # next update starts the next run, whose read sees what this one wrote.
                    known = sql.customers(sorted(runs[index]))
                sql.savepoint(release_previous=savepoint_open)
                savepoint_open = True
                customer = None if context.user is None else known.get(context.user.id)
                try:
                    self._apply_one(update, context, customer)
                    sql.send_deferred_writes()
                    outcome_of[id(context)] = APPLIED
                except Refused as refusal:
                    sql.undo_update(context.update_id)
                    context.answers = refusal.answers
                    outcome_of[id(context)] = REFUSED
                except (LeaseLost, DatabaseUnavailable, OperationalError, InterfaceError):
                    raise
                except Exception:
                    logger.exception("update failed; nothing of it was written", extra={"kind": context.kind})
                    sql.undo_update(context.update_id)
                    context.answers = context.refusal("failure").answers
                    outcome_of[id(context)] = FAILED
        return [outcome_of.get(id(context), DUPLICATE) for context in contexts]

    def _apply_one(self, update, context, customer):
        if context.user is not None:
            context.customer = customer
            if context.customer is not None:
                context.language = texts.language_of(context.customer.language_code)
                if context.customer.blocked and not _is_payment(update):
                    raise context.refusal("blocked")  # money that already moved is still recorded
        self.current = context
        try:
            self.bot.process_new_updates([update])
        finally:
            self.current = None

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
