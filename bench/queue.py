"""Queue benchmark: Omniflow's job queue against peer queue systems.

    python -m bench.queue [--systems a,b] [--rounds R] [--min-burn-s S] [--jobs N]
                          [--workers W] [--probes P] [--out PATH]

This module owns the command line, the preconditions (bench-only Python
dependencies, the bench database, Redis), the PostgreSQL commit ceiling, the
rounds (one fresh subprocess per system and round, ``--one SYSTEM``) and the
report (table + JSON). The measurement itself is ``bench.harness.measure()``;
the systems live in ``bench/systems/``.

On a shared machine one short run per system measures the neighbours as much
as the system: a calibration burn-down first sizes each system's N so that
its burn-down lasts at least S seconds, then R rounds run every system once
each, interleaved (the order rotating each round), so a busy minute falls on
all systems alike; the figures are the medians over the rounds, with min and
max beside them.
"""

import argparse
import importlib
import importlib.metadata
import importlib.util
import json
import logging
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from urllib.parse import quote, urlsplit, urlunsplit

# System name -> module implementing the contract in bench/harness.py.
# Imported lazily, in the system's own subprocess only.
SYSTEMS = {
    "huey-postgres": "bench.systems.huey_systems",
    "huey-sql-pg": "bench.systems.huey_systems",
    "huey-sqlite": "bench.systems.huey_systems",
    "huey-redis": "bench.systems.huey_systems",
    "procrastinate-pg": "bench.systems.procrastinate_system",
    "omniflow-pg": "bench.systems.omniflow_engine",
    "omniflow-sqlite": "bench.systems.omniflow_engine",
}

BENCH_DB = "omniflow_bench"
DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/" + BENCH_DB
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REQUIREMENTS = os.path.join(ROOT, "bench", "requirements.txt")
# Modules of bench/requirements.txt (peers only; not application dependencies).
PEER_IMPORTS = ["psycopg", "psycopg_pool", "procrastinate", "redis"]
RESULT_PREFIX = "RESULT "
SYSTEM_TIMEOUT_S = 240  # hard limit for one system's subprocess
BURN_TIMEOUT_S = 120  # a burn-down not done in this long fails its round
CALIBRATION_JOBS = 3000  # the calibration burn-down's N (its rate sizes the rounds' N)
# N is sized for this multiple of --min-burn-s at the calibrated rate: a round
# can run faster than the calibration did (a quieter minute, warm caches, and
# a short calibration burn-down counts its ramp-up against the rate).
BURN_MARGIN = 2.0
JOBS_STEP = 1000  # N is rounded up to a multiple of this

log = logging.getLogger("bench")


# --- preconditions ------------------------------------------------------------


def ensure_peer_dependencies():
    missing = [m for m in PEER_IMPORTS if importlib.util.find_spec(m) is None]
    if not missing:
        return
    log.info("installing bench requirements (missing: %s)", ", ".join(missing))
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-r", REQUIREMENTS], check=True)
    importlib.invalidate_caches()


def bench_dsn():
    """URL of the bench database on the server named by the environment."""
    base = os.environ.get("BENCH_DATABASE_URL") or os.environ.get("DATABASE_URL")
    if not base:
        return DEFAULT_DSN
    return with_database(base, BENCH_DB)


def with_database(dsn, dbname):
    """The same server and credentials as `dsn`, database `dbname`, as a URL."""
    if "://" not in dsn:  # libpq key=value form
        from psycopg2.extensions import parse_dsn

        p = parse_dsn(dsn)
        auth = quote(p.get("user", ""), safe="")
        if p.get("password"):
            auth += ":" + quote(p["password"], safe="")
        host = p.get("host", "127.0.0.1") + (":" + p["port"] if p.get("port") else "")
        return "postgresql://%s%s/%s" % (auth + "@" if auth else "", host, dbname)
    parts = urlsplit(dsn)
    # 'postgresql+psycopg2://' (SQLAlchemy style) is not understood by libpq.
    return urlunsplit(("postgresql", parts.netloc, "/" + dbname, parts.query, ""))


def ensure_database(dsn):
    """Create the bench database if it is missing."""
    import psycopg2

    try:
        psycopg2.connect(dsn).close()
        return
    except psycopg2.OperationalError as exc:
        if "does not exist" not in str(exc):
            raise
    conn = psycopg2.connect(with_database(dsn, "postgres"))
    try:
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute('CREATE DATABASE "%s"' % BENCH_DB)
        log.info("created database %s", BENCH_DB)
    finally:
        conn.close()


