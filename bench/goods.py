"""Goods delivery throughput beside fulfillment's, in the same run on the same fake latency.

    python -m bench.goods [--orders 1000] [--latency-ms 20] [--rounds 3] [--sqlite]
                          [--out bench/results/goods.json]

Each round runs two sides one after the other (the order alternating round
by round), each on a fresh database with one worker process (`python
omniflow.py worker`, 16 threads on the critical queue):

- goods: N goods orders are paid first (not timed); the worker delivers
  them through the fake goods provider answering every purchase
  `latency_ms` after it arrived. The clock runs from the first claim to the
  last delivery's recorded finish;
- fulfillment: bench/fulfillment.py's worker side, N plan orders against the
  fake panel at the same latency (three panel calls per operation).

Writes {"deliveries_per_s", "fulfillment_ops_per_s", "ratio_to_fulfillment"}
(medians over the rounds) with the rounds' figures; the target ratio is
≥ 0.8: a delivery costs the queue and the database what an operation does.
"""

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.chaos import _bind, _fresh_pg_database
from bench.fulfillment import WORKERS, worker_round

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "bench" / "results" / "goods.json"
BENCH_DB = "omniflow_goods_bench"
DATA_KEY = "b21uaWZsb3ctYmVuY2gtc2VhbGluZy1rZXktMDAwMDI="  # a fixed key for this bench only
TOKEN = "goods-bench-token-0123456789"
SETTLE_CHUNK = 200


def _pay_goods_orders(base_url, count):
    from commerce.settlement import settle_order
    from goods.catalogue import add_goods, add_provider, create_goods_order
    from models.base import db
    from models.commerce import Customer

    provider = add_provider("bench", base_url, TOKEN)
    goods = add_goods("bench-voucher", "Bench voucher", provider, "voucher-10", {"RUB": 1000})
    for start in range(0, count, SETTLE_CHUNK):
        with db.atomic():
            for index in range(start, min(start + SETTLE_CHUNK, count)):
                customer = Customer.create(display_name=f"goods-bench-{index}")
                order = create_goods_order(customer.id, goods.id, "RUB", provider="yookassa")
                settle_order(order.id, "provider_webhook")


def goods_round(database_url, orders=1000, latency_ms=20, timeout_s=240):
    """One goods-side round on a fresh database: the worker's figures."""
    from peewee import fn

    from fakes.goods import FakeGoodsProvider
    from models.base import db, utcnow
    from models.goods import GoodsDelivery
    from ops import sealing

    _bind(database_url)
    sealing.use_keys(DATA_KEY)
    provider = FakeGoodsProvider(token=TOKEN, latency_ms=latency_ms).start()
    worker = None
    log_path = Path(tempfile.mkdtemp(prefix="omniflow-goods-bench-")) / "worker.log"
    try:
        _pay_goods_orders(provider.base_url, orders)
        db.close()
        env = dict(os.environ, DATABASE_URL=database_url, APP_DATA_ENCRYPTION_KEY=DATA_KEY, LOG_LEVEL="WARNING")
        started = time.monotonic()
        worker = subprocess.Popen([sys.executable, "omniflow.py", "worker"], cwd=ROOT, env=env,
                                  stdout=open(log_path, "w"), stderr=subprocess.STDOUT)  # fmt: skip
        while time.monotonic() - started < timeout_s and worker.poll() is None:
            claimed = GoodsDelivery.select().where(GoodsDelivery.status != "pending").exists()
            db.close()
            if claimed:
                break
            time.sleep(0.01)
        startup_s = time.monotonic() - started
        started, first_claim = time.monotonic(), utcnow()
        done = 0
        while time.monotonic() - started < timeout_s:
            done = GoodsDelivery.select().where(GoodsDelivery.status == "delivered").count()
            db.close()
            if done == orders:
                break
            time.sleep(0.1)
        last = GoodsDelivery.select(fn.MAX(GoodsDelivery.finished_at)).scalar()
        db.close()
        elapsed = (last - first_claim).total_seconds() if done == orders else time.monotonic() - started
        stats = provider.stats()
        return {
            "orders": orders,
            "completed": done,
            "latency_ms": latency_ms,
            "workers": WORKERS,
            "elapsed_s": round(elapsed, 2),
            "worker_startup_s": round(startup_s, 2),
            "ops_per_s": round(done / elapsed, 1),
            "ideal_ops_per_s": round(WORKERS / (latency_ms / 1000.0), 1),
            "max_submissions_per_order": max(stats["submissions"].values(), default=0),
            "database": "postgres" if database_url.startswith("postgres") else "sqlite",
            "worker_log": str(log_path),
            "load_1min": round(os.getloadavg()[0], 2),
        }
    finally:
        if worker is not None and worker.poll() is None:
            worker.send_signal(signal.SIGTERM)
            try:
                worker.wait(30)
            except subprocess.TimeoutExpired:
                worker.kill()
        provider.stop()
        sealing.use_keys(None)
        db.close()
        if hasattr(db.obj, "close_all"):  # the next round drops this database
            db.obj.close_all()


