"""Fulfillment throughput: paid orders through a worker process to a slow panel, beside a bare client.

    python -m bench.fulfillment [--orders 2000] [--latency-ms 20] [--rounds 3] [--sqlite]
                                [--out bench/results/fulfillment.json]

Each round runs two sides against a fresh fake Remnawave panel answering
every call `latency_ms` after it arrived, one after the other (the order
alternating round by round):

- worker: N orders are settled in a fresh database first (not timed). Then
  one worker process (`python omniflow.py worker`: 16 threads on the
  critical queue) fulfils them. The clock runs from the worker's first claim
  until the last operation's recorded completion (the process's start-up is
  reported apart, as worker_startup_s).
- bare: a fresh process whose 16 threads make the same panel calls for N
  new subscriptions (two lookups by username, then the create), through the
  same client and transport (integrations/remnawave.py), with no database
  and no queue: the ceiling of Python and HTTP on this machine. Its clock
  runs from the first call to the N-th create's answer.

Two ratios: to the ideal, 16 / (calls per operation × latency), which
ignores the machine's CPU and so depends on the machine; and to the bare
client, the same work without the database and the queue, which is what the
queue and the database cost on top, on whatever machine it runs. Figures
are medians over the rounds, with min and max.
"""
import argparse
import datetime
import itertools
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

from bench.chaos import PANEL_TOKEN, _bind, _fresh_pg_database, _settle_orders

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "bench" / "results" / "fulfillment.json"
WORKERS = 16  # the critical queue's fixed concurrency (SPEC 1.3)
RESULT_PREFIX = "RESULT "
BENCH_DB = "omniflow_fulfillment_bench"
# What the bare client creates: the values the settled orders' plan gives (bench/chaos.py).
BARE_TRAFFIC_BYTES = 50 << 30
BARE_DEVICE_LIMIT = 3
BARE_SQUADS = ["0f4a1c2e-5b6d-4e7f-8a9b-0c1d2e3f4a5b"]


def worker_round(database_url, orders=2000, latency_ms=20, timeout_s=240):
    """One worker-side round on a fresh database: the worker's figures."""
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
            "load_1min": round(os.getloadavg()[0], 2),
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
        if hasattr(db.obj, "close_all"):  # the next round drops this database
            db.obj.close_all()


def bare_round(orders=2000, latency_ms=20, timeout_s=240):
    """One bare-client round: a fresh process makes the panel calls of N creates with 16 threads."""
    from fakes.remnawave import FakeRemnawave

    panel = FakeRemnawave(token=PANEL_TOKEN, latency_ms=latency_ms)
    panel.start()
    try:
        env = dict(os.environ, APP_REMNAWAVE_URL=panel.base_url, APP_REMNAWAVE_TOKEN=PANEL_TOKEN)
        out = subprocess.run(
            [sys.executable, "-m", "bench.fulfillment", "--bare-client", "--orders", str(orders)],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout_s,
        )
        lines = [line for line in out.stdout.splitlines() if line.startswith(RESULT_PREFIX)]
        if not lines:
            raise RuntimeError(f"bare client exited {out.returncode} with no result:\n{out.stderr[-2000:]}")
        figures = json.loads(lines[-1][len(RESULT_PREFIX):])
        calls = sum(panel.stats()["calls"].values())
        figures.update(
            calls_per_operation=round(calls / max(figures["completed"], 1), 2),
            max_panel_concurrency=panel.stats()["max_in_flight"],
            load_1min=round(os.getloadavg()[0], 2),
        )
        return figures
    finally:
        panel.stop()


def bare_client(orders):
    """`--bare-client`: the worker's panel calls for N creates, 16 threads, no database, no queue.

    Each operation is what a create's run sends: a lookup by the
    subscription's username and by the legacy one (both 404), then the
    create, through the same RemnawaveClient (one kept-alive connection per
    thread). Threads take the next operation from a shared counter."""
    from fulfillment.usernames import candidate_usernames, username_for
    from integrations.remnawave import RemnawaveClient

    client = RemnawaveClient(os.environ["APP_REMNAWAVE_URL"], os.environ["APP_REMNAWAVE_TOKEN"])
    work = [(str(uuid.uuid4()), str(uuid.uuid4())) for _ in range(orders)]
    expire_at = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=31)
    next_index = itertools.count()  # next() on a count is atomic under the GIL
    done = []  # monotonic completion times (list.append is atomic)
    failures = []
    start = threading.Event()

    def run():
        start.wait()
        while True:
            index = next(next_index)
            if index >= orders:
                return
            subscription_id, customer_id = work[index]
            try:
                for name in candidate_usernames(subscription_id, customer_id, 1):
                    if client.get_user_by_username(name) is not None:
                        raise RuntimeError("bare client: a new username already exists")
                client.create_user(
                    username_for(subscription_id), expire_at, BARE_TRAFFIC_BYTES, BARE_DEVICE_LIMIT, BARE_SQUADS
                )
            except Exception as error:
                failures.append(type(error).__name__)
                continue
            done.append(time.monotonic())

    threads = [threading.Thread(target=run, name=f"bare-{k}") for k in range(WORKERS)]
    for thread in threads:
        thread.start()
    started = time.monotonic()
    start.set()
    for thread in threads:
        thread.join()
    elapsed = max(done) - started if done else float("nan")
    figures = {
        "orders": orders,
        "completed": len(done),
        "failures": len(failures),
        "elapsed_s": round(elapsed, 2),
        "ops_per_s": round(len(done) / elapsed, 1) if done else 0.0,
    }
    print(RESULT_PREFIX + json.dumps(figures), flush=True)
    return 0 if len(done) == orders else 1


