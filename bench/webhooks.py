"""Load on the webhook routes: deliveries one web process on PostgreSQL takes, and the worker that settles them.

    python -m bench.webhooks [--seconds 20] [--rounds 3] [--pool 90000] [--out bench/results/webhooks.json]

A fresh database gets `pool` pending orders (one customer each), half paid at
the fake YooKassa and half at the fake Crypto Pay, each with its payment
intent; the fakes and a fake Remnawave panel run in this process and deliver
no webhooks of their own. Then `python omniflow.py web` serves the database
with both providers configured at the fakes, and keep-alive clients, spread
over two load processes, post the providers' deliveries back to back,
YooKassa-style and CryptoBot-style alternately, each delivery for an order no
other request touches. A request counts when it answers 200
`{"outcome": "accepted"}`: its delivery and the job that confirms and applies
it are committed (commerce/webhooks.py).

First, `alongside`: a worker (`huey_consumer omniflow.huey -n`, the fake
panel as its Remnawave, no periodic passes) runs on an empty queue while 8
clients post for `seconds`: the web process's rate and the worker's
settlements per second when the two share the machine. Once it has settled
and fulfilled all of that, it stops.

Then the rounds, interleaved (in each: /healthz with 8 clients, webhooks
with 8, webhooks with 16), each `seconds` long, with no worker running, so
that like /healthz the rate is the web process's own; the figures are the
medians over the rounds. `ratio_to_healthz` is the median over the rounds
of the webhook rate at 8 clients over the same web process's /healthz rate
at 8 clients measured just before it in the round, the ceiling of the web
stack on this machine.

Last, a worker settles everything the rounds accepted: each job confirms a
YooKassa delivery by fetching the payment from the fake and settles its
order (ledger movement, order, entitlement, operation, fulfillment job,
outbox event, notice). `settlement.settled_rps` is the deliveries it settled
per second, from its first settlement to its last (the fulfillment jobs
they made come after them in the queue and are not waited for). The clients
share the 2-core machine with the web process, PostgreSQL, the worker and
the fakes, so the figures are a floor. At the end the database is checked:
every stored delivery settled, with one paid order, one ledger movement,
one fulfillment job and one entitlement each, and nothing else settled.
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

from fakes.remnawave import api_token

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "bench" / "results" / "webhooks.json"
BENCH_DB = "omniflow_webhooks"
OPERATOR_TOKEN = "bench-operator-token-0123456789"
YOOKASSA_SHOP_ID = "424242"
YOOKASSA_SECRET = "test_bench-yookassa-secret-0123456789"
CRYPTOBOT_TOKEN = "4242:AAbenchCryptoPayToken0123456789abcd"
PANEL_TOKEN = api_token("bench")
PRICE_MINOR = 19900
CLIENT_COUNTS = (8, 16)
RAN_OUT = "the prepared deliveries ran out before the run's end (a larger --pool measures it)"
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
            " SELECT md5('bench-' || n)::uuid::text, 'bench ' || n, FALSE, now() FROM generate_series(1, %s) AS n",
            (pool,),
        )
        cursor.execute(
            "INSERT INTO orders (customer_id, plan_id, operation, status, amount_minor, currency, provider,"
            " created_at, expires_at)"
            " SELECT md5('bench-' || n)::uuid::text, %s, 'purchase', 'pending', %s, 'RUB',"
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
            ok = answer.status_code == 200 and answer.json().get("outcome") == "accepted"
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
    """A run's rate and latencies; a run whose clients ran out of prepared deliveries is no
    measurement (they stopped before `seconds`) and says so instead of giving figures."""
    exhausted = any(name == "exhausted" for name, _, _ in results)
    results = [result for result in results if result[0] != "exhausted"]
    latencies = sorted(elapsed for _, elapsed, ok in results if ok)
    errors = sum(not ok for _, _, ok in results)

    def pct(values, p):
        return round(values[min(len(values) - 1, int(p * len(values)))] * 1000, 1) if values else None

    summary = {"rps": round(len(latencies) / seconds, 1), "p50_ms": pct(latencies, 0.50), "p99_ms": pct(latencies, 0.99),
               "requests": len(latencies), "errors": errors}  # fmt: skip
    if exhausted:
        summary.update(rps=None, p50_ms=None, p99_ms=None, unmeasured=RAN_OUT)
    for provider in ("yookassa", "cryptobot"):
        mine = sorted(elapsed for name, elapsed, ok in results if ok and name == provider)
        if mine:
            summary[provider] = {"requests": len(mine), "p50_ms": pct(mine, 0.50), "p99_ms": pct(mine, 0.99)}
    return summary


def median_of(values):
    """The median of the measured figures (None where a run was no measurement), or None."""
    measured = [value for value in values if value is not None]
    return round(statistics.median(measured), 1) if measured else None


def backlog(url):
    """(deliveries settled, delivery jobs not finished, jobs of any kind not finished)."""
    import psycopg2

    with psycopg2.connect(url) as connection, connection.cursor() as cursor:
        cursor.execute(
            "SELECT (SELECT count(*) FROM provider_webhook_events WHERE outcome = 'settled'),"
            " (SELECT count(*) FROM jobs WHERE kind = 'webhook_delivery' AND finalized_at IS NULL),"
            " (SELECT count(*) FROM jobs WHERE finalized_at IS NULL AND kind <> 'periodic_task')"
        )
        return cursor.fetchone()


def start_worker(env, workdir):
    """`huey_consumer omniflow.huey -n`: a worker that never stands for leader, so no periodic pass runs
    (payment_reconcile would settle, by its poll, the pool's payments no request has posted yet)."""
    log = open(workdir / "worker.log", "a")
    command = [str(Path(sys.executable).parent / "huey_consumer"), "omniflow.huey", "-n"]
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)


