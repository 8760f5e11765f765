"""Load on the admin API's dead-letter view with 1 000 000 job rows in PostgreSQL.

    python -m bench.admin_load [--rows 1000000] [--dead-share 0.01] [--seconds 20]
                               [--clients 8] [--out bench/results/admin_load.json]

A fresh database gets `rows` job rows (a `dead-share` of them discarded or
cancelled, the rest completed), is analysed, and the plan of the route's
query is printed. Then `python omniflow.py web` serves it and `clients`
keep-alive connections, spread over two load processes, ask
GET /v1/admin/jobs?state=dead_letter back to back for `seconds`: requests per
second, p50 and p99 latency. The clients share the 2-core machine with the
server and PostgreSQL, so the figures are a floor.
"""

import argparse
import json
import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg2

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "bench" / "results" / "admin_load.json"
BENCH_DB = "omniflow_admin_load"
TOKEN = "bench-operator-token-0123456789"
ROUTE = "/v1/admin/jobs?state=dead_letter"


def fresh_database(server_url):
    from bench.chaos import _fresh_pg_database

    return _fresh_pg_database(server_url, BENCH_DB)


def fill(url, rows, dead_share):
    import migrations
    from config.database import open_database
    from config.settings import parse_database_url

    database = open_database(parse_database_url(url))
    migrations.apply(database)
    database.close()
    every = max(1, round(1 / dead_share)) if dead_share else rows + 1
    with psycopg2.connect(url) as connection, connection.cursor() as cursor:
        cursor.execute(
            """INSERT INTO jobs (kind, queue, state, args, attempt, max_attempts, errors,
                                 created_at, scheduled_at, attempted_at, finalized_at)
               SELECT 'fulfillment', 'critical',
                      CASE WHEN n %% %(every)s = 0 THEN (CASE WHEN n %% 2 = 0 THEN 'discarded' ELSE 'cancelled' END)
                           ELSE 'completed' END,
                      '{"operationId":' || n || '}', 1, 12,
                      CASE WHEN n %% %(every)s = 0
                           THEN '[{"attempt":1,"at":"2026-11-30T00:00:00","error":"remnawave_unavailable"}]'
                           ELSE '[]' END,
                      now() - interval '1 day' + n * interval '50 milliseconds',
                      now() - interval '1 day' + n * interval '50 milliseconds',
                      now() - interval '1 day' + n * interval '50 milliseconds',
                      now() - interval '1 day' + n * interval '50 milliseconds'
               FROM generate_series(1, %(rows)s) AS n""",
            {"every": every, "rows": rows},
        )
        cursor.execute("ANALYZE jobs")
        cursor.execute(
            "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) SELECT * FROM jobs WHERE state IN ('discarded', 'cancelled') "
            "ORDER BY id DESC LIMIT 50"
        )
        plan = [line for (line,) in cursor.fetchall()]
        cursor.execute("SELECT count(*) FROM jobs WHERE state IN ('discarded', 'cancelled')")
        dead = cursor.fetchone()[0]
    return plan, dead


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def client(base, seconds, threads, out):
    import threading

    import requests

    latencies = []
    errors = [0]
    lock = threading.Lock()
    deadline = time.monotonic() + seconds

    def loop():
        session = requests.Session()
        mine = []
        while time.monotonic() < deadline:
            started = time.perf_counter()
            answer = session.get(base + ROUTE, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10)
            mine.append(time.perf_counter() - started)
            if answer.status_code != 200 or len(answer.json()["jobs"]) != 50:
                with lock:
                    errors[0] += 1
        with lock:
            latencies.extend(mine)

    workers = [threading.Thread(target=loop) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    out.put((latencies, errors[0]))


def run(server_url, rows, dead_share, seconds, clients):
    url = fresh_database(server_url)
    started = time.monotonic()
    plan, dead = fill(url, rows, dead_share)
    print(f"filled {rows} rows ({dead} dead letters) in {time.monotonic() - started:.1f} s")
    print("\n".join(plan))
    port = free_port()
    env = dict(os.environ, DATABASE_URL=url, PORT=str(port), APP_OPERATOR_TOKEN=TOKEN, LOG_LEVEL="WARNING")
    env.pop("APP_REMNAWAVE_URL", None)
    log = open(Path(tempfile.mkdtemp(prefix="omniflow-admin-load-")) / "web.log", "w")
    web = subprocess.Popen([sys.executable, "omniflow.py", "web"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        import requests

        for _ in range(100):
            try:
                if requests.get(base + "/healthz", timeout=1).status_code == 200:
                    break
            except requests.RequestException:
                time.sleep(0.1)
        requests.get(base + ROUTE, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10)  # warm
        out = multiprocessing.Queue()
        processes = [
            multiprocessing.Process(target=client, args=(base, seconds, clients // 2, out)) for _ in range(2)
        ]
        began = time.monotonic()
        for process in processes:
            process.start()
        latencies, errors = [], 0
        for _ in processes:
            got, failed = out.get()
            latencies += got
            errors += failed
        for process in processes:
            process.join()
        elapsed = time.monotonic() - began
    finally:
        web.send_signal(signal.SIGTERM)
        web.wait(10)
    latencies.sort()

    def pct(p):
        return round(latencies[min(len(latencies) - 1, int(p * len(latencies)))] * 1000, 1)

    return {
        "rows": rows,
        "dead_letters": dead,
        "clients": clients,
        "seconds": round(elapsed, 1),
        "requests": len(latencies),
        "errors": errors,
        "requests_per_s": round(len(latencies) / elapsed, 1),
        "p50_ms": pct(0.50),
        "p99_ms": pct(0.99),
        "plan": plan,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--dead-share", type=float, default=0.01)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument(
        "--pg-url",
        default=os.environ.get("BENCH_DATABASE_URL") or "postgresql://postgres@127.0.0.1:5432/postgres",
    )
    parser.add_argument("--out", default=str(DEFAULT_OUT))
    args = parser.parse_args(argv)
    figures = run(args.pg_url, args.rows, args.dead_share, args.seconds, args.clients)
    Path(args.out).write_text(json.dumps(figures, indent=2) + "\n")
    for key in ("rows", "dead_letters", "clients", "requests", "errors", "requests_per_s", "p50_ms", "p99_ms"):
        print(f"{key:>15}: {figures[key]}")
    print(f"wrote {args.out}")
    return 0 if figures["errors"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
