"""Shared state and the measurement procedure of the queue benchmark.

This module owns: the counters shared between the benchmark parent and the
forked consumer child, the three functions that job bodies and consumers call
(``noop_done``, ``probe_started``, ``consumer_started``), the ``Context`` handed
to every system, and ``measure()``, the procedure applied identically to
every system. ``bench/queue.py`` owns the command line, the services, the
per-system subprocesses and the report.

Contract for a system module (``bench/systems/<module>.py``)
============================================================

A module named in ``SYSTEMS`` of ``bench/queue.py`` provides::

    def make(name: str, ctx: Context) -> System

``name`` is the system name (one module may serve several, e.g.
``omniflow-pg`` and ``omniflow-sqlite``). ``ctx`` has at least:

    ctx.pg_dsn    postgres URL of the bench database ``omniflow_bench``
    ctx.tmpdir    a temp dir for this run (SQLite files go here)
    ctx.redis_url redis URL (only huey-redis uses it)
    ctx.jobs      N, ctx.workers  W, ctx.probes  P

``make()`` must do no I/O: the consumer child is forked right after it.

The returned object has::

    notes: str                                  # optional: a short description of how
                                                # the system waits for work, e.g.
                                                # "polling, initial_delay 0.1 s"
    prepare(self) -> None                       # parent: create/clean this system's
                                                # tables/keys (its own tables only)
    enqueue_noops(self, n: int) -> None         # parent: preload n no-op jobs (not
                                                # timed; bulk insert if the system has one)
    enqueue_probe(self, i: int) -> None         # parent: enqueue one probe job;
                                                # committed when it returns
    consume(self, workers: int, stop_event) -> None
                                                # forked child: run the consumer with
                                                # `workers` threads until stop_event
                                                # (a multiprocessing.Event) is set,
                                                # then stop it and return
    close(self) -> None                         # optional: parent, at the end
    dead_tuples(self) -> int | None             # optional: parent, dead row versions in
                                                # the system's job table now (PostgreSQL)

Job bodies (the same for every system):

    no-op job:  bench.harness.noop_done()
    probe job:  bench.harness.probe_started(i)

``consume()`` must call ``bench.harness.consumer_started()`` right before it
starts its consumer (after building its own objects): that instant is the start
of the burn-down clock.

Process model: ``measure()`` forks the consumer child (multiprocessing 'fork')
right after ``make()``, *before* ``prepare()``, and lets it call ``consume()``
only once the no-op jobs are preloaded. So the parent holds no connection or
thread at fork time, and ``consume()`` must open its own connections; it must
not rely on anything ``prepare()`` or ``enqueue_*()`` created in the parent.
The job bodies run in the child and reach the parent's counters through the
shared memory created here before the fork.
"""

import dataclasses
import logging
import multiprocessing
import random
import time

log = logging.getLogger("bench")

# Everything below relies on fork: the shared values are created in the parent
# and inherited by the consumer child as module globals.
_mp = multiprocessing.get_context("fork")

_target = 0  # N: the no-op count at which the burn-down clock stops.
_jobs_done = None  # Value('q'): no-op jobs executed.
_burn_start = None  # Value('d'): time.time() set by consumer_started().
_burn_end = None  # Value('d'): time.time() when _jobs_done reached _target.
_go_time = None  # Value('d'): when the child was told to start (fallback clock).
_probe_starts = None  # Array('d', P): time.time() a probe job started, 0 = not yet.
_probe_runs = None  # Value('q'): probe executions (to catch duplicates).
_first_done = None  # Value('d'): time.time() the first no-op job finished.
_tenth_ends = None  # Array('d', 10): time.time() the k-th tenth of the no-op jobs finished.


@dataclasses.dataclass
class Context:
    pg_dsn: str
    tmpdir: str
    jobs: int = 5000
    workers: int = 8
    probes: int = 100
    redis_url: str = "redis://127.0.0.1:6379/0"
    idle_s: float = 1.5  # how long the consumer sits idle before the probes
    probe_timeout_s: float = 15.0
    probe_budget_s: float = 30.0  # wall time allowed for one system's probe phase
    burn_timeout_s: float = 120.0
    seed: int = 20240601


# --- called from job bodies and consumers (in the consumer child) -----------