def ensure_redis(url):
    """Start a throwaway redis-server if nothing answers; return its port if we did."""
    import redis

    client = redis.Redis.from_url(url, socket_connect_timeout=1)
    try:
        client.ping()
        return None
    except redis.ConnectionError:
        pass
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 6379
    log.info("redis not answering at %s:%s, starting redis-server", host, port)
    subprocess.run(["redis-server", "--daemonize", "yes", "--bind", host, "--port", str(port),
                    "--save", "", "--appendonly", "no"], check=True, stdout=subprocess.DEVNULL)
    for _ in range(50):
        try:
            client.ping()
            return port
        except redis.ConnectionError:
            time.sleep(0.1)
    raise RuntimeError("redis-server did not come up on %s:%s" % (host, port))


def stop_redis(url):
    import redis

    try:
        redis.Redis.from_url(url).shutdown(nosave=True)
    except redis.ConnectionError:
        pass  # SHUTDOWN closes the connection: that is success


# --- PostgreSQL commit ceiling ----------------------------------------------------


def pg_commit_ceiling(dsn, clients, seconds=5):
    """Single-statement autocommit INSERTs per second with `clients` clients."""
    import psycopg2

    conn = psycopg2.connect(dsn)
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE IF NOT EXISTS bench_ceiling "
                    "(id bigserial PRIMARY KEY, v integer NOT NULL)")
        cur.execute("TRUNCATE bench_ceiling")
    conn.close()
    pgbench = shutil.which("pgbench")
    if pgbench:
        with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as f:
            f.write("INSERT INTO bench_ceiling (v) VALUES (1);\n")
        try:
            out = subprocess.run(
                [pgbench, "-n", "-c", str(clients), "-j", str(min(2, clients)),
                 "-T", str(seconds), "-f", f.name, dsn],
                check=True, capture_output=True, text=True).stdout
        finally:
            os.unlink(f.name)
        m = re.search(r"^tps = ([0-9.]+)", out, re.M)
        if not m:
            raise RuntimeError("no tps line in pgbench output:\n" + out)
        return float(m.group(1)), "pgbench -n -c %d -j %d -T %d" % (clients, min(2, clients), seconds)

    # Fallback: the same load from Python threads.
    counts = [0] * clients
    deadline = time.monotonic() + seconds

    def client(k):
        c = psycopg2.connect(dsn)
        c.autocommit = True
        with c.cursor() as cur:
            while time.monotonic() < deadline:
                cur.execute("INSERT INTO bench_ceiling (v) VALUES (1)")
                counts[k] += 1
        c.close()

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(counts) / (time.monotonic() - t0), "%d psycopg2 threads, %d s" % (clients, seconds)


# --- one system, in its own process -------------------------------------------


def run_one(args):
    """`--one SYSTEM`: measure one system and print its result as one JSON line."""
    from bench import harness

    ctx = harness.Context(pg_dsn=args.pg_dsn, tmpdir=args.tmpdir, jobs=args.jobs,
                          workers=args.workers, probes=args.probes, redis_url=args.redis_url,
                          probe_timeout_s=args.probe_timeout, probe_budget_s=args.probe_budget,
                          burn_timeout_s=args.burn_timeout)
    module = importlib.import_module(SYSTEMS[args.one])
    system = module.make(args.one, ctx)
    result = harness.measure(args.one, system, ctx)
    print(RESULT_PREFIX + json.dumps(result), flush=True)


def run_subprocess(name, args, tmpdir, dsn, redis_url, jobs, probes, timeout_s=SYSTEM_TIMEOUT_S,
                   burn_timeout_s=None):
    """Run `--one name` in a fresh interpreter; return (result or None, error)."""
    cmd = [sys.executable, "-m", "bench.queue", "--one", name,
           "--jobs", str(jobs), "--workers", str(args.workers),
           "--probes", str(probes), "--probe-timeout", str(args.probe_timeout),
           "--probe-budget", str(args.probe_budget),
           "--burn-timeout", str(burn_timeout_s or BURN_TIMEOUT_S),
           "--pg-dsn", dsn, "--redis-url", redis_url, "--tmpdir", tmpdir]
    # A session of its own, so the whole tree (consumer child included) can be
    # checked and killed as one process group.
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return None, "timed out after %d s" % timeout_s
    finally:
        _reap_group(proc.pid, name)
    for line in out.splitlines():
        if line.startswith(RESULT_PREFIX):
            return json.loads(line[len(RESULT_PREFIX):]), None
    return None, "exit code %s, no result (see stderr above)" % proc.returncode


