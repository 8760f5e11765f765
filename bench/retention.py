"""Retention on PostgreSQL with 1 000 000 expired rows in each of three disposable tables.

    python -m bench.retention [--rows 1000000] [--kept 100000] [--batch 5000]
                              [--out bench/results/retention.json]

A fresh database gets, per table, `rows` rows past their window and `kept`
rows inside it: entitlement drifts resolved 100 days ago (and 10 days ago),
outbox events published 30 days ago (and a day ago), raw provider webhook
events (`provider_webhook_events`) whose `retain_until` passed a day ago
(and is a month ahead).
The tables are analysed, the plan of each step's batch is printed, then one
`ops.retention.sweep` runs and is timed: total seconds, rows per second, and
the longest single batch transaction (each batch is one), target <= 1 s.
"""

import argparse
import json
import os
import time
from pathlib import Path

import psycopg2

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "bench" / "results" / "retention.json"
BENCH_DB = "omniflow_retention_bench"
FILL = {
    "entitlement_drifts": """
        INSERT INTO entitlement_drifts (entitlement_id, kind, status, expected, observed, detected_at, resolved_at)
        SELECT 1, (ARRAY['expiry','traffic','device_limit','squads','status'])[1 + n %% 5], 'resolved', '{}', '{}',
               now() - %(age)s::interval - interval '1 day', now() - %(age)s::interval + n * interval '1 millisecond'
        FROM generate_series(1, %(count)s) AS n""",
    "outbox_events": """
        INSERT INTO outbox_events (topic, payload, aggregate, created_at, routed_at, published_at)
        SELECT 'order.paid', '{"orderId":' || n || '}', 'order:' || n, now() - %(age)s::interval - interval '1 minute',
               now() - %(age)s::interval - interval '1 minute', now() - %(age)s::interval + n * interval '1 millisecond'
        FROM generate_series(1, %(count)s) AS n""",
    # Raw webhook bodies are kept until their own retain_until (set at intake), not a window.
    "provider_webhook_events": """
        INSERT INTO provider_webhook_events (provider, provider_event_id, received_at, signature_ok, processed_at,
                                             outcome, retain_until, body)
        SELECT 'yookassa', 'bench-' || n, now() - %(age)s::interval - interval '30 days', true,
               now() - %(age)s::interval - interval '30 days', 'processed',
               now() - %(age)s::interval + n * interval '1 millisecond',
               convert_to('{"event":"payment.succeeded","object":{"id":"bench-' || n || '"}}', 'UTF8')
        FROM generate_series(1, %(count)s) AS n""",
}
# (expired, kept): how far in the past each table's dating column lies.
AGES = {
    "entitlement_drifts": ("100 days", "10 days"),
    "outbox_events": ("30 days", "1 day"),
    "provider_webhook_events": ("1 day", "-30 days"),  # retain_until passed, and a month ahead
}


def fresh_database(server_url):
    from bench.chaos import _fresh_pg_database

    return _fresh_pg_database(server_url, BENCH_DB)


def migrate(url):
    import migrations
    from config.database import open_database
    from config.settings import parse_database_url

    database = open_database(parse_database_url(url))
    migrations.apply(database)
    database.close()


