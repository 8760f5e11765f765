"""The Procrastinate peer: procrastinate-pg.

Procrastinate's App with its PsycopgConnector (psycopg 3 + psycopg_pool) on the
bench PostgreSQL, its worker with concurrency=W and its default
LISTEN/NOTIFY. Its tables, types and functions live in their own schema of the
bench database (search_path set on every pooled connection), recreated by
prepare() from the installed version's schema.sql.
"""

import asyncio
import contextlib

from bench import harness

SCHEMA = "bench_procrastinate"

NOTES = ("LISTEN/NOTIFY + poll every 5 s (fetch_job_polling_interval default); "
         "asyncio worker, concurrency %d; sync job bodies run in asyncio's default "
         "thread executor; pool of 4 connections (psycopg_pool default); "
         "finished jobs kept (delete_jobs=never default)")


def _build_app(dsn):
    """A fresh App with the two bench tasks; one in the parent, one in the child."""
    import procrastinate

    connector = procrastinate.PsycopgConnector(
        conninfo=dsn, kwargs={"options": "-c search_path=%s" % SCHEMA})
    app = procrastinate.App(connector=connector)

    @app.task(name="bench_noop")
    def noop():
        harness.noop_done()

    @app.task(name="bench_probe")
    def probe(i):
        harness.probe_started(i)

    return app, noop, probe


class ProcrastinateSystem:
    def __init__(self, ctx):
        self.ctx = ctx
        self.notes = NOTES % ctx.workers
        self._parent = None  # (app, noop, probe), opened synchronously in the parent

    def prepare(self):
        harness.reset_pg_schema(self.ctx.pg_dsn, SCHEMA)
        app, noop, probe = _build_app(self.ctx.pg_dsn)
        app.open()  # sync connector: a psycopg_pool.ConnectionPool
        app.schema_manager.apply_schema()
        self._parent = (app, noop, probe)

    def enqueue_noops(self, n):
        _, noop, _ = self._parent
        # batch_defer: one INSERT of many rows (Procrastinate's bulk defer).
        for start in range(0, n, 1000):
            noop.batch_defer(*({} for _ in range(start, min(n, start + 1000))))

    def enqueue_probe(self, i):
        _, _, probe = self._parent
        probe.defer(i=i)  # autocommit: committed on return

    def consume(self, workers, stop_event):
        asyncio.run(self._consume(workers, stop_event))

    async def _consume(self, workers, stop_event):
        app, _, _ = _build_app(self.ctx.pg_dsn)
        async with app.open_async():
            harness.consumer_started()
            worker = asyncio.create_task(app.run_worker_async(
                concurrency=workers,
                # The harness stops the worker (by cancelling it), not signals.
                install_signal_handlers=False))
            # Poll the multiprocessing.Event from the loop: waiting on it in an
            # executor thread would take a thread from the job executor.
            while not stop_event.is_set() and not worker.done():
                await asyncio.sleep(0.05)
            worker.cancel()  # Procrastinate turns this into a graceful stop
            with contextlib.suppress(asyncio.CancelledError):
                await worker

    def close(self):
        if self._parent:
            self._parent[0].close()


def make(name, ctx):
    return ProcrastinateSystem(ctx)
