"""Load on the admin API's dead-letter view with 1 000 000 job rows in PostgreSQL, and on the back
office's orders list and its CSV with 1 000 000 orders.

    python -m bench.admin_load [--rows 1000000] [--dead-share 0.01] [--seconds 20]
                               [--clients 8] [--orders 1000000] [--out bench/results/admin_load.json]

A fresh database gets `rows` job rows (a `dead-share` of them discarded or
cancelled, the rest completed), is analysed, and the plan of the route's
query is printed. Then `python omniflow.py web` serves it and `clients`
keep-alive connections, spread over two load processes, ask
GET /v1/admin/jobs?state=dead_letter back to back for `seconds`: requests per
second, p50 and p99 latency. The clients share the 2-core machine with the
server and PostgreSQL, so the figures are a floor.

With `--orders` (0 leaves it out) the same database also gets that many
orders (set-based: INSERT … SELECT generate_series) over a year, from 20 000
customers, in RUB, USD and Telegram Stars; then `clients` signed-in
connections ask the filtered page `/panel/orders?status=fulfilled&currency=RUB
&provider=yookassa&from=…&to=…` (a week, with the totals of the filtered set)
for `seconds`, and one client downloads `/panel/orders.csv` of every order
while the web process's resident memory is sampled every 20 ms: rows, bytes,
seconds and peak RSS (before and during) go into the JSON under "orders".
"""

import argparse
import functools
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
CUSTOMERS = 20_000
OPERATOR, PASSWORD = "bench", "bench operator password 0123456789"
ORDERS_PAGE = "/panel/orders?status=fulfilled&currency=RUB&provider=yookassa&from={start}&to={end}"


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


def fill_orders(url, orders):
    """`orders` orders over the year before now, one every (year / orders), set-based; returns the filtered
    page's path (the week ending a month ago) and the plan of its rows' query."""
    import migrations  # noqa: F401  (applied by fill)
    from config.database import bind_database
    from config.settings import parse_database_url
    from models.commerce import Plan
    from ops import operators

    database = bind_database(parse_database_url(url))
    plan = Plan.create(code="bench", name="Bench month", duration_days=30, price_minor=29900, currency="RUB")
    operators.create_operator(OPERATOR, PASSWORD, ["payments.read"])
    database.close()
    with psycopg2.connect(url) as connection, connection.cursor() as cursor:
        cursor.execute(
            """INSERT INTO customers (id, display_name, telegram_id, telegram_username, blocked, created_at)
               SELECT 'bench-' || n, 'Customer ' || n, 500000000 + n, 'user' || n, false,
                      now() - interval '400 days'
               FROM generate_series(1, %(customers)s) AS n""",
            {"customers": CUSTOMERS},
        )
        cursor.execute(
            """INSERT INTO orders (customer_id, plan_id, operation, status, amount_minor, currency,
                                   refunded_amount_minor, provider, settled_by, created_at, paid_at)
               SELECT 'bench-' || (n %% %(customers)s + 1), %(plan)s,
                      CASE WHEN n %% 7 = 0 THEN 'renewal' ELSE 'purchase' END,
                      CASE WHEN n %% 20 = 0 THEN 'refunded' WHEN n %% 10 = 1 THEN 'pending'
                           WHEN n %% 10 = 2 THEN 'expired' ELSE 'fulfilled' END,
                      CASE n %% 10 WHEN 0 THEN 250 WHEN 1 THEN 250 WHEN 2 THEN 399 WHEN 3 THEN 399
                           WHEN 4 THEN 399 ELSE 29900 END,
                      CASE n %% 10 WHEN 0 THEN 'XTR' WHEN 1 THEN 'XTR' WHEN 2 THEN 'USD' WHEN 3 THEN 'USD'
                           WHEN 4 THEN 'USD' ELSE 'RUB' END,
                      CASE WHEN n %% 20 = 0 THEN 250 ELSE 0 END,
                      CASE n %% 10 WHEN 0 THEN 'stars' WHEN 1 THEN 'stars' WHEN 2 THEN 'cryptobot'
                           WHEN 3 THEN 'cryptobot' WHEN 4 THEN 'cryptobot' ELSE 'yookassa' END,
                      'provider_webhook',
                      now() - interval '365 days' + n * (interval '365 days' / %(orders)s),
                      now() - interval '365 days' + n * (interval '365 days' / %(orders)s)
               FROM generate_series(1, %(orders)s) AS n""",
            {"customers": CUSTOMERS, "plan": plan.id, "orders": orders},
        )
        cursor.execute("ANALYZE customers")
        cursor.execute("ANALYZE orders")
        cursor.execute("SELECT (now() - interval '37 days')::date, (now() - interval '31 days')::date")
        start, end = cursor.fetchone()
        cursor.execute(
            "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) SELECT * FROM orders JOIN customers ON customers.id ="
            " orders.customer_id WHERE orders.status = 'fulfilled' AND currency = 'RUB' AND provider = 'yookassa'"
            " AND orders.created_at >= %s AND orders.created_at < %s::date + 1"
            " ORDER BY orders.created_at DESC, orders.id DESC LIMIT 26",
            (start, end),
        )
        plan_lines = [line for (line,) in cursor.fetchall()]
    return ORDERS_PAGE.format(start=start, end=end), plan_lines


