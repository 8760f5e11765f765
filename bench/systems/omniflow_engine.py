"""Our engine in the queue benchmark: omniflow-pg and omniflow-sqlite.

The jobs are real job rows (kept after completion, like every job), run by
the real consumer (`huey.create_consumer`) with W worker threads on one
queue. PostgreSQL lives in the public schema of the bench database (migrated
like any installation); SQLite is a file in the run's temp dir.
"""
import os

from bench import harness
from jobs import JobInsert, huey, insert, insert_many

INSERT_CHUNK = 1000

NOTES = {
    "omniflow-pg": "job rows kept; claim up to 10 per statement (SKIP LOCKED), outcomes batched every 50 ms; "
                   "LISTEN/NOTIFY wake-up",
    "omniflow-sqlite": "job rows kept; claim up to 10 per IMMEDIATE transaction, outcomes batched every 50 ms; "
                       "polls every 50 ms with a read when idle",
}


@huey.job("bench_noop", queue="default", max_attempts=1)
def bench_noop():
    harness.noop_done()


@huey.job("bench_probe", queue="default", max_attempts=1)
def bench_probe(i):
    harness.probe_started(i)


class OmniflowSystem:
    def __init__(self, name, ctx):
        self.name = name
        self.notes = NOTES[name]
        if name == "omniflow-pg":
            self.url = ctx.pg_dsn
        else:
            self.url = "sqlite:///" + os.path.join(ctx.tmpdir, "omniflow-bench.sqlite3")

    def _bind(self, pool_size):
        from config.database import bind_database
        from config.settings import parse_database_url

        return bind_database(parse_database_url(self.url), pool_size=pool_size)

    def prepare(self):
        import migrations

        database = self._bind(pool_size=4)
        migrations.apply(database)
        tables = ("jobs", "job_workers", "job_leader", "job_periodic", "huey_kv", "huey_counters")
        if self.name == "omniflow-pg":
            # A fresh file for every table: DELETE would leave every row of earlier rounds
            # behind as a dead version, and each round would start from a worse table.
            database.execute_sql(f"TRUNCATE {', '.join(tables)} RESTART IDENTITY")
        else:
            for table in tables:
                database.execute_sql(f"DELETE FROM {table}")

    def dead_tuples(self):
        return harness.pg_dead_tuples(self.url, "jobs") if self.name == "omniflow-pg" else None

    def enqueue_noops(self, n):
        for start in range(0, n, INSERT_CHUNK):
            insert_many([JobInsert("bench_noop", {}) for _ in range(min(INSERT_CHUNK, n - start))])

    def enqueue_probe(self, i):
        insert("bench_probe", {"i": i})

    def consume(self, workers, stop_event):
        self._bind(pool_size=workers + 8)
        consumer = huey.create_consumer(concurrency={"default": workers}, shutdown_timeout=10)
        harness.consumer_started()
        consumer.start()
        stop_event.wait()
        consumer.stop(graceful=True)

    def close(self):
        from models.base import db

        if db.obj is not None:
            db.close()


def make(name, ctx):
    return OmniflowSystem(name, ctx)