def fill(url, rows, kept):
    with psycopg2.connect(url) as connection, connection.cursor() as cursor:
        cursor.execute("INSERT INTO customers (id, display_name, created_at) VALUES ('bench', 'Bench', now())")
        cursor.execute(
            "INSERT INTO plans (code, name, duration_days, price_minor, currency, squad_ids, grace_period_hours,"
            " active) VALUES ('bench', 'Bench', 30, 500, 'USD', '[]', 0, true)"
        )
        cursor.execute(
            "INSERT INTO subscriptions (id, customer_id, slot, created_at) VALUES ('bench-sub', 'bench', 1, now())"
        )
        cursor.execute(
            "INSERT INTO orders (customer_id, subscription_id, plan_id, operation, status, amount_minor, currency,"
            " created_at) VALUES ('bench', 'bench-sub', 1, 'purchase', 'paid', 500, 'USD', now())"
        )
        cursor.execute(
            "INSERT INTO entitlements (order_id, subscription_id, plan_id, status, starts_at, ends_at, squad_ids,"
            " grace_period_hours, created_at, updated_at)"
            " VALUES (1, 'bench-sub', 1, 'active', now(), now() + interval '30 days', '[]', 0, now(), now())"
        )
        for table, statement in FILL.items():
            expired_age, kept_age = AGES[table]
            started = time.monotonic()
            cursor.execute(statement, {"age": expired_age, "count": rows})
            cursor.execute(statement, {"age": kept_age, "count": kept})
            connection.commit()
            print(f"filled {table}: {rows} expired + {kept} kept in {time.monotonic() - started:.1f}s")
        for table in FILL:
            cursor.execute(f"ANALYZE {table}")
        connection.commit()
    return sorted(FILL)


def plans(tables, settings):
    from models.base import db, utcnow
    from ops.retention import BATCH, STEPS

    lines = {}
    for step in STEPS:
        if step.table not in tables:
            continue
        cutoff = step.cutoff(settings, utcnow())
        cursor = db.execute_sql(f"EXPLAIN (COSTS OFF) {step.batch_sql('%s', True)}", [cutoff, cutoff, BATCH])
        lines[step.table] = [line for (line,) in cursor.fetchall()]
    return lines


def run(url, rows, kept, batch):
    from config.database import bind_database
    from config.settings import load_settings, parse_database_url
    from models.base import db
    from ops import retention

    migrate(url)
    tables = fill(url, rows, kept)
    bind_database(parse_database_url(url))
    settings = load_settings(environ={})
    explained = plans(tables, settings)
    for table, lines in explained.items():
        print(f"plan of a {table} batch:\n  " + "\n  ".join(lines))
    load_before = os.getloadavg()
    started = time.monotonic()
    results = retention.sweep(settings, batch=batch)
    seconds = time.monotonic() - started
    load_after = os.getloadavg()
    removed = {result.table: result.removed for result in results}
    left = {table: db.execute_sql(f"SELECT COUNT(*) FROM {table}").fetchone()[0] for table in tables}
    db.close()
    total = sum(removed.values())
    figures = {
        "rows": total,
        "seconds": round(seconds, 2),
        "rows_per_s": round(total / seconds) if seconds else None,
        "max_txn_s": round(max(result.longest_batch_s for result in results), 3),
        "batch": batch,
        "batches": sum(result.batches for result in results),
        "removed": removed,
        "longest_batch_s": {result.table: round(result.longest_batch_s, 3) for result in results if result.batches},
        "left": left,
        "errors": {result.table: result.error for result in results if result.error},
        "plans": explained,
        "kept": kept,
        # The machine is shared: its 1-minute load average before and after the sweep.
        "load_1min": [round(load_before[0], 2), round(load_after[0], 2)],
        "cpus": os.cpu_count(),
    }
    return figures


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--kept", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=5000)
    parser.add_argument(
        "--pg-url",
        default=os.environ.get("BENCH_DATABASE_URL")
        or os.environ.get("DATABASE_URL")
        or "postgresql://postgres@127.0.0.1:5432/postgres",
    )
    parser.add_argument("--out", default=str(DEFAULT_OUT))
    args = parser.parse_args(argv)
    url = fresh_database(args.pg_url)
    figures = run(url, args.rows, args.kept, args.batch)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(figures, indent=2, sort_keys=True) + "\n")
    for key in ("rows", "seconds", "rows_per_s", "max_txn_s", "batches", "removed", "left", "errors"):
        print(f"{key:>11}: {figures[key]}")
    print(f"wrote {args.out}")
    return 1 if figures["errors"] or figures["max_txn_s"] > 1.0 else 0


if __name__ == "__main__":
    raise SystemExit(main())
