"""Load on the webhook routes: payments settled per second by one web process on PostgreSQL.

    python -m bench.webhooks [--seconds 20] [--rounds 3] [--pool 40000] [--out bench/results/webhooks.json]

A fresh database gets `pool` pending orders (one customer each), half paid at
the fake YooKassa and half at the fake Crypto Pay, each with its payment
intent; the fakes run in this process (idle while the load runs but for the
fetches the web process makes) and deliver no webhooks of their own. Then
`python omniflow.py web` serves the database with both providers configured
at the fakes, and keep-alive clients, spread over two load processes, post
the providers' deliveries back to back, YooKassa-style and CryptoBot-style
alternately, each delivery for an order no other request touches: every
request stores its delivery, confirms a YooKassa notification by fetching
the payment from the fake, and settles its order (ledger movement, order,
entitlement, operation, job, outbox event, notice). A request counts when it
answers 200 `{"outcome": "settled"}`.

Rounds are interleaved (in each: /healthz with 8 clients, webhooks with 8,
webhooks with 16), each `seconds` long; the figures are the medians over the
rounds. `ratio_to_healthz` is the median over the rounds of the webhook rate
at 8 clients over the same web process's /healthz rate at 8 clients measured
just before it in the round, the ceiling of the web stack on this machine. The clients share the 2-core machine with the web process,
PostgreSQL and the fakes, so the figures are a floor. At the end the
database is checked: one settlement, one ledger movement and one job per
settled request, and nothing else settled.
"""

import argparse
import json
import multiprocessing
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "bench" / "results" / "webhooks.json"
BENCH_DB = "omniflow_webhooks"
OPERATOR_TOKEN = "bench-operator-token-0123456789"
YOOKASSA_SHOP_ID = "424242"
YOOKASSA_SECRET = "test_bench-yookassa-secret-0123456789"
CRYPTOBOT_TOKEN = "4242:AAbenchCryptoPayToken0123456789abcd"
PRICE_MINOR = 19900
CLIENT_COUNTS = (8, 16)
HEALTHZ_CLIENTS = 8


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# -- the pool of orders, each with a delivery waiting to be posted --------------------------------