def signed_in_cookie(base):
    import requests

    answer = requests.post(base + "/v1/panel/session", json={"username": OPERATOR, "password": PASSWORD}, timeout=30)
    answer.raise_for_status()
    return f"omniflow_session={answer.cookies['omniflow_session']}"


def page_client(base, path, cookie, seconds, threads, out):
    import threading

    import requests

    latencies, errors, lock = [], [0], threading.Lock()
    deadline = time.monotonic() + seconds

    def loop():
        session = requests.Session()
        mine = []
        while time.monotonic() < deadline:
            started = time.perf_counter()
            answer = session.get(base + path, headers={"Cookie": cookie}, timeout=30)
            mine.append(time.perf_counter() - started)
            if answer.status_code != 200 or answer.text.count("data-order=") != 25 or 'id="totals"' not in answer.text:
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


def rss_kib(pid, field="VmRSS"):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def stream_csv(base, cookie, pid):
    """Download every order as CSV, sampling the web process's RSS: rows, bytes, seconds, peak RSS."""
    import threading

    import requests

    before = rss_kib(pid)
    peak, done = [before], threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], rss_kib(pid))
            time.sleep(0.02)

    sampler = threading.Thread(target=sample)
    sampler.start()
    started = time.monotonic()
    lines = size = 0
    try:
        with requests.get(base + "/panel/orders.csv", headers={"Cookie": cookie}, stream=True, timeout=600) as got:
            got.raise_for_status()
            for chunk in got.iter_content(1 << 16):
                size += len(chunk)
                lines += chunk.count(b"\n")
    finally:
        done.set()
        sampler.join()
    return {
        "csv_rows": lines - 1,
        "csv_bytes": size,
        "csv_seconds": round(time.monotonic() - started, 1),
        "csv_rss_before_mib": round(before / 1024, 1),
        "csv_peak_rss_mib": round(peak[0] / 1024, 1),
    }


def load(target, seconds, clients):
    """`clients` connections over two processes running `target(seconds, threads, out)`: latencies and errors."""
    out = multiprocessing.Queue()
    processes = [multiprocessing.Process(target=target, args=(seconds, clients // 2, out)) for _ in range(2)]
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
    return sorted(latencies), errors, time.monotonic() - began


def percentile(latencies, p):
    return round(latencies[min(len(latencies) - 1, int(p * len(latencies)))] * 1000, 1) if latencies else None


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


def run(server_url, rows, dead_share, seconds, clients, orders=0):
    url = fresh_database(server_url)
    started = time.monotonic()
    plan, dead = fill(url, rows, dead_share)
    print(f"filled {rows} rows ({dead} dead letters) in {time.monotonic() - started:.1f} s")
    print("\n".join(plan))
    orders_figures = None
    if orders:
        started = time.monotonic()
        orders_path, orders_plan = fill_orders(url, orders)
        orders_figures = {"orders": orders, "seeded_seconds": round(time.monotonic() - started, 1)}
        print(f"seeded {orders} orders in {orders_figures['seeded_seconds']} s")
        print("\n".join(orders_plan))
    port = free_port()
    env = dict(os.environ, DATABASE_URL=url, PORT=str(port), APP_OPERATOR_TOKEN=TOKEN, LOG_LEVEL="WARNING")
    env.pop("APP_REMNAWAVE_URL", None)
    log = open(Path(tempfile.mkdtemp(prefix="omniflow-admin-load-")) / "web.log", "w")
    web = subprocess.Popen(
        [sys.executable, "omniflow.py", "web"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
    )
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
        processes = [multiprocessing.Process(target=client, args=(base, seconds, clients // 2, out)) for _ in range(2)]
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
        if orders:
            cookie = signed_in_cookie(base)
            requests.get(base + orders_path, headers={"Cookie": cookie}, timeout=30)  # warm
            page_latencies, page_errors, page_elapsed = load(
                functools.partial(page_client, base, orders_path, cookie), seconds, clients
            )
            orders_figures.update(
                page=orders_path,
                clients=clients,
                requests=len(page_latencies),
                errors=page_errors,
                requests_per_s=round(len(page_latencies) / page_elapsed, 1),
                p50_ms=percentile(page_latencies, 0.50),
                p99_ms=percentile(page_latencies, 0.99),
                plan=orders_plan,
                **stream_csv(base, cookie, web.pid),
            )
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
        "orders": orders_figures,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--dead-share", type=float, default=0.01)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--orders", type=int, default=1_000_000, help="orders for the orders list and CSV (0: none)")
    parser.add_argument(
        "--pg-url",
        default=os.environ.get("BENCH_DATABASE_URL") or "postgresql://postgres@127.0.0.1:5432/postgres",
    )
    parser.add_argument("--out", default=str(DEFAULT_OUT))
    args = parser.parse_args(argv)
    figures = run(args.pg_url, args.rows, args.dead_share, args.seconds, args.clients, args.orders)
    Path(args.out).write_text(json.dumps(figures, indent=2) + "\n")
    for key in ("rows", "dead_letters", "clients", "requests", "errors", "requests_per_s", "p50_ms", "p99_ms"):
        print(f"{key:>15}: {figures[key]}")
    for key, value in (figures["orders"] or {}).items():
        if key != "plan":
            print(f"{'orders ' + key:>22}: {value}")
    print(f"wrote {args.out}")
    failed = figures["errors"] or (figures["orders"] or {}).get("errors")
    if figures["orders"] and figures["orders"]["csv_rows"] != args.orders:
        failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