def stop(process):
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(40)
    except subprocess.TimeoutExpired:
        process.kill()


def drain(url, worker, everything=False, timeout_s=3600):
    """Wait until no delivery job is left (`everything`: no job at all but the passes). True if so."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and worker.poll() is None:
        if backlog(url)[2 if everything else 1] == 0:
            return True
        time.sleep(2)  # the counts scan the tables: not too often
    return False


def settled_between(url, since):
    """(deliveries settled at or after `since`, seconds from the first of them to the last)."""
    import psycopg2

    with psycopg2.connect(url) as connection, connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*), min(processed_at), max(processed_at) FROM provider_webhook_events"
            " WHERE outcome = 'settled' AND processed_at >= %s",
            (since,),
        )
        count, first, last = cursor.fetchone()
    return count, ((last - first).total_seconds() if count > 1 else 0.0)


def check(url):
    """Every accepted delivery settled: one paid order, one ledger movement, one fulfillment job and one
    entitlement each; nothing else moved."""
    import psycopg2

    with psycopg2.connect(url) as connection, connection.cursor() as cursor:
        counts = {}
        for name, sql in (
            ("accepted_deliveries", "SELECT count(*) FROM provider_webhook_events"),
            ("settled_deliveries", "SELECT count(*) FROM provider_webhook_events WHERE outcome = 'settled'"),
            ("paid_orders", "SELECT count(*) FROM orders WHERE status IN ('paid', 'fulfilled')"),
            ("ledger_transactions", "SELECT count(*) FROM ledger_transactions"),
            ("fulfillment_jobs", "SELECT count(*) FROM jobs WHERE kind = 'fulfillment'"),
            ("entitlements", "SELECT count(*) FROM entitlements"),
            ("fulfilled_orders", "SELECT count(*) FROM orders WHERE status = 'fulfilled'"),
            (
                "unbalanced",
                "SELECT count(*) FROM (SELECT transaction_id FROM ledger_entries GROUP BY transaction_id, currency"
                " HAVING SUM(amount_minor) <> 0) AS t",
            ),
        ):
            cursor.execute(sql)
            counts[name] = cursor.fetchone()[0]
    counts["consistent"] = (
        counts["settled_deliveries"] == counts["paid_orders"] == counts["ledger_transactions"]
        == counts["fulfillment_jobs"] == counts["entitlements"] == counts["accepted_deliveries"]
        and counts["unbalanced"] == 0
    )  # fmt: skip
    return counts


def run(server_url, seconds, rounds, pool):
    from bench.chaos import _fresh_pg_database
    from fakes.cryptobot import FakeCryptoBot
    from fakes.remnawave import FakeRemnawave
    from fakes.yookassa import FakeYooKassa
    from models.base import utcnow

    url = _fresh_pg_database(server_url, BENCH_DB)
    yookassa = FakeYooKassa(shop_id=YOOKASSA_SHOP_ID, secret_key=YOOKASSA_SECRET).start()
    cryptobot = FakeCryptoBot(token=CRYPTOBOT_TOKEN).start()
    panel = FakeRemnawave(token=PANEL_TOKEN)
    panel.start()
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
        # Every client is this machine, posting as fast as it can: neither YooKassa's addresses nor a
        # provider's pace, which the web process would otherwise hold it to.
        APP_YOOKASSA_WEBHOOK_ADDRESSES="*",
        APP_WEBHOOK_RATE_LIMIT=str(10**9),
        LOG_LEVEL="WARNING",
    )
    env.pop("APP_REMNAWAVE_URL", None)
    worker_env = dict(env, APP_REMNAWAVE_URL=panel.base_url, APP_REMNAWAVE_TOKEN=PANEL_TOKEN)
    log = open(workdir / "web.log", "w")
    web = subprocess.Popen([sys.executable, "omniflow.py", "web"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    cursor = multiprocessing.get_context("spawn").Value("q", 0)
    runs = {"healthz": [], **{str(n): [] for n in CLIENT_COUNTS}}
    worker = None
    stopped = None
    try:
        import requests

        for _ in range(100):
            try:
                if requests.get(base + "/readyz", timeout=1).status_code == 200:
                    break
            except requests.RequestException:
                pass
            time.sleep(0.1)
        # Alongside: the worker up on an empty queue, settling (and fulfilling) what the clients post.
        worker = start_worker(worker_env, workdir)
        while backlog(url)[0] == 0 and worker.poll() is None:  # the worker's start-up is not measured
            load(base, 1, 2, "webhooks", pool_file, cursor)
        since = utcnow()
        alongside = load(base, seconds, HEALTHZ_CLIENTS, "webhooks", pool_file, cursor)
        alongside["settled_rps"] = round(settled_between(url, since)[0] / seconds, 1)
        drained = drain(url, worker, everything=True)
        stop(worker)
        worker = None
        print(f"alongside the worker: {alongside['rps']}/s accepted, {alongside['settled_rps']}/s settled", flush=True)

        for index in range(rounds):
            left = max(0, filled - cursor.value)
            # A run takes about what the fastest one so far took: with fewer left, the rounds
            # stop here rather than measure clients that run out halfway.
            wanted = max([result["requests"] for n in CLIENT_COUNTS for result in runs[str(n)]], default=0)
            if left < 2 * wanted:
                stopped = f"stopped before round {index + 1}: {left} prepared deliveries left, a run takes ~{wanted}"
                print(stopped, flush=True)
                break
            runs["healthz"].append(load(base, seconds, HEALTHZ_CLIENTS, "healthz", pool_file, cursor))
            for clients in CLIENT_COUNTS:
                runs[str(clients)].append(load(base, seconds, clients, "webhooks", pool_file, cursor))
            print(
                f"round {index + 1}: healthz {runs['healthz'][-1]['rps']}/s, "
                + ", ".join(f"{n} clients {runs[str(n)][-1]['rps']}/s p99 {runs[str(n)][-1]['p99_ms']} ms" for n in CLIENT_COUNTS),
                flush=True,
            )

        # Then one worker settles everything the rounds accepted.
        since = utcnow()
        worker = start_worker(worker_env, workdir)
        drained = drain(url, worker) and drained
        count, span = settled_between(url, since)
        settlement = {"deliveries": count, "seconds": round(span, 1),
                      "settled_rps": round(count / span, 1) if span else None, "drained": drained}  # fmt: skip
        print(f"the worker settled {count} deliveries in {span:.1f} s", flush=True)
    finally:
        if worker is not None:
            stop(worker)
        web.send_signal(signal.SIGTERM)
        web.wait(15)
        yookassa.stop()
        cryptobot.stop()
        panel.stop()

    clients = {
        str(n): {key: median_of([result[key] for result in runs[str(n)]]) for key in ("rps", "p50_ms", "p99_ms")}
        for n in CLIENT_COUNTS
    }
    for n in CLIENT_COUNTS:
        if clients[str(n)]["rps"] is None:
            reasons = [result["unmeasured"] for result in runs[str(n)] if "unmeasured" in result]
            clients[str(n)]["unmeasured"] = "; ".join(filter(None, [*reasons[:1], stopped])) or RAN_OUT
    healthz = median_of([result["rps"] for result in runs["healthz"]])
    # Each round's webhook rate over the /healthz rate measured just before it: the machine's load moves.
    ratios = [
        hook["rps"] / probe["rps"]
        for hook, probe in zip(runs[str(HEALTHZ_CLIENTS)], runs["healthz"])
        if hook["rps"] is not None and probe["rps"]
    ]
    return {
        "clients": clients,
        "healthz_rps": healthz,
        "ratio_to_healthz": round(statistics.median(ratios), 3) if ratios else None,
        "stopped": stopped,
        "rounds_measured": len(runs["healthz"]),
        "settlement": settlement,
        "alongside": alongside,
        "seconds": seconds,
        "rounds": rounds,
        "errors": sum(result["errors"] for n in CLIENT_COUNTS for result in runs[str(n)]) + alongside["errors"],
        "runs": runs,
        "database": check(url) if drained else {"consistent": False, "drained": False},
        "load_1min": round(os.getloadavg()[0], 2),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pool", type=int, default=90000, help="orders prepared (more than the runs take)")
    parser.add_argument(
        "--pg-url",
        default=os.environ.get("BENCH_DATABASE_URL") or "postgresql://postgres@127.0.0.1:5432/postgres",
    )
    parser.add_argument("--out", default=str(DEFAULT_OUT))
    args = parser.parse_args(argv)
    result = run(args.pg_url, args.seconds, args.rounds, args.pool)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    shown = ("clients", "healthz_rps", "ratio_to_healthz", "settlement", "alongside", "errors", "database")
    print(json.dumps({key: result[key] for key in shown}, indent=2))
    print(f"wrote {args.out}")
    return 0 if result["errors"] == 0 and result["database"]["consistent"] else 1


if __name__ == "__main__":
    sys.exit(main())
