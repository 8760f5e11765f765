"""Applying updates in the test process: a TeleBot on the fake Bot API, our handlers, the real applier and lease."""

import threading

from bot import handlers
from bot.lease import BotLease
from bot.updates import UpdateApplier
from models.base import db


class InProcessBot:
    """Polls the fake once per `drain()` and applies what came, as the bot process does (offset after apply)."""

    def __init__(self, telebot, fake, ttl_s=30, settings=None):
        self.telebot = telebot
        self.fake = fake
        self.stop = threading.Event()
        self.lease = BotLease(ttl_s)
        assert self.lease.acquire(self.stop)
        self.applier = UpdateApplier(telebot, self.lease, self.stop)
        handlers.register(telebot, self.applier, settings)
        self.offset = None

    def drain(self):
        """Apply every queued update; returns their outcomes in order."""
        outcomes = []
        while self.fake.waiting(self.offset):
            outcomes.extend(self.apply_one_batch())
        return outcomes

    def apply_one_batch(self):
        """Apply one getUpdates answer: what its answers make Telegram send next waits for the next call."""
        updates = self.telebot.get_updates(offset=self.offset, timeout=5, long_polling_timeout=1)
        if not updates:
            return []
        outcomes = self.applier.apply_all(updates)  # one transaction, as bot/polling.py does
        self.offset = updates[-1].update_id + 1
        return outcomes


def row_counts(database=None):
    """Rows per table: what "nothing written" is checked against."""
    database = database or db.obj
    counts = {}
    for table in database.get_tables():
        if table in ("schema_migrations", "job_leader"):
            continue  # the lease is renewed by every update, whatever it does
        counts[table] = database.execute_sql(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
    return counts
