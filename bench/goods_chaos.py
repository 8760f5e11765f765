"""Goods chaos run: paid goods orders reach their provider at most once while everything fails.

    python -m bench.goods_chaos [--orders 300] [--sqlite] [--out bench/results/goods_chaos.json]

N goods orders are paid (settled as YooKassa payments); real worker processes
(`python omniflow.py worker`, with APP_DATA_ENCRYPTION_KEY) deliver them
through the fake goods provider, which refuses 30 % of purchases (503, nothing
bought), buys and then drops the answer of 5 %, and holds 5 % for a second.
The first worker is SIGKILLed while it has a purchase in flight (between its
claim and its record) and two others take over. The run ends when every
delivery is delivered, refunded or needs review (or at the timeout), then
checks, from the provider's own counts: no order was submitted twice; no paid
order was lost (each has its delivery, none left open); the ledger balances
and revenue holds exactly the orders that were not refunded.

Waiting is compressed, nothing else, as in bench/chaos.py: backoffs and
snoozes of goods jobs pass at once, and the 2-minute deadline of a claim
whose call has been out for more than CLAIM_AGE_S (a killed worker's: no live
call lasts that long here) passes at once. With `age_dead_worker` (the test's
setting) the killed worker's heartbeat and leadership are made 30 s old at
once instead of waiting them out; the leader elected next rescues its jobs as
ever.
"""

import argparse
import datetime
import json
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench.chaos import _bind, _fresh_pg_database, _start_worker, _stop_workers

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "bench" / "results" / "goods_chaos.json"
DATA_KEY = "b21uaWZsb3ctYmVuY2gtc2VhbGluZy1rZXktMDAwMDE="  # a fixed key for this run only
TOKEN = "goods-chaos-token-0123456789"
PRICE = 1000
CLAIM_AGE_S = 4
SETTLE_CHUNK = 100
RESOLVED = ("delivered", "refunded", "needs_review", "cancelled")


def _goods_orders(base_url, count):
    from commerce.settlement import settle_order
    from goods.catalogue import add_goods, add_provider, create_goods_order
    from models.base import db
    from models.commerce import Customer

    provider = add_provider(f"chaos-{time.time_ns()}", base_url, TOKEN)
    goods = add_goods(f"chaos-{time.time_ns()}", "Chaos voucher", provider, "voucher-10", {"RUB": PRICE})
    for start in range(0, count, SETTLE_CHUNK):
        with db.atomic():  # a chunk of payments per commit: the setup, not what is measured
            for index in range(start, min(start + SETTLE_CHUNK, count)):
                customer = Customer.create(display_name=f"goods-chaos-{index}")
                order = create_goods_order(customer.id, goods.id, "RUB", provider="yookassa")
                settle_order(order.id, "provider_webhook")


class FastForward(threading.Thread):
    """Backoffs and snoozes of goods jobs pass at once; a stale claim's deadline passes at once."""

    def __init__(self, stop):
        super().__init__(name="goods-chaos-fast-forward", daemon=True)
        self.stop = stop

    def run(self):
        from goods.delivery import KIND
        from models.base import db, utcnow
        from models.goods import GoodsDelivery
        from models.jobs import Job

        while not self.stop.wait(0.5):
            try:
                now = utcnow()
                Job.update(scheduled_at=now).where(
                    (Job.kind == KIND) & Job.state.in_(("retryable", "scheduled")) & (Job.scheduled_at > now)
                ).execute()
                GoodsDelivery.update(next_attempt_at=now).where(
                    (GoodsDelivery.status == "retrying") & (GoodsDelivery.next_attempt_at > now)
                ).execute()
                GoodsDelivery.update(next_attempt_at=now).where(
                    (GoodsDelivery.status == "submitting")
                    & (GoodsDelivery.next_attempt_at > now)
                    & (GoodsDelivery.updated_at < now - datetime.timedelta(seconds=CLAIM_AGE_S))
                ).execute()
            except Exception as error:  # the database is shared with busy workers; try again
                print(f"fast-forward: {type(error).__name__}", file=sys.stderr)
            finally:
                db.close()


