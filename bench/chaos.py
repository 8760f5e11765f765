"""Chaos run: paid orders become panel users exactly once while everything fails.

    python -m bench.chaos [--orders 500] [--sqlite] [--out bench/results/chaos.json]

N orders are settled; real worker processes (`python omniflow.py worker`)
fulfil them against the fake Remnawave panel, which fails 30 % of calls and
applies-then-drops 5 % more (the write happens, the answer never arrives);
one worker is SIGKILLed mid-run and a replacement started. The run ends when
every entitlement is active (or at the timeout), then checks: exactly one
panel user per subscription, no create applied twice, no paid order left
without access, and a history row for every attempt of every operation.

Waiting is compressed, nothing else: backoffs of 10 s to 21 min would make
the run last hours, so the harness lets every backoff elapse at once (the
retryable job and its operation's next attempt become due) and runs the
revive pass as if its 10-minute idle window had passed, which is what gives
an operation whose job used up its 12 attempts a new job.
Leases (2 minutes), rescue of the killed worker's jobs and everything the
workers do are real; the 2-minute lease of the operations the killed worker
held is what bounds the convergence time. `run(expire_killed_leases=True)`
compresses that wait too: once the killed worker is gone, the leases of the
operations it held end at once (which is what their expiry would do two
minutes later); with the test worker's fast rescue (`worker_argv`) a run
then converges in seconds, which is how the suite runs it behind PgBouncer.
"""
import argparse
import datetime
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from fakes.remnawave import api_token

ROOT = Path(__file__).resolve().parents[1]
PANEL_TOKEN = api_token("chaos")
DEFAULT_OUT = ROOT / "bench" / "results" / "chaos.json"
BENCH_DB = "omniflow_chaos"


def _bind(database_url):
    import migrations
    from config.database import bind_database
    from config.settings import parse_database_url

    database = bind_database(parse_database_url(database_url), pool_size=8)
    migrations.apply(database)
    return database


def _settle_orders(count):
    import json as _json

    from commerce.settlement import settle_order
    from models.commerce import Customer, Order, Plan

    plan = Plan.create(
        code=f"chaos-{time.time_ns()}",
        name="Chaos",
        duration_days=30,
        traffic_allowance_bytes=50 << 30,
        device_limit=3,
        squad_ids=_json.dumps(["0f4a1c2e-5b6d-4e7f-8a9b-0c1d2e3f4a5b"]),
        grace_period_hours=24,
        price_minor=500,
    )
    for index in range(count):
        customer = Customer.create(display_name=f"chaos-{index}")
        order = Order.create(
            customer=customer, plan=plan, operation="purchase", status="pending", amount_minor=500, provider="yookassa"
        )
        settle_order(order.id, "provider_webhook")


class FastForward(threading.Thread):
    """Compresses waiting: backoffs pass at once, revive sees its idle window passed."""

    def __init__(self, stop):
        super().__init__(name="chaos-fast-forward", daemon=True)
        self.stop = stop

    def run(self):
        from jobs.passes import fulfillment_revive
        from models.base import db, utcnow
        from models.fulfillment import FulfillmentOperation
        from models.jobs import Job

        last_revive = 0.0
        while not self.stop.wait(0.5):
            try:
                now = utcnow()
                Job.update(scheduled_at=now).where((Job.kind == "fulfillment") & (Job.state == "retryable")).execute()
                FulfillmentOperation.update(next_attempt_at=now).where(
                    (FulfillmentOperation.status == "retrying") & (FulfillmentOperation.next_attempt_at > now)
                ).execute()
                if time.monotonic() - last_revive > 5:
                    fulfillment_revive.dispatch(utcnow() + datetime.timedelta(minutes=11))
                    last_revive = time.monotonic()
            except Exception as error:  # the database is shared with busy workers; try again
                print(f"fast-forward: {type(error).__name__}", file=sys.stderr)
            finally:
                db.close()


WORKER_ARGV = ("omniflow.py", "worker", "--shutdown-timeout", "5")


