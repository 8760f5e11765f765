"""Channel membership (SPEC 6, 14.6): with APP_TELEGRAM_REQUIRED_CHANNEL set, only members of that channel may buy;
unset, nothing is checked, getChatMember is never called and the re-check loop does not run.

The buy flow asks `allowed(user id, customer)` before it shows plans or
takes a payment. The answer is the customer's stored state
(`bot_channel_members`, migration 0023) while it is fresh: a member checked
less than RECHECK_S (10 min, the spec's re-verification interval) ago may
buy without a call. Otherwise `getChatMember` on the channel answers —
asked by `prepare()` before the update's transaction opens (bot/updates.py),
never inside it — and a member's state is stored in the update's
transaction. A refusal is never stored as an answer to trust: who has just
joined may buy at once, so a stored non-member is asked again.

`MembershipRecheck` is the bot's loop (SPEC 6: every 10 minutes, batch
100): it re-verifies the stored members whose last check is older than the
interval, oldest first, 100 per batch — the getChatMember calls outside any
transaction, then the batch's answers written in one. A member found gone
is stored as not a member (`left_at`): their next purchase asks Telegram
again and is refused while they stay out. What they bought before is
theirs — the spec makes membership a condition of buying, not of access —
so nothing else changes.

When Telegram cannot answer (a 5xx, a timeout, the bot not an
administrator of the channel), the purchase is let through and the failure
logged — a sale is not lost to an outage of the check, and the check is a
shop policy, not a safeguard of money — and the loop leaves the state as it
was, to be asked again on its next run. A batch in which every call failed
ends the run (Telegram is down for us; the next run tries again), and a 429
waits its retry_after before the batch's remaining calls.
"""

import datetime
import logging

from peewee import JOIN
from telebot import apihelper

from integrations import telegram
from models.base import db, utcnow
from models.bot import BotChannelMember
from models.commerce import Customer

logger = logging.getLogger("omniflow.bot.membership")

RECHECK_S = 10 * 60
RECHECK_BATCH = 100
MEMBER_STATUSES = ("creator", "administrator", "member")
MAX_RATE_LIMIT_WAIT_S = 60
PREPARED = "membership"  # the key of a prepared getChatMember answer in an update's Context
NOT_PREPARED = "not_prepared"


def ask(bot, channel, user_id):
    """True or False from getChatMember; a TelegramFailure when Telegram did not answer."""
    # The raw answer: only `status` and `is_member` matter, and TeleBot's typed ChatMember objects
    # refuse an answer that lacks a field of a newer API version.
    member = telegram.call("getChatMember", apihelper.get_chat_member, bot.token, channel, user_id)
    status = member.get("status") if isinstance(member, dict) else None
    return status in MEMBER_STATUSES or (status == "restricted" and member.get("is_member") is True)


class ChannelMembership:
    def __init__(self, bot, channel, recheck_s=RECHECK_S):
        self.bot = bot
        self.channel = channel
        self.recheck_s = recheck_s

    @property
    def required(self):
        return bool(self.channel)

    def prepare(self, pairs, needs_check):
        """Before the batch's transaction: getChatMember for each update `needs_check(update)` whose
        user has no fresh stored answer, kept as `context.prepared[PREPARED]` for allowed().

        Only users who are customers (not blocked) are asked, or who sent an earlier update of the
        batch (a /start before the press): a press from anyone else is refused unread
        (bot/handlers/menu.py, bot/updates.py) and costs no call. A user asked once is not asked
        again in the same batch."""
        if not self.channel:
            return
        wanted = [context.user.id for update, context in pairs if context.user is not None and needs_check(update)]
        if not wanted:
            return
        known = _stored_states(sorted(set(wanted)))
        fresh_after = utcnow() - datetime.timedelta(seconds=self.recheck_s)
        answers, seen = {}, set()
        for update, context in pairs:
            if context.user is None:
                continue
            user_id = context.user.id
            if needs_check(update) and (user_id in known or user_id in seen):
                stored = known.get(user_id)
                fresh = stored is not None and stored[0] == self.channel and stored[1] and stored[2] > fresh_after
                if not fresh:
                    if user_id not in answers:
                        answers[user_id] = self._ask_or_none(user_id)
                    context.prepared[PREPARED] = (self.channel, user_id, answers[user_id])
            seen.add(user_id)

    def allowed(self, user_id, customer=None, prepared=None):
        """May this user buy? In the update's transaction: a member's fresh answer is stored with it.

        `prepared` is what prepare() asked Telegram before the transaction; in a transaction no
        call is made. Without one there, the stored state was fresh when the batch was prepared
        (it aged since, by milliseconds, or the re-check loop changed it): it answers."""
        if not self.channel:
            return True
        now = utcnow()
        stored = None if customer is None else BotChannelMember.get_or_none(BotChannelMember.customer == customer.id)
        fresh_after = now - datetime.timedelta(seconds=self.recheck_s)
        if stored is not None and stored.channel == self.channel and stored.member and stored.checked_at > fresh_after:
            return True
        if prepared is not None and prepared[:2] == (self.channel, user_id):
            is_member = prepared[2]
        elif not db.in_transaction():
            is_member = self._ask_or_none(user_id)  # no transaction to hold open
        elif stored is not None and stored.channel == self.channel:
            return stored.member
        else:
            logger.warning(
                "channel membership was not prepared; the purchase goes on",
                extra={"task": "channel_membership", "error": NOT_PREPARED},
            )
            return True
        if is_member is None:
            return True  # Telegram did not answer: a sale is not lost to an outage of the check
        if is_member and customer is not None:
            _store(customer.id, self.channel, True, now)
        return is_member

    def _ask_or_none(self, user_id):
        """True or False from getChatMember; None (logged) when Telegram did not answer."""
        try:
            return ask(self.bot, self.channel, user_id)
        except telegram.TelegramFailure as failure:
            logger.warning(
                "channel membership could not be checked; the purchase goes on",
                extra={"task": "channel_membership", "error": failure.code},
            )
            return None


