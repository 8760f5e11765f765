"""Outbox publishing throughput: events/s delivered to a local receiver, beside a bare requests loop.

    python -m bench.outbox [--events 2000] [--aggregates 500] [--rounds 5] [--sqlite] [--out bench/results/outbox.json]

One fake receiver (fakes/webhook_receiver.py, its own process; it verifies
every signature with `standardwebhooks`) and one destination pointing at it.
Each round runs both, one after the other:

- publisher: N events (across A aggregates, so a job delivers N/A events in
  order) are emitted (not timed); one worker process with 16 executors (the
  bulk queue raised from its production 4 to 16 for this run) routes them
  through the `outbox_publish` pass and delivers them as `outbox_delivery`
  jobs, each delivery recorded in the database;
- bare: the same number of bodies, signed the same way, POSTed one after the
  other from this process by a plain `requests.Session` (no database, no queue).

Both clocks are the receiver's: from its first accepted request to its N-th.
Rounds alternate the two, and the figures are each side's median; the
ratio is the publisher's median over the bare loop's.
"""

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "bench" / "results" / "outbox.json"
BENCH_DB = "omniflow_outbox_bench"
EXECUTORS = 16
BENCH_KEY = "b21uaWZsb3ctb3V0Ym94LWJlbmNoLWtleS0wMDAwMDE="  # benchmark only


def _free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Receiver:
    """The fake receiver in its own process, driven over its control routes."""

    def __init__(self, secret, log_dir):
        self.port = _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.url = self.base + "/hooks"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "fakes.webhook_receiver", "--secret", secret, "--port", str(self.port)],
            cwd=ROOT,
            stdout=open(Path(log_dir) / "receiver.log", "w"),
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                self.stats()
                return
            except requests.ConnectionError:
                time.sleep(0.05)
        raise RuntimeError("the fake receiver did not start")

    def stats(self):
        return requests.get(self.base + "/_fake/stats", timeout=5).json()

    def reset(self):
        requests.post(self.base + "/_fake/reset", timeout=5)

    def wait_for(self, count, timeout_s):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            stats = self.stats()
            if stats["distinct"] >= count:
                return stats
            time.sleep(0.05)
        raise RuntimeError(f"only {self.stats()['distinct']} of {count} arrived within {timeout_s} s")

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()


def _elapsed(stats):
    return stats["last_at"] - stats["first_at"]


def publisher_round(receiver, events, aggregates, round_index, timeout_s):
    from models.base import db
    from ops.records import emit_event

    receiver.reset()
    with db.atomic():
        for n in range(events):
            emit_event(
                "order.paid", {"round": round_index, "n": n}, aggregate=f"customer:{round_index}:{n % aggregates}"
            )
    db.close()
    stats = receiver.wait_for(events, timeout_s)
    return events / _elapsed(stats), stats


def bare_round(receiver, secret, events):
    from integrations.webhooks import signature_headers
    from jobs.outbox_delivery import event_body
    from models.base import utcnow

    receiver.reset()
    session = requests.Session()
    created = utcnow()
    for n in range(events):
        body = event_body("order.paid", json.dumps({"n": n, "round": -1}), created)
        headers = {"Content-Type": "application/json", **signature_headers(secret, f"bare-{n}", body, time.time())}
        answer = session.post(receiver.url, data=body.encode(), headers=headers, timeout=10)
        answer.raise_for_status()
    stats = receiver.wait_for(events, 30)
    return events / _elapsed(stats), stats


def run(database_url, events=2000, aggregates=500, rounds=5, timeout_s=120):
    from bench.chaos import _bind
    from models.base import db
    from ops import outbox, sealing

    _bind(database_url)
    sealing.use_keys(BENCH_KEY)
    log_dir = Path(tempfile.mkdtemp(prefix="omniflow-outbox-bench-"))
    secret = outbox.generate_secret()
    receiver = Receiver(secret, log_dir)
    worker = None
    try:
        outbox.allow_private_destinations(True)  # the receiver listens on 127.0.0.1
        outbox.add_destination(receiver.url, "*", secret, "bench", "outbox benchmark")
        db.close()
        env = dict(
            os.environ,
            DATABASE_URL=database_url,
            APP_DATA_ENCRYPTION_KEY=BENCH_KEY,
            APP_OUTBOX_ALLOW_PRIVATE_DESTINATIONS="true",
            LOG_LEVEL="WARNING",
        )
        worker = subprocess.Popen(
            [sys.executable, "-m", "bench.outbox", "--worker"],
            cwd=ROOT,
            env=env,
            stdout=open(log_dir / "worker.log", "w"),
            stderr=subprocess.STDOUT,
        )
        published, bare = [], []
        for index in range(rounds):
            rate, stats = publisher_round(receiver, events, aggregates, index, timeout_s)
            published.append(round(rate, 1))
            print(f"round {index + 1}: publisher {rate:.0f} events/s ({stats['accepted']} accepted)", flush=True)
            rate, _ = bare_round(receiver, secret, events)
            bare.append(round(rate, 1))
            print(f"round {index + 1}: bare requests {rate:.0f} events/s", flush=True)
        events_per_s, bare_per_s = statistics.median(published), statistics.median(bare)
        return {
            "events_per_s": events_per_s,
            "bare_per_s": bare_per_s,
            "ratio_to_bare": round(events_per_s / bare_per_s, 3),
            "events": events,
            "aggregates": aggregates,
            "executors": EXECUTORS,
            "rounds": rounds,
            "events_per_s_rounds": published,
            "bare_per_s_rounds": bare,
            "database": "postgres" if database_url.startswith("postgres") else "sqlite",
            "logs": str(log_dir),
        }
    finally:
        if worker is not None and worker.poll() is None:
            worker.send_signal(signal.SIGTERM)
            try:
                worker.wait(30)
            except subprocess.TimeoutExpired:
                worker.kill()
        receiver.stop()
        db.close()


def serve_worker():
    """The benchmark's worker: `python omniflow.py worker` with the bulk queue at 16 executors."""
    import omniflow
    from jobs import huey
    from jobs.engine.kinds import QUEUES

    concurrency = {**QUEUES, "bulk": EXECUTORS}
    settings = omniflow.bootstrap(pool_size=sum(concurrency.values()) + omniflow.WORKER_POOL_EXTRA)
    omniflow.require_current_schema()
    omniflow.load_job_kinds(settings)
    huey.consumer(concurrency=concurrency).run()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--aggregates", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sqlite", action="store_true")
    parser.add_argument(
        "--pg-url",
        default=os.environ.get("BENCH_DATABASE_URL")
        or os.environ.get("DATABASE_URL")
        or "postgresql://postgres@127.0.0.1:5432/postgres",
    )
    parser.add_argument("--out", default=str(DEFAULT_OUT))
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        serve_worker()
        return 0
    from bench.chaos import _fresh_pg_database

    if args.sqlite:
        database_url = f"sqlite:///{tempfile.mkdtemp(prefix='omniflow-outbox-')}/bench.sqlite3"
    else:
        database_url = _fresh_pg_database(args.pg_url, BENCH_DB)
    figures = run(database_url, events=args.events, aggregates=args.aggregates, rounds=args.rounds)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(figures, indent=2) + "\n")
    for key, value in figures.items():
        print(f"{key:>20}: {value}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