def _start_worker(database_url, panel_url, log_dir, index, argv=WORKER_ARGV, extra_env=None, name="chaos-worker"):
    """A real worker process (`argv`, `omniflow.py worker` by default) logging to `log_dir`; `extra_env` adds settings."""
    env = dict(
        os.environ,
        DATABASE_URL=database_url,
        APP_REMNAWAVE_URL=panel_url,
        APP_REMNAWAVE_TOKEN=PANEL_TOKEN,
        LOG_LEVEL="WARNING",
        **(extra_env or {}),
    )
    log = open(Path(log_dir) / f"{name}-{index}.log", "w")
    return subprocess.Popen(
        [sys.executable, *argv],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def _expire_leases_of(pid):
    """End the leases of the operations a killed worker process held (it is gone: nothing will record them)."""
    import socket

    from models.base import utcnow
    from models.fulfillment import FulfillmentOperation
    from models.jobs import Job

    held = Job.select(Job.args).where(
        (Job.kind == "fulfillment")
        & (Job.state == "running")
        & Job.attempted_by.startswith(f"{socket.gethostname()}:{pid}:")
    )
    operations = [json.loads(job.args)["operationId"] for job in held]
    if operations:
        FulfillmentOperation.update(next_attempt_at=utcnow()).where(
            FulfillmentOperation.id.in_(operations) & (FulfillmentOperation.status == "running")
        ).execute()
    return len(operations)


def _progress():
    from models.fulfillment import Entitlement

    total = Entitlement.select().count()
    active = Entitlement.select().where(Entitlement.status == "active").count()
    return active, total


def _verify(panel):
    from fulfillment.usernames import username_for
    from models.commerce import Order, Subscription
    from models.fulfillment import Entitlement, FulfillmentHistory, FulfillmentOperation

    users = panel.users()
    subscriptions = {username_for(s.id): s for s in Subscription.select()}
    per_subscription = {}
    strays = 0
    for user in users:
        if user["username"] in subscriptions:
            per_subscription[user["username"]] = per_subscription.get(user["username"], 0) + 1
        else:
            strays += 1
    duplicate_users = strays + sum(n - 1 for n in per_subscription.values() if n > 1)
    creates = panel.stats()["creates_applied"]
    double_applied = sum(n - 1 for n in creates.values() if n > 1)
    lost = (
        Order.select()
        .join(Entitlement, on=(Entitlement.order == Order.id))
        .where(Order.status.in_(("paid", "fulfilled")), Entitlement.status != "active")
        .count()
    )
    unexplained = 0
    for operation in FulfillmentOperation.select():
        explained = {
            h.attempt
            for h in FulfillmentHistory.select(FulfillmentHistory.attempt).where(
                FulfillmentHistory.operation == operation.id
            )
        }
        unexplained += len(set(range(1, operation.attempt_count + 1)) - explained)
    without_user = len(subscriptions) - len(per_subscription)
    return {
        "duplicate_users": duplicate_users,
        "double_applied_creates": double_applied,
        "lost_orders": lost,
        "subscriptions_without_user": without_user,
        "unexplained_attempts": unexplained,
        "operations": FulfillmentOperation.select().count(),
        "attempts": sum(o.attempt_count for o in FulfillmentOperation.select(FulfillmentOperation.attempt_count)),
        "history_rows": FulfillmentHistory.select().count(),
    }


def run(
    database_url,
    orders=500,
    fail_rate=0.30,
    lost_rate=0.05,
    workers=2,
    timeout_s=300,
    log_dir=None,
    worker_argv=WORKER_ARGV,
    worker_env=None,
    expire_killed_leases=False,
):
    """Run the chaos scenario against a migrated, empty database; returns the figures.

    `worker_argv` starts a worker (after the interpreter, from the project root) and `worker_env`
    adds to its environment; `expire_killed_leases` ends the killed worker's leases at once."""
    from fakes.remnawave import FakeRemnawave
    from models.base import db

    log_dir = log_dir or tempfile.mkdtemp(prefix="omniflow-chaos-")
    _bind(database_url)
    panel = FakeRemnawave(token=PANEL_TOKEN, seed=7)
    panel.start()
    processes = []
    stop = threading.Event()
    try:
        settle_started = time.monotonic()
        _settle_orders(orders)
        settle_s = time.monotonic() - settle_started
        db.close()
        panel.set_faults(fail_rate=fail_rate, lost_response_rate=lost_rate)
        started = time.monotonic()

        def start(index):
            return _start_worker(database_url, panel.base_url, log_dir, index, worker_argv, worker_env)

        processes = [start(i) for i in range(workers)]
        FastForward(stop).start()

        killed_at = None
        converged_at = None
        leases_ended = None
        while time.monotonic() - started < timeout_s:
            active, total = _progress()
            db.close()
            if killed_at is None and active >= total // 4:
                processes[0].send_signal(signal.SIGKILL)
                processes[0].wait()
                killed_at = time.monotonic() - started
                if expire_killed_leases:
                    leases_ended = _expire_leases_of(processes[0].pid)
                processes.append(start(len(processes)))
            if active == total:
                converged_at = time.monotonic() - started
                break
            time.sleep(0.5)
        stop.set()
        panel.clear_faults()
        figures = _verify(panel)
        figures.update(
            orders=orders,
            panel_calls=panel.stats()["calls"],
            converge_s=round(converged_at, 1) if converged_at is not None else None,
            worker_killed_at_s=round(killed_at, 1) if killed_at is not None else None,
            killed_worker_leases_ended=leases_ended,
            settle_s=round(settle_s, 1),
            faults={"fail_rate": fail_rate, "lost_response_rate": lost_rate},
            workers=workers,
            database="postgres" if database_url.startswith("postgres") else "sqlite",
            logs=str(log_dir),
        )
        return figures
    finally:
        stop.set()
        _stop_workers(processes)
        panel.stop()
        db.close()


def _stop_workers(processes):
    """SIGTERM every worker still running, then wait for each (killing one that does not stop)."""
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    for process in processes:
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()


def _fresh_pg_database(server_url, name=BENCH_DB):
    import psycopg2
    from urllib.parse import urlsplit, urlunsplit

    connection = psycopg2.connect(server_url)
    connection.autocommit = True
    cursor = connection.cursor()
    cursor.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
        [name],
    )
    cursor.execute(f'DROP DATABASE IF EXISTS "{name}"')
    cursor.execute(f'CREATE DATABASE "{name}"')
    connection.close()
    parts = urlsplit(server_url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, "", ""))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--orders", type=int, default=500)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=270)
    parser.add_argument("--sqlite", action="store_true", help="run on a SQLite file instead of PostgreSQL")
    parser.add_argument("--pg-url", default=os.environ.get("BENCH_DATABASE_URL") or os.environ.get("DATABASE_URL")
                        or "postgresql://postgres@127.0.0.1:5432/postgres",
                        help="any database on the PostgreSQL server; the run uses its own database omniflow_chaos")
    parser.add_argument("--out", default=str(DEFAULT_OUT))
    args = parser.parse_args(argv)

    if args.sqlite:
        database_url = f"sqlite:///{tempfile.mkdtemp(prefix='omniflow-chaos-')}/chaos.sqlite3"
    else:
        database_url = _fresh_pg_database(args.pg_url)
    figures = run(database_url, orders=args.orders, workers=args.workers, timeout_s=args.timeout)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(figures, indent=2, sort_keys=True) + "\n")
    for key in ("orders", "converge_s", "duplicate_users", "double_applied_creates", "lost_orders",
                "unexplained_attempts", "worker_killed_at_s", "attempts", "history_rows"):
        print(f"{key:>24}: {figures[key]}")
    print(f"{'panel_calls':>24}: {json.dumps(figures['panel_calls'], sort_keys=True)}")
    print(f"wrote {args.out}")
    failed = figures["duplicate_users"] or figures["double_applied_creates"] or figures["lost_orders"]
    return 1 if failed or figures["converge_s"] is None else 0


if __name__ == "__main__":
    sys.exit(main())