def fill(url, pool, yookassa, cryptobot, pool_file):
    """Orders, intents and payments at the fakes; writes one delivery per order to `pool_file`."""
    import psycopg2
    import requests

    import migrations
    from config.database import open_database
    from config.settings import parse_database_url
    from fakes.cryptobot import sign

    database = open_database(parse_database_url(url))
    migrations.apply(database)
    database.close()
    with psycopg2.connect(url) as connection, connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO plans (code, name, duration_days, traffic_allowance_bytes, device_limit, squad_ids,"
            " grace_period_hours, price_minor, currency, active, trial)"
            " VALUES ('bench', 'Bench', 30, 107374182400, 3, '[]', 24, %s, 'RUB', TRUE, FALSE) RETURNING id",
            (PRICE_MINOR,),
        )
        plan_id = cursor.fetchone()[0]
        cursor.execute("INSERT INTO plan_prices (plan_id, currency, amount_minor) VALUES (%s, 'RUB', %s)", (plan_id, PRICE_MINOR))
        cursor.execute(
            "INSERT INTO customers (id, display_name, blocked, created_at)"
            " SELECT 'bench-' || n, 'bench ' || n, FALSE, now() FROM generate_series(1, %s) AS n",
            (pool,),
        )
        cursor.execute(
            "INSERT INTO orders (customer_id, plan_id, operation, status, amount_minor, currency, provider,"
            " created_at, expires_at)"
            " SELECT 'bench-' || n, %s, 'purchase', 'pending', %s, 'RUB',"
            " CASE WHEN n %% 2 = 1 THEN 'yookassa' ELSE 'cryptobot' END, now(), now() + interval '1 day'"
            " FROM generate_series(1, %s) AS n ORDER BY n RETURNING id, provider",
            (plan_id, PRICE_MINOR, pool),
        )
        orders = cursor.fetchall()

    auth = (YOOKASSA_SHOP_ID, YOOKASSA_SECRET)

    def yookassa_payment(order_id):
        session = requests.Session()
        created = session.post(
            yookassa.api_url + "/payments",
            auth=auth,
            headers={"Idempotence-Key": f"bench-{order_id}"},
            json={
                "amount": {"value": f"{PRICE_MINOR // 100}.00", "currency": "RUB"},
                "capture": True,
                "confirmation": {"type": "redirect", "return_url": "https://shop.example.test/checkout/return"},
                "description": f"Order {order_id}",
                "metadata": {"order_id": str(order_id)},
            },
            timeout=30,
        ).json()
        yookassa.succeed(created["id"])
        return order_id, created["id"], yookassa.notification(created["id"]), {}

    def cryptobot_update(order_id):
        invoice_id = order_id
        body = json.dumps(
            {
                "update_id": order_id,
                "update_type": "invoice_paid",
                "request_date": "2026-12-01T10:00:00.000Z",
                "payload": {
                    "invoice_id": invoice_id,
                    "hash": f"IVbench{order_id}",
                    "currency_type": "fiat",
                    "fiat": "RUB",
                    "amount": str(PRICE_MINOR // 100),
                    "status": "paid",
                    "payload": json.dumps({"order_id": str(order_id), "idempotence_key": f"bench-{order_id}"}),
                    "created_at": "2026-12-01T10:00:00.000Z",
                    "paid_at": "2026-12-01T10:00:05.000Z",
                },
            },
            separators=(",", ":"),
        ).encode()
        return order_id, str(invoice_id), body, {"crypto-pay-api-signature": sign(CRYPTOBOT_TOKEN, body)}

    with ThreadPoolExecutor(8) as pool_threads:
        made = list(
            pool_threads.map(
                lambda row: yookassa_payment(row[0]) if row[1] == "yookassa" else cryptobot_update(row[0]), orders
            )
        )
    providers = dict(orders)
    with psycopg2.connect(url) as connection, connection.cursor() as cursor:
        cursor.executemany(
            "INSERT INTO payment_intents (order_id, provider, provider_payment_id, amount_minor, currency, status,"
            " idempotence_key, created_at, updated_at) VALUES (%s, %s, %s, %s, 'RUB', 'pending', %s, now(), now())",
            [(order_id, providers[order_id], payment_id, PRICE_MINOR, f"bench-{order_id}") for order_id, payment_id, _, _ in made],
        )
        cursor.execute("ANALYZE")
    with open(pool_file, "w") as out:
        for order_id, _, body, headers in made:
            out.write(json.dumps({"provider": providers[order_id], "body": body.decode(), "headers": headers}) + "\n")
    return len(made)


# -- the load ---------------------------------------------------------------------------------------


def client(base, seconds, threads, route, pool_file, cursor, out):
    """One load process: `threads` keep-alive clients for `seconds`; webhooks take the next pool entry."""
    import threading

    import requests

    deliveries = []
    if route == "webhooks":
        with open(pool_file) as source:
            deliveries = [json.loads(line) for line in source]
    results = []  # (provider or "healthz", seconds, ok)
    lock = threading.Lock()
    deadline = time.monotonic() + seconds

    def loop():
        session = requests.Session()
        mine = []
        while time.monotonic() < deadline:
            if route == "healthz":
                started = time.perf_counter()
                answer = session.get(base + "/healthz", timeout=10)
                mine.append(("healthz", time.perf_counter() - started, answer.status_code == 200))
                continue
            with cursor.get_lock():
                index = cursor.value
                cursor.value += 1
            if index >= len(deliveries):
                mine.append(("exhausted", 0.0, False))
                break
            delivery = deliveries[index]
            headers = {"Content-Type": "application/json", **delivery["headers"]}
            started = time.perf_counter()
            answer = session.post(
                f"{base}/v1/webhooks/{delivery['provider']}", data=delivery["body"].encode(), headers=headers, timeout=10
            )
            elapsed = time.perf_counter() - started
            ok = answer.status_code == 200 and answer.json().get("outcome") == "settled"
            mine.append((delivery["provider"], elapsed, ok))
        with lock:
            results.extend(mine)

    workers = [threading.Thread(target=loop) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    out.put(results)


def load(base, seconds, clients, route, pool_file, cursor):
    context = multiprocessing.get_context("spawn")
    out = context.Queue()
    processes = [
        context.Process(target=client, args=(base, seconds, clients // 2, route, pool_file, cursor, out))
        for _ in range(2)
    ]
    for process in processes:
        process.start()
    results = []
    for _ in processes:
        results += out.get()
    for process in processes:
        process.join()
    return figures(results, seconds)


def figures(results, seconds):
    latencies = sorted(elapsed for _, elapsed, ok in results if ok)
    errors = sum(not ok for _, _, ok in results)

    def pct(values, p):
        return round(values[min(len(values) - 1, int(p * len(values)))] * 1000, 1) if values else None

    summary = {"rps": round(len(latencies) / seconds, 1), "p50_ms": pct(latencies, 0.50), "p99_ms": pct(latencies, 0.99),
               "requests": len(latencies), "errors": errors}  # fmt: skip
    for provider in ("yookassa", "cryptobot"):
        mine = sorted(elapsed for name, elapsed, ok in results if ok and name == provider)
        if mine:
            summary[provider] = {"requests": len(mine), "p50_ms": pct(mine, 0.50), "p99_ms": pct(mine, 0.99)}
    return summary


def check(url, settled):
    """Every settled request is one paid order with one ledger movement and one job; nothing else moved."""
    import psycopg2

    with psycopg2.connect(url) as connection, connection.cursor() as cursor:
        counts = {}
        for name, sql in (
            ("paid_orders", "SELECT count(*) FROM orders WHERE status = 'paid'"),
            ("ledger_transactions", "SELECT count(*) FROM ledger_transactions"),
            ("fulfillment_jobs", "SELECT count(*) FROM jobs WHERE kind = 'fulfillment'"),
            ("entitlements", "SELECT count(*) FROM entitlements"),
            (
                "unbalanced",
                "SELECT count(*) FROM (SELECT transaction_id FROM ledger_entries GROUP BY transaction_id, currency"
                " HAVING SUM(amount_minor) <> 0) AS t",
            ),
        ):
            cursor.execute(sql)
            counts[name] = cursor.fetchone()[0]
    counts["consistent"] = (
        counts["paid_orders"] == counts["ledger_transactions"] == counts["fulfillment_jobs"] == counts["entitlements"]
        == settled and counts["unbalanced"] == 0
    )  # fmt: skip
    return counts


def run(server_url, seconds, rounds, pool):
    from bench.chaos import _fresh_pg_database
    from fakes.cryptobot import FakeCryptoBot
    from fakes.yookassa import FakeYooKassa

    url = _fresh_pg_database(server_url, BENCH_DB)
    yookassa = FakeYooKassa(shop_id=YOOKASSA_SHOP_ID, secret_key=YOOKASSA_SECRET).start()
    cryptobot = FakeCryptoBot(token=CRYPTOBOT_TOKEN).start()
    workdir = Path(tempfile.mkdtemp(prefix="omniflow-webhooks-bench-"))
    pool_file = workdir / "deliveries.jsonl"
    started = time.monotonic()
    filled = fill(url, pool, yookassa, cryptobot, pool_file)
    print(f"prepared {filled} paid orders with their deliveries in {time.monotonic() - started:.1f} s", flush=True)

    port = free_port()
    env = dict(
        os.environ,
        DATABASE_URL=url,
        PORT=str(port),
        APP_OPERATOR_TOKEN=OPERATOR_TOKEN,
        APP_PUBLIC_URL="https://shop.example.test",
        APP_YOOKASSA_SHOP_ID=YOOKASSA_SHOP_ID,
        APP_YOOKASSA_SECRET_KEY=YOOKASSA_SECRET,
        APP_YOOKASSA_API_URL=yookassa.api_url,
        APP_CRYPTOBOT_TOKEN=CRYPTOBOT_TOKEN,
        APP_CRYPTOBOT_API_URL=cryptobot.base_url,
        LOG_LEVEL="WARNING",
    )
    env.pop("APP_REMNAWAVE_URL", None)
    log = open(workdir / "web.log", "w")
    web = subprocess.Popen([sys.executable, "omniflow.py", "web"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    cursor = multiprocessing.get_context("spawn").Value("q", 0)
    runs = {"healthz": [], **{str(n): [] for n in CLIENT_COUNTS}}
    try:
        import requests

        for _ in range(100):
            try:
                if requests.get(base + "/readyz", timeout=1).status_code == 200:
                    break
            except requests.RequestException:
                pass
            time.sleep(0.1)
        for index in range(rounds):
            runs["healthz"].append(load(base, seconds, HEALTHZ_CLIENTS, "healthz", pool_file, cursor))
            for clients in CLIENT_COUNTS:
                runs[str(clients)].append(load(base, seconds, clients, "webhooks", pool_file, cursor))
            print(
                f"round {index + 1}: healthz {runs['healthz'][-1]['rps']}/s, "
                + ", ".join(f"{n} clients {runs[str(n)][-1]['rps']}/s p99 {runs[str(n)][-1]['p99_ms']} ms" for n in CLIENT_COUNTS),
                flush=True,
            )
    finally:
        web.send_signal(signal.SIGTERM)
        web.wait(15)
        yookassa.stop()
        cryptobot.stop()
    settled = sum(result["requests"] for n in CLIENT_COUNTS for result in runs[str(n)])

    def median(values):
        return round(statistics.median(values), 1)

    clients = {
        str(n): {key: median([result[key] for result in runs[str(n)]]) for key in ("rps", "p50_ms", "p99_ms")}
        for n in CLIENT_COUNTS
    }
    healthz = median([result["rps"] for result in runs["healthz"]])
    # Each round's webhook rate over the /healthz rate measured just before it: the machine's load moves.
    ratios = [hook["rps"] / probe["rps"] for hook, probe in zip(runs[str(HEALTHZ_CLIENTS)], runs["healthz"])]
    return {
        "clients": clients,
        "healthz_rps": healthz,
        "ratio_to_healthz": round(statistics.median(ratios), 3),
        "seconds": seconds,
        "rounds": rounds,
        "errors": sum(result["errors"] for n in CLIENT_COUNTS for result in runs[str(n)]),
        "runs": runs,
        "database": check(url, settled),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pool", type=int, default=40000, help="orders prepared (more than the runs settle)")
    parser.add_argument(
        "--pg-url",
        default=os.environ.get("BENCH_DATABASE_URL") or "postgresql://postgres@127.0.0.1:5432/postgres",
    )
    parser.add_argument("--out", default=str(DEFAULT_OUT))
    args = parser.parse_args(argv)
    result = run(args.pg_url, args.seconds, args.rounds, args.pool)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({key: result[key] for key in ("clients", "healthz_rps", "ratio_to_healthz", "errors", "database")}, indent=2))
    print(f"wrote {args.out}")
    return 0 if result["errors"] == 0 and result["database"]["consistent"] else 1


if __name__ == "__main__":
    sys.exit(main())
