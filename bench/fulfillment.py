"""Fulfillment throughput: paid orders through a worker process to a slow panel.

    python -m bench.fulfillment [--orders 2000] [--latency-ms 20] [--sqlite] [--out bench/results/fulfillment.json]

N orders are settled first (not timed). Then one worker process
(`python omniflow.py worker`: 16 threads on the critical queue) fulfils them
against the fake Remnawave panel answering every call `latency_ms` after it
arrived. The clock runs from the worker's first claim until the last
operation's recorded completion (the process's start-up is reported apart,
as worker_startup_s).

The ideal is what 16 workers could do if the panel's latency were the only
cost: 16 / (calls per operation × latency), with calls per operation counted
by the panel in the same run. The ratio to it is what the database, the
queue and Python cost on top.
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.chaos import PANEL_TOKEN, _bind, _fresh_pg_database, _settle_orders

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "bench" / "results" / "fulfillment.json"
WORKERS = 16  # the critical queue's fixed concurrency (SPEC 1.3)


def run(database_url, orders=2000, latency_ms=20, timeout_s=240):
    from peewee import fn

    from fakes.remnawave import FakeRemnawave
    from models.base import db, utcnow
    from models.fulfillment import FulfillmentOperation

    _bind(database_url)
    panel = FakeRemnawave(token=PANEL_TOKEN, latency_ms=latency_ms)
    panel.start()
    worker = None
    log_path = Path(tempfile.mkdtemp(prefix="omniflow-fulfillment-bench-")) / "worker.log"
    try:
        _settle_orders(orders)
        db.close()
        env = dict(
            os.environ,
            DATABASE_URL=database_url,
            APP_REMNAWAVE_URL=panel.base_url,
            APP_REMNAWAVE_TOKEN=PANEL_TOKEN,
            LOG_LEVEL="WARNING",
        )
        started = time.monotonic()
        worker = subprocess.Popen(
            [sys.executable, "omniflow.py", "worker"],
            cwd=ROOT,
            env=env,
            stdout=open(log_path, "w"),
            stderr=subprocess.STDOUT,
        )
        # The clock starts at the first claim: the worker process's start-up
        # (interpreter, imports, connection pool) is not fulfillment work.
        while time.monotonic() - started < timeout_s and worker.poll() is None:
            claimed = FulfillmentOperation.select().where(FulfillmentOperation.status != "pending").exists()
            db.close()
            if claimed:
                break
            time.sleep(0.01)
        startup_s = time.monotonic() - started
        started, first_claim = time.monotonic(), utcnow()
        done = 0
        while time.monotonic() - started < timeout_s:
            done = FulfillmentOperation.select().where(FulfillmentOperation.status == "succeeded").count()
            db.close()
            if done == orders:
                break
            time.sleep(0.1)
        # The clock stops at the last operation's completion as recorded, not
        # at the poll that noticed it.
        last = FulfillmentOperation.select(fn.MAX(FulfillmentOperation.completed_at)).scalar()
        db.close()
        elapsed = (last - first_claim).total_seconds() if done == orders else time.monotonic() - started
        calls = sum(panel.stats()["calls"].values())
        calls_per_operation = calls / max(done, 1)
        ideal = WORKERS / (calls_per_operation * latency_ms / 1000.0)
        ops_per_s = done / elapsed
        return {
            "orders": orders,
            "completed": done,
            "latency_ms": latency_ms,
            "workers": WORKERS,
            "elapsed_s": round(elapsed, 2),
            "worker_startup_s": round(startup_s, 2),
            "ops_per_s": round(ops_per_s, 1),
            "calls_per_operation": round(calls_per_operation, 2),
            "ideal_ops_per_s": round(ideal, 1),
            "ratio_to_ideal": round(ops_per_s / ideal, 3),
            "panel_calls": panel.stats()["calls"],
            "max_panel_concurrency": panel.stats()["max_in_flight"],
            "database": "postgres" if database_url.startswith("postgres") else "sqlite",
            "worker_log": str(log_path),
        }
    finally:
        if worker is not None and worker.poll() is None:
            worker.send_signal(signal.SIGTERM)
            try:
                worker.wait(30)
            except subprocess.TimeoutExpired:
                worker.kill()
        panel.stop()
        db.close()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--orders", type=int, default=2000)
    parser.add_argument("--latency-ms", type=float, default=20)
    parser.add_argument("--sqlite", action="store_true")
    parser.add_argument(
        "--pg-url",
        default=os.environ.get("BENCH_DATABASE_URL")
        or os.environ.get("DATABASE_URL")
        or "postgresql://postgres@127.0.0.1:5432/postgres",
    )
    parser.add_argument("--out", default=str(DEFAULT_OUT))
    args = parser.parse_args(argv)
    if args.sqlite:
        database_url = f"sqlite:///{tempfile.mkdtemp(prefix='omniflow-fulfillment-')}/bench.sqlite3"
    else:
        database_url = _fresh_pg_database(args.pg_url)
    figures = run(database_url, orders=args.orders, latency_ms=args.latency_ms)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(figures, indent=2, sort_keys=True) + "\n")
    for key in ("database", "orders", "completed", "worker_startup_s", "elapsed_s", "ops_per_s", "calls_per_operation",
                "ideal_ops_per_s", "ratio_to_ideal", "max_panel_concurrency"):
        print(f"{key:>22}: {figures[key]}")
    print(f"wrote {args.out}")
    return 0 if figures["completed"] == figures["orders"] else 1


if __name__ == "__main__":
    sys.exit(main())
