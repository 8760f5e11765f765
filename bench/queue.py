"""Queue benchmark: Omniflow's job queue against peer queue systems.

    python -m bench.queue [--systems a,b] [--jobs N] [--workers W] [--probes P] [--out PATH]

This module owns the command line, the preconditions (bench-only Python
dependencies, the bench database, Redis), the PostgreSQL commit ceiling, one
fresh subprocess per system (``--one SYSTEM``) and the report (table + JSON).
The measurement itself is ``bench.harness.measure()``; the systems live in
``bench/systems/``.
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
                          probe_timeout_s=args.probe_timeout, probe_budget_s=args.probe_budget)
    module = importlib.import_module(SYSTEMS[args.one])
    system = module.make(args.one, ctx)
    result = harness.measure(args.one, system, ctx)
    print(RESULT_PREFIX + json.dumps(result), flush=True)


def run_subprocess(name, args, tmpdir, dsn, redis_url):
    """Run `--one name` in a fresh interpreter; return (result or None, error)."""
    cmd = [sys.executable, "-m", "bench.queue", "--one", name,
           "--jobs", str(args.jobs), "--workers", str(args.workers),
           "--probes", str(args.probes), "--probe-timeout", str(args.probe_timeout),
           "--probe-budget", str(args.probe_budget),
           "--pg-dsn", dsn, "--redis-url", redis_url, "--tmpdir", tmpdir]
    # A session of its own, so the whole tree (consumer child included) can be
    # checked and killed as one process group.
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=SYSTEM_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return None, "timed out after %d s" % SYSTEM_TIMEOUT_S
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


def _ratio(results, name, ref):
    if ref not in results:
        return None
    return round(results[name]["jobs_per_s"] / results[ref]["jobs_per_s"], 3)


def print_table(results, skipped, ceiling):
    header = ["system", "jobs/s", "x huey-postgres", "x huey-redis",
              "pickup p50 ms", "pickup p99 ms", "notes"]
    rows = []
    for name, r in results.items():
        fmt = lambda x: "-" if x is None else "%.2f" % x  # noqa: E731
        rows.append([name, "%.0f" % r["jobs_per_s"],
                     fmt(_ratio(results, name, "huey-postgres")),
                     fmt(_ratio(results, name, "huey-redis")),
                     "%.1f" % r["pickup_p50_ms"], "%.1f" % r["pickup_p99_ms"], r["notes"]])
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
    print("pg_commit_ceiling_tps: %.0f" % ceiling)


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


def run_all(args):
    t_start = time.monotonic()
    names = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = [n for n in names if n not in SYSTEMS]
    if unknown:
        sys.exit("unknown system(s): %s (known: %s)" % (", ".join(unknown), ", ".join(SYSTEMS)))

    ensure_peer_dependencies()
    dsn = args.pg_dsn or bench_dsn()
    ensure_database(dsn)
    redis_url = args.redis_url
    started_redis = ensure_redis(redis_url) if "huey-redis" in names else None

    skipped = {}
    for name in names:
        if importlib.util.find_spec(SYSTEMS[name]) is None:
            skipped[name] = "%s.py does not exist yet" % SYSTEMS[name].replace(".", "/")

    ceiling, ceiling_method = pg_commit_ceiling(dsn, args.workers)
    log.info("pg commit ceiling: %.0f tps (%s)", ceiling, ceiling_method)

    results = {}
    tmpdir = tempfile.mkdtemp(prefix="omniflow-bench-")
    try:
        for name in names:
            if name in skipped:
                log.info("%s: skipped (%s)", name, skipped[name])
                continue
            log.info("%s: running", name)
            t0 = time.monotonic()
            result, error = run_subprocess(name, args, tmpdir, dsn, redis_url)
            if result is None:
                skipped[name] = "failed: " + error
                log.error("%s: %s", name, error)
            else:
                result["wall_s"] = round(time.monotonic() - t0, 1)
                results[name] = result
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
        if started_redis:
            stop_redis(redis_url)

    wall_s = time.monotonic() - t_start
    data = {
        "jobs": args.jobs,
        "workers": args.workers,
        "probes": args.probes,
        "pg_commit_ceiling_tps": round(ceiling, 1),
        "pg_commit_ceiling_method": ceiling_method,
        "systems": results,  # only systems that actually ran
        "ratios": {name: {"vs_huey_postgres": _ratio(results, name, "huey-postgres"),
                          "vs_huey_redis": _ratio(results, name, "huey-redis")}
                   for name in results},
        "skipped": skipped,
        "machine": machine_info(dsn),
        "wall_s": round(wall_s, 1),
    }
    write_json(args.out, data)
    print()
    print_table(results, skipped, ceiling)
    print("wrote %s; total wall time %.0f s" % (args.out, wall_s))


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m bench.queue", description=__doc__.split("\n")[0])
    parser.add_argument("--systems", default=",".join(SYSTEMS),
                        help="comma-separated subset of: " + ", ".join(SYSTEMS))
    parser.add_argument("--jobs", type=int, default=5000, help="N no-op jobs for the burn-down")
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