def _stored_states(telegram_ids):
    """{telegram id: (channel, member, checked_at)} of these users who are customers, not blocked (a
    blocked customer's press is refused unread); (None, False, None) for one with no stored state.
    One autocommit read."""
    rows = (
        Customer.select(Customer.telegram_id, BotChannelMember.channel, BotChannelMember.member,
                        BotChannelMember.checked_at)
        .join(BotChannelMember, JOIN.LEFT_OUTER, on=(BotChannelMember.customer == Customer.id))
        .where(Customer.telegram_id.in_(telegram_ids), Customer.blocked == False)  # noqa: E712 - peewee's SQL
        .tuples()
    )  # fmt: skip
    return {telegram_id: (channel, bool(member), checked_at) for telegram_id, channel, member, checked_at in rows}


def _store(customer_id, channel, member, now):
    BotChannelMember.insert(customer=customer_id, channel=channel, member=member, checked_at=now).on_conflict(
        conflict_target=[BotChannelMember.customer],
        update={
            BotChannelMember.channel: channel,
            BotChannelMember.member: member,
            BotChannelMember.checked_at: now,
            BotChannelMember.left_at: None,
        },
    ).execute()


class MembershipRecheck:
    """The loop: every `interval_s`, re-verify the stored members checked longer ago than that."""

    def __init__(self, bot, channel, stop, interval_s=RECHECK_S, batch=RECHECK_BATCH):
        self.bot = bot
        self.channel = channel
        self.stop = stop
        self.interval_s = interval_s
        self.batch = batch

    def run(self):
        while not self.stop.is_set():
            try:
                self.run_once()
            except Exception:
                logger.exception("channel membership re-check failed; retrying next run", extra={"task": "membership"})
            finally:
                db.close()
            self.stop.wait(self.interval_s)

    def run_once(self):
        """One run over every member due; returns (still members, left, not answered)."""
        cutoff = utcnow() - datetime.timedelta(seconds=self.interval_s)
        totals = [0, 0, 0]
        after = ""
        while not self.stop.is_set():
            due = self._due(cutoff, after)
            if not due:
                break
            after = due[-1][0]
            answers = self._ask_all(due)
            self._record(due, answers)
            stayed = sum(1 for answer in answers.values() if answer)
            left = len(answers) - stayed
            totals = [totals[0] + stayed, totals[1] + left, totals[2] + len(due) - len(answers)]
            if left:
                logger.info("channel members left", extra={"task": "membership", "count": left})
            if not answers:
                break  # Telegram answered none of the batch: the next run asks again
        return tuple(totals)

    def _due(self, cutoff, after):
        """(customer id, telegram id, checked_at) of up to `batch` members checked before `cutoff`, by customer id."""
        rows = (
            BotChannelMember.select(BotChannelMember.customer, Customer.telegram_id, BotChannelMember.checked_at)
            .join(Customer, JOIN.INNER, on=(BotChannelMember.customer == Customer.id))
            .where(
                BotChannelMember.channel == self.channel,
                BotChannelMember.member == True,  # noqa: E712 - peewee's SQL comparison
                BotChannelMember.checked_at < cutoff,
                BotChannelMember.customer > after,
                Customer.telegram_id.is_null(False),
            )
            .order_by(BotChannelMember.customer)
            .limit(self.batch)
            .tuples()
        )
        return list(rows)

    def _ask_all(self, due):
        """{customer id: member?} for those Telegram answered."""
        answers = {}
        for customer_id, telegram_id, _ in due:
            if self.stop.is_set():
                break
            try:
                answers[customer_id] = ask(self.bot, self.channel, telegram_id)
            except telegram.TelegramFailure as failure:
                if failure.code == telegram.RATE_LIMITED and failure.retry_after <= MAX_RATE_LIMIT_WAIT_S:
                    self.stop.wait(failure.retry_after)
                    continue
                if failure.code in (telegram.FORBIDDEN, telegram.UNAVAILABLE) and not answers:
                    logger.warning(
                        "channel membership could not be re-checked; next run",
                        extra={"task": "membership", "error": failure.code},
                    )
                    return answers  # the channel or Telegram fails for everyone: no need to ask the rest
        return answers

    def _record(self, due, answers):
        """The batch's answers in one transaction; a row checked again meanwhile (a purchase) keeps that answer."""
        now = utcnow()
        checked = {customer_id: checked_at for customer_id, _, checked_at in due}
        with db.atomic():
            for customer_id, member in answers.items():
                changes = {"checked_at": now} if member else {"member": False, "checked_at": now, "left_at": now}
                BotChannelMember.update(**changes).where(
                    BotChannelMember.customer == customer_id,
                    BotChannelMember.checked_at == checked[customer_id],
                    BotChannelMember.channel == self.channel,
                ).execute()


_current = ChannelMembership(None, "")


def configure(bot, channel):
    global _current
    _current = ChannelMembership(bot, channel or "")


def current():
    return _current