def _reap_group(pgid, name):
    """Kill anything of that system's process group still alive (nothing should be)."""
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return
    log.warning("%s: processes left in group %d, killing them", name, pgid)
    os.killpg(pgid, signal.SIGKILL)


# --- report -------------------------------------------------------------------


def median(values):
    s = sorted(values)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2.0


def spread(values, digits=1):
    """{median, min, max} of a list of figures (the report's form of every measured figure)."""
    return {"median": round(median(values), digits), "min": round(min(values), digits),
            "max": round(max(values), digits)}


def summarise(name, rounds):
    """One system's figures over its successful rounds: medians, with min/max beside them."""
    rates = [r["jobs_per_s"] for r in rounds]
    p50s = [r["pickup_p50_ms"] for r in rounds if r["pickup_p50_ms"] is not None]
    p99s = [r["pickup_p99_ms"] for r in rounds if r["pickup_p99_ms"] is not None]
    notes = []
    for r in rounds:  # each distinct note once, in the order first seen
        for note in r["notes"].split("; "):
            if note and note not in notes:
                notes.append(note)
    out = {
        "jobs_per_s": round(median(rates), 1),
        "jobs_per_s_min": round(min(rates), 1),
        "jobs_per_s_max": round(max(rates), 1),
        "pickup_p50_ms": round(median(p50s), 2) if p50s else None,
        "pickup_p99_ms": round(median(p99s), 2) if p99s else None,
        "pickup_p50_ms_range": [min(p50s), max(p50s)] if p50s else None,
        "pickup_p99_ms_range": [min(p99s), max(p99s)] if p99s else None,
        "burn_down_s_min": min(r["burn_down_s"] for r in rounds),
        "rounds_ok": len(rounds),
        # Each round's table as it started: no dead row versions left by an earlier round or run.
        "start_dead_tuples": [r.get("start_dead_tuples") for r in rounds],
        "notes": "; ".join(notes),
    }
    return out


def _ratio(results, name, ref):
    if ref not in results:
        return None
    return round(results[name]["jobs_per_s"] / results[ref]["jobs_per_s"], 3)


def _round_ratios(per_round, name, ref):
    """The ratio name/ref within each round both ran in: a busy round slows both alike."""
    ratios = [r[name]["jobs_per_s"] / r[ref]["jobs_per_s"]
              for r in per_round if name in r and ref in r]
    return spread(ratios, 3) if ratios else None


def print_table(results, skipped, ceiling):
    header = ["system", "N", "jobs/s (median)", "min", "max", "x huey-postgres", "x huey-redis",
              "pickup p50 ms", "pickup p99 ms", "notes"]
    rows = []
    fmt = lambda x: "-" if x is None else "%.2f" % x  # noqa: E731
    fmt1 = lambda x: "-" if x is None else "%.1f" % x  # noqa: E731
    for name, r in results.items():
        rows.append([name, str(r["jobs"]), "%.0f" % r["jobs_per_s"], "%.0f" % r["jobs_per_s_min"],
                     "%.0f" % r["jobs_per_s_max"],
                     fmt(_ratio(results, name, "huey-postgres")),
                     fmt(_ratio(results, name, "huey-redis")),
                     fmt1(r["pickup_p50_ms"]), fmt1(r["pickup_p99_ms"]), r["notes"]])
    widths = [max(len(str(row[i])) for row in rows + [header]) for i in range(len(header) - 1)]
    line = lambda row: "  ".join(  # noqa: E731
        [str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(row, widths))]
        + [str(row[-1])])
    print(line(header))
    print(line(["-" * w for w in widths] + ["-----"]))
    for row in rows:
        print(line(row))
    for name, reason in skipped.items():
        print("%s: skipped (%s)" % (name, reason))
    print("pg_commit_ceiling_tps: median %.0f (min %.0f, max %.0f)"
          % (ceiling["median"], ceiling["min"], ceiling["max"]))


def load_average():
    """The 1-minute load average: how busy the shared machine was."""
    return round(os.getloadavg()[0], 2)


