"""The four Huey peers: huey-postgres, huey-sql-pg, huey-sqlite, huey-redis.

Each is a stock Huey storage run by Huey's own consumer with its documented
defaults, except workers=W, worker_type='thread', periodic=False (what the
benchmark asks of every peer). Polling delays are not tuned.

Isolation: the PostgreSQL peers keep their tables in their own schema of the
bench database (search_path set per connection), SQLite uses a file in the
run's temp dir, Redis uses keys named after the queue 'omniflow_bench'.
"""

import os

from bench import harness

QUEUE_NAME = "omniflow_bench"

# Huey's Consumer defaults (huey/consumer.py): only polling storages use them.
_POLL = "polling, initial_delay 0.1 s, backoff 1.15, max_delay 10 s"

NOTES = {
    "huey-postgres": "LISTEN/NOTIFY wake-up, blocking dequeue (read_timeout 1 s); "
                     "workers share one psycopg 3 connection behind a lock; "
                     "DELETE ... FOR UPDATE SKIP LOCKED per job",
    "huey-sql-pg": _POLL + "; peewee + psycopg2, a connection per worker thread; "
                   "SELECT ... FOR UPDATE SKIP LOCKED then DELETE per job",
    "huey-sqlite": _POLL + "; WAL, SQLite's default synchronous; workers share one "
                   "connection; BEGIN EXCLUSIVE per dequeue",
    "huey-redis": "BRPOP blocking dequeue (read_timeout 1 s); in-memory list "
                  "(durability per the redis-server config)",
}

SCHEMAS = {"huey-postgres": "bench_huey_pg", "huey-sql-pg": "bench_huey_sql"}


def _search_path(schema):
    return "-c search_path=%s" % schema


class HueySystem:
    def __init__(self, name, ctx):
        if name not in NOTES:
            raise ValueError("unknown huey system %r" % name)
        self.name = name
        self.ctx = ctx
        self.notes = NOTES[name]
        self._parent = None  # (huey, noop, probe) used by the parent to enqueue

    def _build(self, create_tables):
        """A fresh Huey instance with the two bench tasks registered.

        Called once in the parent and once in the consumer child, so no
        connection is ever shared across the fork. Task names are fixed, so
        both instances resolve the same registry keys.
        """
        name, ctx = self.name, self.ctx
        if name == "huey-postgres":
            from huey import PostgresHuey

            huey = PostgresHuey(QUEUE_NAME, dsn=ctx.pg_dsn, create_tables=create_tables,
                                options=_search_path(SCHEMAS[name]))
        elif name == "huey-sql-pg":
            from huey.contrib.sql_huey import SqlHuey
            from playhouse.db_url import connect

            # SqlStorage ignores extra kwargs, so hand it a peewee database
            # (the same one it builds from a URL) with the search_path set.
            database = connect(ctx.pg_dsn, unquote_user=True, unquote_password=True,
                               options=_search_path(SCHEMAS[name]))
            huey = SqlHuey(QUEUE_NAME, database=database, create_tables=create_tables)
        elif name == "huey-sqlite":
            from huey import SqliteHuey

            huey = SqliteHuey(QUEUE_NAME, filename=self._sqlite_path(),
                              create_tables=create_tables)
        else:
            from huey import RedisHuey

            huey = RedisHuey(QUEUE_NAME, url=ctx.redis_url)

        @huey.task(name="bench_noop")
        def noop():
            harness.noop_done()

        @huey.task(name="bench_probe")
        def probe(i):
            harness.probe_started(i)

        return huey, noop, probe

    def _sqlite_path(self):
        return os.path.join(self.ctx.tmpdir, "huey-sqlite.db")

    def prepare(self):
        if self.name in SCHEMAS:
            harness.reset_pg_schema(self.ctx.pg_dsn, SCHEMAS[self.name])
        elif self.name == "huey-sqlite":
            for suffix in ("", "-wal", "-shm"):
                try:
                    os.remove(self._sqlite_path() + suffix)
                except FileNotFoundError:
                    pass
        self._parent = self._build(create_tables=True)
        if self.name == "huey-redis":
            self._parent[0].storage.flush_all()  # this queue's keys only

    def dead_tuples(self):
        if self.name not in SCHEMAS:
            return None
        return harness.pg_dead_tuples(self.ctx.pg_dsn, self._parent[0].storage.table_task, SCHEMAS[self.name])

    def enqueue_noops(self, n):
        huey, noop, _ = self._parent
        if self.name == "huey-postgres":
            # Huey's own messages, written by COPY: a million one-row commits would take
            # longer than the burn-down they prepare.
            storage = huey.storage
            with storage.conn.cursor() as cur:
                with cur.copy("COPY %s (queue, data) FROM STDIN" % storage.table_task) as copy:
                    for _ in range(n):
                        copy.write_row((storage.name, huey.serialize_task(noop.s())))
            return
        # Huey has no bulk enqueue: one committed insert (or LPUSH) per job.
        for _ in range(n):
            huey.enqueue(noop.s())

    def enqueue_probe(self, i):
        huey, _, probe = self._parent
        huey.enqueue(probe.s(i))  # autocommit: committed on return

    def consume(self, workers, stop_event):
        huey, _, _ = self._build(create_tables=False)
        consumer = huey.create_consumer(workers=workers, worker_type="thread", periodic=False)
        harness.consumer_started()
        consumer.start()
        stop_event.wait()
        consumer.stop(graceful=True)  # joins the worker threads
        huey.storage.close()

    def close(self):
        if self._parent:
            self._parent[0].storage.close()


def make(name, ctx):
    return HueySystem(name, ctx)