def run(database_for_round, orders=1000, latency_ms=20, rounds=3, timeout_s=240):
    goods_rounds, fulfillment_rounds = [], []
    for index in range(rounds):
        sides = ("goods", "fulfillment") if index % 2 == 0 else ("fulfillment", "goods")
        for side in sides:
            if side == "goods":
                figures = goods_round(database_for_round(index), orders, latency_ms, timeout_s)
                goods_rounds.append(figures)
            else:
                figures = worker_round(database_for_round(index), orders=orders, latency_ms=latency_ms,
                                       timeout_s=timeout_s)  # fmt: skip
                fulfillment_rounds.append(figures)
            print(f"round {index + 1}: {side:>11} {figures['ops_per_s']:.1f}/s ({figures['completed']} done, "
                  f"load {figures['load_1min']})", flush=True)  # fmt: skip
    deliveries = statistics.median(r["ops_per_s"] for r in goods_rounds)
    operations = statistics.median(r["ops_per_s"] for r in fulfillment_rounds)
    return {
        "deliveries_per_s": deliveries,
        "fulfillment_ops_per_s": operations,
        "ratio_to_fulfillment": round(deliveries / operations, 3) if operations else None,
        "ratio_to_fulfillment_per_round": [
            round(g["ops_per_s"] / f["ops_per_s"], 3) for g, f in zip(goods_rounds, fulfillment_rounds)
        ],  # fmt: skip
        "latency_ms": latency_ms,
        "workers": WORKERS,
        "orders": orders,
        "rounds": rounds,
        "completed": min(r["completed"] for r in goods_rounds + fulfillment_rounds),
        "max_submissions_per_order": max(r["max_submissions_per_order"] for r in goods_rounds),
        "fulfillment_calls_per_operation": statistics.median(r["calls_per_operation"] for r in fulfillment_rounds),
        "database": goods_rounds[0]["database"],
        "goods_rounds": goods_rounds,
        "fulfillment_rounds": fulfillment_rounds,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--orders", type=int, default=1000)
    parser.add_argument("--latency-ms", type=float, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sqlite", action="store_true")
    parser.add_argument("--pg-url", default=os.environ.get("BENCH_DATABASE_URL") or os.environ.get("DATABASE_URL")
                        or "postgresql://postgres@127.0.0.1:5432/postgres")  # fmt: skip
    parser.add_argument("--out", default=str(DEFAULT_OUT))
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    if args.sqlite:
        directory = tempfile.mkdtemp(prefix="omniflow-goods-bench-")
        counter = iter(range(10_000))

        def database_for_round(index):
            return f"sqlite:///{directory}/bench-{next(counter)}.sqlite3"
    else:

        def database_for_round(index):
            return _fresh_pg_database(args.pg_url, BENCH_DB)

    figures = run(database_for_round, orders=args.orders, latency_ms=args.latency_ms, rounds=args.rounds)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(figures, indent=2, sort_keys=True) + "\n")
    for key in ("database", "orders", "rounds", "deliveries_per_s", "fulfillment_ops_per_s", "ratio_to_fulfillment",
                "ratio_to_fulfillment_per_round", "max_submissions_per_order"):  # fmt: skip
        print(f"{key:>30}: {figures[key]}")
    print(f"wrote {args.out}")
    return 0 if figures["completed"] == args.orders and figures["max_submissions_per_order"] <= 1 else 1


if __name__ == "__main__":
    sys.exit(main())