def _age_dead_worker(pid):
    """The killed worker's heartbeat and leader lease, as if it had been dead for a minute."""
    from models.base import db, utcnow
    from models.jobs import JobLeader, JobWorker

    minute_ago = utcnow() - datetime.timedelta(minutes=1)
    dead = [row.id for row in JobWorker.select(JobWorker.id).where(JobWorker.pid == pid)]
    JobWorker.update(heartbeat_at=minute_ago).where(JobWorker.id.in_(dead)).execute()
    JobLeader.update(expires_at=minute_ago).where(JobLeader.leader_id.in_(dead)).execute()
    db.close()


def _free_port():
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _worker_metrics(port):
    """The goods lines of a worker's /metrics: {"jobs_completed": …, "delivered": …} (None if unreachable)."""
    import re

    import requests

    try:
        text = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    except requests.RequestException:
        return None

    def value(pattern):
        found = re.search(pattern + r" ([0-9.e+]+)", text)
        return float(found.group(1)) if found else 0.0

    return {
        "jobs_completed": value(r'omniflow_jobs_total\{kind="goods_delivery",outcome="completed"\}'),
        "delivered": value(r'omniflow_goods_deliveries_total\{outcome="delivered"\}'),
    }


def _statuses():
    from peewee import fn

    from models.goods import GoodsDelivery

    rows = GoodsDelivery.select(GoodsDelivery.status, fn.COUNT(GoodsDelivery.id)).group_by(GoodsDelivery.status)
    return {status: count for status, count in rows.tuples()}


def _verify(provider, orders):
    from models.base import db
    from models.commerce import Order
    from models.goods import GoodsDelivery

    submissions = provider.stats()["submissions"]
    statuses = _statuses()
    unbalanced = db.execute_sql(
        "SELECT COUNT(*) FROM (SELECT transaction_id FROM ledger_entries GROUP BY transaction_id, currency"
        " HAVING SUM(amount_minor) <> 0) AS t"
    ).fetchone()[0]
    (revenue,) = db.execute_sql(
        "SELECT COALESCE(SUM(e.amount_minor), 0) FROM ledger_entries e JOIN ledger_accounts a ON a.id = e.account_id"
        " WHERE a.name = 'revenue'"
    ).fetchone()
    kept = Order.select().where(Order.operation == "goods", Order.status != "refunded").count()
    delivered_refs = {f"omniflow-order-{row.order_id}" for row in GoodsDelivery.select().where(
        GoodsDelivery.status == "delivered")}  # fmt: skip
    interrupted = GoodsDelivery.select().where(GoodsDelivery.last_error_code == "goods_submission_interrupted")
    return {
        "statuses": statuses,
        "max_submissions_per_order": max(submissions.values(), default=0),
        "orders_submitted_twice": sum(1 for n in submissions.values() if n > 1),
        "lost_orders": orders - sum(statuses.get(status, 0) for status in RESOLVED),
        "delivered_without_purchase": len(delivered_refs - set(submissions)),
        "interrupted_claims": interrupted.count(),
        "unbalanced_transactions": unbalanced,
        "revenue_matches_kept_orders": revenue == -kept * PRICE or revenue == kept * PRICE,
        "provider": {key: value for key, value in provider.stats().items() if key != "submissions"},
    }