def _spread(values, digits=1):
    return {"median": round(statistics.median(values), digits), "min": round(min(values), digits),
            "max": round(max(values), digits)}


def run(database_for_round, orders=2000, latency_ms=20, rounds=3, timeout_s=240):
    """`rounds` rounds of both sides, alternating which goes first; figures are medians."""
    worker_rounds, bare_rounds = [], []
    for index in range(rounds):
        sides = ["worker", "bare"] if index % 2 == 0 else ["bare", "worker"]
        for side in sides:
            if side == "worker":
                figures = worker_round(database_for_round(index), orders=orders, latency_ms=latency_ms,
                                       timeout_s=timeout_s)
                worker_rounds.append(figures)
            else:
                figures = bare_round(orders=orders, latency_ms=latency_ms, timeout_s=timeout_s)
                bare_rounds.append(figures)
            print(f"round {index + 1}: {side:>6} {figures['ops_per_s']:.1f} ops/s "
                  f"({figures['completed']} of {orders}, load {figures['load_1min']})", flush=True)
    ops = [r["ops_per_s"] for r in worker_rounds]
    bare = [r["ops_per_s"] for r in bare_rounds]
    calls_per_operation = statistics.median(r["calls_per_operation"] for r in worker_rounds)
    ideal = WORKERS / (calls_per_operation * latency_ms / 1000.0)
    ops_per_s, bare_per_s = statistics.median(ops), statistics.median(bare)
    return {
        "orders": orders,
        "completed": min(r["completed"] for r in worker_rounds),
        "latency_ms": latency_ms,
        "workers": WORKERS,
        "rounds": rounds,
        "database": worker_rounds[0]["database"],
        "ops_per_s": ops_per_s,
        "ops_per_s_range": [min(ops), max(ops)],
        "bare_http_ops_per_s": bare_per_s,
        "bare_http_ops_per_s_range": [min(bare), max(bare)],
        "calls_per_operation": calls_per_operation,
        "bare_calls_per_operation": statistics.median(r["calls_per_operation"] for r in bare_rounds),
        "ideal_ops_per_s": round(ideal, 1),
        # Depends on the machine: the ideal counts only the panel's latency, not the CPU.
        "ratio_to_ideal": round(ops_per_s / ideal, 3),
        "bare_ratio_to_ideal": round(bare_per_s / ideal, 3),
        # Holds across machines: the same calls with and without the database and the queue.
        "ratio_to_bare": round(ops_per_s / bare_per_s, 3),
        "ratio_to_bare_per_round": _spread([w["ops_per_s"] / b["ops_per_s"]
                                            for w, b in zip(worker_rounds, bare_rounds)], 3),
        "worker_startup_s": statistics.median(r["worker_startup_s"] for r in worker_rounds),
        "max_panel_concurrency": max(r["max_panel_concurrency"] for r in worker_rounds),
        "load_1min": _spread([r["load_1min"] for r in worker_rounds + bare_rounds], 2),
        "cpus": os.cpu_count(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "worker_rounds": worker_rounds,
        "bare_rounds": bare_rounds,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--orders", type=int, default=2000)
    parser.add_argument("--latency-ms", type=float, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sqlite", action="store_true")
    parser.add_argument(
        "--pg-url",
        default=os.environ.get("BENCH_DATABASE_URL")
        or os.environ.get("DATABASE_URL")
        or "postgresql://postgres@127.0.0.1:5432/postgres",
    )
    parser.add_argument("--out", default=str(DEFAULT_OUT))
    parser.add_argument("--bare-client", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.bare_client:
        return bare_client(args.orders)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    if args.sqlite:
        directory = tempfile.mkdtemp(prefix="omniflow-fulfillment-")

        def database_for_round(index):
            return f"sqlite:///{directory}/bench-{index}.sqlite3"
    else:

        def database_for_round(index):
            return _fresh_pg_database(args.pg_url, BENCH_DB)

    figures = run(database_for_round, orders=args.orders, latency_ms=args.latency_ms, rounds=args.rounds)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(figures, indent=2, sort_keys=True) + "\n")
    for key in ("database", "rounds", "orders", "completed", "worker_startup_s", "ops_per_s", "ops_per_s_range",
                "bare_http_ops_per_s", "bare_http_ops_per_s_range", "calls_per_operation", "ideal_ops_per_s",
                "ratio_to_ideal", "ratio_to_bare", "ratio_to_bare_per_round", "max_panel_concurrency", "load_1min"):
        print(f"{key:>26}: {figures[key]}")
    print(f"wrote {args.out}")
    return 0 if figures["completed"] == figures["orders"] else 1


if __name__ == "__main__":
    sys.exit(main())