def machine_info(dsn):
    import psycopg2

    info = {"platform": platform.platform(), "python": platform.python_version(),
            "cpus": os.cpu_count()}
    conn = psycopg2.connect(dsn)
    with conn.cursor() as cur:
        cur.execute("SHOW server_version")
        info["postgres"] = cur.fetchone()[0]
        cur.execute("SHOW synchronous_commit")
        info["postgres_synchronous_commit"] = cur.fetchone()[0]
    conn.close()
    for dist in ("huey", "peewee", "procrastinate", "psycopg", "psycopg2-binary", "redis"):
        try:
            info[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            pass
    return info


def write_json(path, data):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=2)
        f.write("\n")
    os.replace(tmp, path)


# --- main ---------------------------------------------------------------------


def sized_jobs(rate, args):
    """N for a system whose calibration burned down `rate` jobs/s: a burn-down of >= --min-burn-s."""
    wanted = rate * args.min_burn_s * BURN_MARGIN
    return max(args.jobs, int(-(-wanted // JOBS_STEP)) * JOBS_STEP)


def run_all(args):
    t_start = time.monotonic()
    names = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = [n for n in names if n not in SYSTEMS]
    if unknown:
        sys.exit("unknown system(s): %s (known: %s)" % (", ".join(unknown), ", ".join(SYSTEMS)))
    if args.rounds < 1:
        sys.exit("--rounds must be at least 1")

    ensure_peer_dependencies()
    dsn = args.pg_dsn or bench_dsn()
    ensure_database(dsn)
    redis_url = args.redis_url
    started_redis = ensure_redis(redis_url) if "huey-redis" in names else None

    skipped = {}
    for name in names:
        if importlib.util.find_spec(SYSTEMS[name]) is None:
            skipped[name] = "%s.py does not exist yet" % SYSTEMS[name].replace(".", "/")
    running = [n for n in names if n not in skipped]

    jobs = {}  # system -> N for its rounds
    calibration = {}
    per_round = []  # [{system: result}] per round
    errors = {name: [] for name in running}
    ceilings, ceiling_method = [], None
    loads = [load_average()]
    tmpdir = tempfile.mkdtemp(prefix="omniflow-bench-")
    try:
        # Calibration: a short burn-down (no probes) per system; its rate sizes N.
        # It doubles as the warm-up (first imports, PostgreSQL's caches).
        for name in running:
            if args.jobs_fixed:
                jobs[name] = args.jobs
                continue
            result, error = run_subprocess(name, args, tmpdir, dsn, redis_url, CALIBRATION_JOBS, 0)
            if result is None:
                skipped[name] = "failed in calibration: " + error
                log.error("%s: calibration: %s", name, error)
                continue
            jobs[name] = sized_jobs(result["jobs_per_s"], args)
            calibration[name] = {"jobs": CALIBRATION_JOBS, "jobs_per_s": result["jobs_per_s"]}
            log.info("%s: calibrated at %.0f jobs/s: N = %d", name, result["jobs_per_s"], jobs[name])
        running = [n for n in running if n in jobs]

        for k in range(args.rounds):
            ceiling, ceiling_method = pg_commit_ceiling(dsn, args.workers)
            ceilings.append(ceiling)
            log.info("round %d: pg commit ceiling %.0f tps (%s)", k + 1, ceiling, ceiling_method)
            # The order rotates, so no system always runs first (or right after a heavy one).
            order = running[k % len(running):] + running[:k % len(running)] if running else []
            this_round = {}
            for name in order:
                load = load_average()
                loads.append(load)
                log.info("round %d: %s (N %d, load %.2f)", k + 1, name, jobs[name], load)
                t0 = time.monotonic()
                result, error = run_subprocess(name, args, tmpdir, dsn, redis_url, jobs[name], args.probes)
                if result is None:
                    errors[name].append("round %d: %s" % (k + 1, error))
                    log.error("%s: round %d: %s", name, k + 1, error)
                    continue
                result["wall_s"] = round(time.monotonic() - t0, 1)
                result["round"] = k + 1
                result["load_1min"] = load
                this_round[name] = result
            per_round.append(this_round)
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
        if started_redis:
            stop_redis(redis_url)
    loads.append(load_average())

    results = {}
    for name in running:
        rounds = [r[name] for r in per_round if name in r]
        if not rounds:
            skipped[name] = "failed in every round: " + " | ".join(errors[name])
            continue
        results[name] = summarise(name, rounds)
        results[name]["jobs"] = jobs[name]
        if errors[name]:
            results[name]["errors"] = errors[name]
        if results[name]["burn_down_s_min"] < args.min_burn_s:
            results[name]["notes"] += "; a burn-down lasted %.2f s, under %.0f s" % (
                results[name]["burn_down_s_min"], args.min_burn_s)
        results[name]["rounds"] = rounds

    wall_s = time.monotonic() - t_start
    ceiling_spread = spread(ceilings) if ceilings else {"median": 0, "min": 0, "max": 0}
    data = {
        "rounds": args.rounds,
        "min_burn_s": args.min_burn_s,
        "workers": args.workers,
        "probes": args.probes,
        "figures": "per system, jobs_per_s and pickup_*_ms are medians over the rounds; "
                   "jobs_per_s_min/max beside them; every system has its own N (jobs)",
        "pg_commit_ceiling_tps": ceiling_spread["median"],
        "pg_commit_ceiling_tps_range": [ceiling_spread["min"], ceiling_spread["max"]],
        "pg_commit_ceiling_method": ceiling_method,
        "calibration": calibration,
        "systems": results,  # only systems that actually ran
        "ratios": {name: {"vs_huey_postgres": _ratio(results, name, "huey-postgres"),
                          "vs_huey_postgres_per_round": _round_ratios(per_round, name, "huey-postgres"),
                          "vs_huey_redis": _ratio(results, name, "huey-redis"),
                          "vs_huey_redis_per_round": _round_ratios(per_round, name, "huey-redis")}
                   for name in results},
        "skipped": skipped,
        "load_1min": spread(loads, 2),
        "machine": machine_info(dsn),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "wall_s": round(wall_s, 1),
    }
    write_json(args.out, data)
    print()
    print_table(results, skipped, ceiling_spread)
    print("load average (1 min) during the run: median %.2f, min %.2f, max %.2f on %d cpus"
          % (data["load_1min"]["median"], data["load_1min"]["min"], data["load_1min"]["max"],
             os.cpu_count()))
    print("wrote %s; total wall time %.0f s" % (args.out, wall_s))


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m bench.queue", description=__doc__.split("\n")[0])
    parser.add_argument("--systems", default=",".join(SYSTEMS),
                        help="comma-separated subset of: " + ", ".join(SYSTEMS))
    parser.add_argument("--rounds", type=int, default=3,
                        help="R rounds, every system once per round, interleaved; medians reported")
    parser.add_argument("--min-burn-s", type=float, default=3.0,
                        help="size each system's N so its burn-down lasts at least this long")
    parser.add_argument("--jobs", type=int, default=5000,
                        help="N no-op jobs for the burn-down: the least N (raised per system by "
                             "the calibration), or with --jobs-fixed every system's N")
    parser.add_argument("--jobs-fixed", action="store_true",
                        help="no calibration: every system burns down exactly --jobs jobs")
    parser.add_argument("--workers", type=int, default=8, help="W consumer threads")
    parser.add_argument("--probes", type=int, default=100, help="P idle pickup probes")
    parser.add_argument("--out", default=os.path.join("bench", "results", "queue.json"))
    parser.add_argument("--probe-timeout", type=float, default=15.0,
                        help="seconds to wait for one probe to start")
    parser.add_argument("--probe-budget", type=float, default=30.0,
                        help="seconds allowed for one system's probe phase")
    parser.add_argument("--pg-dsn", default=None,
                        help="bench database URL (default: from BENCH_DATABASE_URL/DATABASE_URL)")
    parser.add_argument("--redis-url", default=os.environ.get("BENCH_REDIS_URL", DEFAULT_REDIS_URL))
    parser.add_argument("--one", choices=list(SYSTEMS), help=argparse.SUPPRESS)
    parser.add_argument("--tmpdir", help=argparse.SUPPRESS)
    parser.add_argument("--burn-timeout", type=float, default=BURN_TIMEOUT_S, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(processName)s %(message)s", datefmt="%H:%M:%S")
    # Peers log every job at INFO; keep their warnings and errors only.
    for noisy in ("huey", "procrastinate"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    if args.one:
        run_one(args)
    else:
        run_all(args)


if __name__ == "__main__":
    main()