def noop_done():
    """Body of every no-op job: count it; stop the clock at the N-th."""
    with _jobs_done.get_lock():
        _jobs_done.value += 1
        # Stopped inside the lock: the parent, which reads the count, must
        # never see the N-th job counted before the clock stopped.
        done = _jobs_done.value
        if done == 1:
            _first_done.value = time.time()
        if done % _tenth_size() == 0 and done // _tenth_size() <= 10:
            _tenth_ends[done // _tenth_size() - 1] = time.time()
        if done == _target:
            _burn_end.value = time.time()


def _tenth_size():
    return max(1, _target // 10)


def tenth_rates(target, first_done, tenth_ends):
    """Jobs/s in each tenth of a burn-down of `target` jobs; the first from the first job done.

    The consumer's start-up is not counted against the first tenth: comparing
    the last tenth with the first says how the rate held, not how fast it started."""
    if target < 10 or not all(tenth_ends):
        return []
    size = target // 10
    starts = [first_done] + list(tenth_ends[:-1])
    counts = [size - 1] + [size] * 9
    return [round(n / (end - start), 1) if end > start else None for n, start, end in zip(counts, starts, tenth_ends)]


def probe_started(i):
    """Body of probe job i: record when it started (first run only)."""
    now = time.time()
    with _probe_runs.get_lock():
        _probe_runs.value += 1
    if _probe_starts[i] == 0.0:
        _probe_starts[i] = now


def consumer_started():
    """Called by consume() right before it starts its consumer."""
    _burn_start.value = time.time()


# --- the measurement (parent side) -------------------------------------------


class BenchError(Exception):
    pass


def _init_shared(jobs, probes):
    global _target, _jobs_done, _burn_start, _burn_end, _go_time
    global _probe_starts, _probe_runs, _first_done, _tenth_ends
    _target = jobs
    _jobs_done = _mp.Value("q", 0)
    _burn_start = _mp.Value("d", 0.0)
    _burn_end = _mp.Value("d", 0.0)
    _go_time = _mp.Value("d", 0.0)
    _probe_starts = _mp.Array("d", max(probes, 1))
    _probe_runs = _mp.Value("q", 0)
    _first_done = _mp.Value("d", 0.0)
    _tenth_ends = _mp.Array("d", 10)


def _consumer_child(system, workers, go, stop):
    # Wait until the parent has prepared and preloaded; give up if it stops us.
    while not go.wait(0.1):
        if stop.is_set():
            return
    _go_time.value = time.time()
    system.consume(workers, stop)


def pg_dead_tuples(dsn, table, schema="public"):
    """Dead row versions of `schema.table`: counted by pgstattuple where it can be installed
    (exact, now), else as PostgreSQL's statistics count them (a second or so behind)."""
    import psycopg2

    conn = psycopg2.connect(dsn)
    conn.autocommit = True
    try:
        with conn.cursor() as cur:
            try:
                cur.execute("CREATE EXTENSION IF NOT EXISTS pgstattuple")
                cur.execute("SELECT dead_tuple_count FROM pgstattuple(%s)", ('"%s"."%s"' % (schema, table),))
            except psycopg2.Error:
                cur.execute("SELECT n_dead_tup FROM pg_stat_user_tables WHERE schemaname = %s AND relname = %s",
                            (schema, table))
            row = cur.fetchone()
    finally:
        conn.close()
    return row[0] if row else None


def reset_pg_schema(dsn, schema):
    """Drop and recreate a PostgreSQL schema: how the PG peers clean up.

    Each PG peer keeps its tables in its own schema of the bench database
    (via search_path), so cleaning is exact and never touches other tables.
    """
    import psycopg2  # an application dependency, always installed

    conn = psycopg2.connect(dsn)
    try:
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute('DROP SCHEMA IF EXISTS "%s" CASCADE' % schema)
            cur.execute('CREATE SCHEMA "%s"' % schema)
    finally:
        conn.close()


def percentile(values, q):
    """Linear-interpolated percentile (same definition as numpy's default)."""
    if not values:
        return float("nan")
    s = sorted(values)
    pos = (len(s) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def _stop_child(child, stop, timeout=30.0):
    """Ask the consumer to stop, then make sure the process is gone."""
    stop.set()
    child.join(timeout)
    if child.is_alive():
        log.warning("consumer child %s did not stop in %.0f s, terminating", child.pid, timeout)
        child.terminate()
        child.join(5)
    if child.is_alive():
        child.kill()
        child.join(5)
    return child.exitcode


def measure(name, system, ctx):
    """Burn-down and idle pickup latency of one system; returns a result dict."""
    _init_shared(ctx.jobs, ctx.probes)
    notes = [getattr(system, "notes", "") or ""]
    go, stop = _mp.Event(), _mp.Event()
    child = _mp.Process(target=_consumer_child, args=(system, ctx.workers, go, stop),
                        name="bench-consumer-" + name)
    # Forked before prepare(): the parent has no connections or threads yet.
    child.start()
    try:
        system.prepare()
        start_dead = system.dead_tuples() if hasattr(system, "dead_tuples") else None
        t0 = time.monotonic()
        system.enqueue_noops(ctx.jobs)
        preload_s = time.monotonic() - t0
        log.info("%s: preloaded %d no-op jobs in %.1f s", name, ctx.jobs, preload_s)

        # 1. Burn-down.
        go.set()
        deadline = time.monotonic() + ctx.burn_timeout_s
        while _jobs_done.value < ctx.jobs:
            if not child.is_alive():
                raise BenchError("consumer exited (code %s) after %d of %d jobs"
                                 % (child.exitcode, _jobs_done.value, ctx.jobs))
            if time.monotonic() > deadline:
                raise BenchError("burn-down timed out after %.0f s with %d of %d jobs done"
                                 % (ctx.burn_timeout_s, _jobs_done.value, ctx.jobs))
            time.sleep(0.005)
        start = _burn_start.value
        if start == 0.0:
            start = _go_time.value
            notes.append("consumer_started() not called: clock started at fork release")
        elapsed = _burn_end.value - start
        jobs_per_s = ctx.jobs / elapsed
        log.info("%s: burn-down %d jobs in %.2f s = %.0f jobs/s",
                 name, ctx.jobs, elapsed, jobs_per_s)
        tenths = tenth_rates(ctx.jobs, _first_done.value, list(_tenth_ends))
        end_dead = system.dead_tuples() if hasattr(system, "dead_tuples") else None

        # 2. Idle pickup latency: let the consumer go idle, then probe one by one
        # (none in a calibration run, which only sizes N).
        if ctx.probes:
            time.sleep(ctx.idle_s)
        rng = random.Random(ctx.seed)
        latencies = []
        timeouts = in_a_row = 0
        phase_start = time.monotonic()
        for i in range(ctx.probes):
            t_enqueue = time.time()  # before the enqueue, so its commit counts
            system.enqueue_probe(i)
            deadline = time.monotonic() + ctx.probe_timeout_s
            while _probe_starts[i] == 0.0:
                if time.monotonic() > deadline or not child.is_alive():
                    break
                time.sleep(0.0005)
            if not child.is_alive():
                raise BenchError("consumer exited (code %s) during probe %d" % (child.exitcode, i))
            started = _probe_starts[i]
            if started == 0.0:
                timeouts += 1
                in_a_row += 1
                latencies.append(ctx.probe_timeout_s * 1000.0)
                if in_a_row == 3:  # the consumer is not picking up: stop wasting time
                    notes.append("probing abandoned after 3 timeouts in a row")
                    break
            else:
                in_a_row = 0
                latencies.append((started - t_enqueue) * 1000.0)
            # Keep the run within budget when a peer's idle pickup is slow.
            spent = time.monotonic() - phase_start
            left = ctx.probes - (i + 1)
            if left and spent + spent / (i + 1) * left > ctx.probe_budget_s and i + 1 >= 10:
                notes.append("probes reduced to %d of %d (slow idle pickup, %.0f s budget)"
                             % (i + 1, ctx.probes, ctx.probe_budget_s))
                break
            time.sleep(rng.uniform(0.020, 0.060))
        if timeouts:
            notes.append("%d probe(s) timed out, counted as %.0f ms"
                         % (timeouts, ctx.probe_timeout_s * 1000))
        p50 = percentile(latencies, 50) if latencies else None
        p99 = percentile(latencies, 99) if latencies else None
        if latencies:
            log.info("%s: %d probes, pickup p50 %.1f ms, p99 %.1f ms",
                     name, len(latencies), p50, p99)
    finally:
        exitcode = _stop_child(child, stop)
        if hasattr(system, "close"):
            system.close()

    # 3. Every job ran exactly once? (Read after the child is gone, so late
    # duplicates are counted too.)
    executed = _jobs_done.value
    probe_runs = _probe_runs.value
    if executed != ctx.jobs:
        notes.append("executed %d no-op jobs, expected %d" % (executed, ctx.jobs))
    if probe_runs > len(latencies):  # fewer is only the timed-out probes, noted above
        notes.append("probe jobs ran %d times for %d probes sent" % (probe_runs, len(latencies)))
    if exitcode != 0:
        notes.append("consumer exit code %s" % exitcode)
    return {
        "jobs_per_s": round(jobs_per_s, 1),
        "pickup_p50_ms": None if p50 is None else round(p50, 2),
        "pickup_p99_ms": None if p99 is None else round(p99, 2),
        "notes": "; ".join(n for n in notes if n),
        "burn_down_s": round(elapsed, 3),
        "executed": executed,
        "probes": len(latencies),
        "probe_timeouts": timeouts,
        "preload_s": round(preload_s, 2),
        "start_dead_tuples": start_dead,
        "end_dead_tuples": end_dead,
        "tenths": tenths,
        "end_to_start": round(tenths[-1] / tenths[0], 3) if tenths and tenths[0] and tenths[-1] else None,
    }
