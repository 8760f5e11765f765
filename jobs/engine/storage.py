"""Huey's storage contract over the queue's own tables.

Declared job kinds never pass through these methods: they are inserted by
the JobClient and claimed by the executor, with River's states. What is
here serves Huey itself: messages of plain `@huey.task()` functions (rows
with a pickled `payload`, same table), Huey's schedule for those messages,
its result store, locks (`put_if_empty`, with TTL) and counters. The
semantics are Huey's — `dequeue` removes the message — and Huey's own
storage test suite runs against this class.
"""

import datetime

from huey.constants import EmptyData
from huey.storage import BaseStorage

from jobs.engine.kinds import DEFAULT_QUEUE, RAW_HUEY_KIND
from jobs.engine.sql import for_database
from jobs.engine.states import AVAILABLE, SCHEDULED
from models.base import db, utcnow

RAW_MAX_ATTEMPTS = 25


def _key(key):
    return key.decode("utf8") if isinstance(key, bytes) else str(key)


def _naive(ts):
    if ts.tzinfo is not None:
        ts = ts.astimezone(datetime.timezone.utc).replace(tzinfo=None)
    return ts


class JobStorage(BaseStorage):
    blocking = False  # our own Worker blocks in the executor; Huey's polls
    priority = True

    def __init__(self, name="omniflow", database=None, **kwargs):
        super().__init__(name)
        self._database = database

    @property
    def sql(self):
        database = self._database or db.obj
        cached = getattr(self, "_sql", None)
        if cached is None or cached.db is not database:
            cached = self._sql = for_database(database)
        return cached

    # -- the raw message lane ---------------------------------------------------

    def _insert_raw(self, data, priority, state, scheduled_at):
        now = utcnow()
        row = (
            RAW_HUEY_KIND,
            DEFAULT_QUEUE,
            state,
            "{}",
            data,
            RAW_MAX_ATTEMPTS,
            int(priority or 0),
            None,
            0,
            now,
            scheduled_at or now,
        )
        with db.atomic():
            self.sql.insert_rows([row])

    def enqueue(self, data, priority=None):
        self._insert_raw(data, priority, AVAILABLE, None)

    def dequeue(self):
        return self.sql.pop_raw(utcnow())

    def queue_size(self):
        return self.sql.raw_count(AVAILABLE)

    def enqueued_items(self, limit=None):
        return self.sql.raw_items(AVAILABLE, limit)

    def flush_queue(self):
        self.sql.raw_flush(AVAILABLE)

    def add_to_schedule(self, data, ts, utc=None):
        self._insert_raw(data, None, SCHEDULED, _naive(ts))

    def read_schedule(self, ts):
        return self.sql.pop_raw_schedule(_naive(ts))

    def schedule_size(self):
        return self.sql.raw_count(SCHEDULED)

    def scheduled_items(self, limit=None):
        items = self.sql.raw_items(SCHEDULED, None)
        return items[:limit] if limit else items

    def flush_schedule(self):
        self.sql.raw_flush(SCHEDULED)

    # -- results, locks, flags --------------------------------------------------------

    def put_data(self, key, value, is_result=False):
        self.sql.kv_put(self.name, _key(key), value)

    def peek_data(self, key):
        values = self.sql.kv_get_many(self.name, [_key(key)], utcnow())
        return values.get(_key(key), EmptyData)

    def peek_many(self, keys):
        if not keys:
            return {}
        by_text = {_key(k): k for k in keys}
        values = self.sql.kv_get_many(self.name, list(by_text), utcnow())
        return {by_text[k]: v for k, v in values.items()}

    def pop_data(self, key):
        value = self.sql.kv_pop(self.name, _key(key), utcnow())
        return EmptyData if value is None else value

    def has_data_for_key(self, key):
        return self.peek_data(key) is not EmptyData

    def put_if_empty(self, key, value, ttl=None):
        now = utcnow()
        expires_at = now + datetime.timedelta(seconds=ttl) if ttl is not None else None
        return self.sql.kv_put_if_empty(self.name, _key(key), value, expires_at, now)

    def result_store_size(self):
        return self.sql.kv_count(self.name, utcnow())

    def result_items(self):
        return self.sql.kv_items(self.name, utcnow())

    def flush_results(self):
        self.sql.kv_flush(self.name)

    def incr(self, key, amount=1):
        return self.sql.counter_incr(self.name, _key(key), amount)

    def delete_counter(self, key):
        self.sql.counter_delete(self.name, _key(key))

    def flush_counters(self):
        self.sql.counter_delete(self.name)