def run(database_url, orders=300, fail_rate=0.30, lost_rate=0.05, slow_rate=0.05, workers=2, timeout_s=240,
        log_dir=None, age_dead_worker=False):  # fmt: skip
    """Run the scenario against a migrated, empty database; returns the figures."""
    from fakes.goods import FakeGoodsProvider
    from models.base import db
    from ops import sealing

    log_dir = log_dir or tempfile.mkdtemp(prefix="omniflow-goods-chaos-")
    _bind(database_url)
    sealing.use_keys(DATA_KEY)
    provider = FakeGoodsProvider(token=TOKEN, latency_ms=20, seed=11).start()
    processes = []
    stop = threading.Event()
    env = {"APP_DATA_ENCRYPTION_KEY": DATA_KEY}
    metrics_port = _free_port()  # the first replacement worker's metrics (SPEC 11: goods delivery is instrumented)
    try:
        started = time.monotonic()
        _goods_orders(provider.base_url, orders)
        settle_s = time.monotonic() - started
        db.close()
        provider.set_faults(fail_rate=fail_rate, lost_response_rate=lost_rate, slow_rate=slow_rate, slow_seconds=1.0)
        started = time.monotonic()
        processes.append(_start_worker(database_url, "", log_dir, 0, name="goods-chaos-worker", extra_env=env))
        FastForward(stop).start()
        killed_at = converged_at = None
        while time.monotonic() - started < timeout_s:
            statuses = _statuses()
            db.close()
            done = sum(statuses.get(status, 0) for status in RESOLVED)
            if killed_at is None and done >= orders // 5 and provider.stats()["in_flight"] > 0:
                processes[0].send_signal(signal.SIGKILL)  # a purchase in flight: between claim and record
                processes[0].wait()
                killed_at = time.monotonic() - started
                if age_dead_worker:
                    _age_dead_worker(processes[0].pid)
                for index in range(1, workers + 1):
                    extra = {"APP_WORKER_METRICS_PORT": str(metrics_port)} if index == 1 else {}
                    processes.append(_start_worker(database_url, "", log_dir, index, name="goods-chaos-worker",
                                                   extra_env={**env, **extra}))  # fmt: skip
            if done == orders:
                converged_at = time.monotonic() - started
                break
            time.sleep(0.25)
        stop.set()
        provider.clear_faults()
        figures = _verify(provider, orders)
        figures["worker_metrics"] = _worker_metrics(metrics_port) if killed_at is not None else None
        figures.update(
            orders=orders,
            converge_s=round(converged_at, 1) if converged_at is not None else None,
            worker_killed_at_s=round(killed_at, 1) if killed_at is not None else None,
            settle_s=round(settle_s, 1),
            faults={"fail_rate": fail_rate, "lost_response_rate": lost_rate, "slow_rate": slow_rate},
            workers_after_kill=workers,
            database="postgres" if database_url.startswith("postgres") else "sqlite",
            logs=str(log_dir),
        )
        return figures
    finally:
        stop.set()
        _stop_workers(processes)
        provider.stop()
        sealing.use_keys(None)
        db.close()


def main(argv=None):
    import os

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--orders", type=int, default=300)
    parser.add_argument("--timeout", type=float, default=240)
    parser.add_argument("--sqlite", action="store_true", help="run on a SQLite file instead of PostgreSQL")
    parser.add_argument(
        "--pg-url",
        default=os.environ.get("BENCH_DATABASE_URL")
        or os.environ.get("DATABASE_URL")
        or "postgresql://postgres@127.0.0.1:5432/postgres",
        help="any database on the PostgreSQL server; the run uses its own database omniflow_chaos",
    )
    parser.add_argument("--out", default=str(DEFAULT_OUT))
    args = parser.parse_args(argv)
    if args.sqlite:
        database_url = f"sqlite:///{tempfile.mkdtemp(prefix='omniflow-goods-chaos-')}/chaos.sqlite3"
    else:
        database_url = _fresh_pg_database(args.pg_url)
    figures = run(database_url, orders=args.orders, timeout_s=args.timeout)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(figures, indent=2, sort_keys=True) + "\n")
    print(json.dumps(figures, indent=2, sort_keys=True))
    failed = figures["orders_submitted_twice"] or figures["lost_orders"] or figures["unbalanced_transactions"]
    return 1 if failed or figures["converge_s"] is None else 0


if __name__ == "__main__":
    sys.exit(main())
