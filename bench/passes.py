"""The commerce passes' run time on PostgreSQL, at 10 000 and at 1 000 000 rows of the tables they read.

    python -m bench.passes [--rounds 5] [--out bench/results/passes.json]

Two fresh databases, one per size N, each with N subscriptions, each with
its paid order, entitlement and payment intent (customers hold ten
subscriptions each), and rows that are mostly NOT due:

- entitlements (renewal): periods ending 2 to 32 days ahead, half of them
  auto-renewing; one in 30 ends within the next day without auto-renew
  (in the index's range, but not due);
- orders (commerce_maintenance): the N paid orders, no payment deadline,
  plus N / 1000 pending orders whose deadline is hours away;
- payment intents (payment_reconcile): the N succeeded, plus N / 100
  pending intents polled a moment ago (inside the two minutes' grace).

Every round makes one batch due in each database and times one run of each
pass on it, the sizes interleaved (their order alternating per round): 100
auto-renewing periods ending within the hour, paid from funded wallets
(`renewal.run()`: 100 renewals settled); 100 pending orders past their
deadline with an open intent each (never created at the provider), 10 expired bonus credits, 10 abandoned
carts (`commerce_maintenance.maintain()`); 100 intents pending for five
minutes (`payment_reconcile.dispatch()`: 100 `payment_poll` jobs inserted;
the polls are HTTP calls the jobs make, not the pass). What a round made due
is checked after the run, and cleared (untimed) before the next. A first
round warms up and is not counted; the figures are medians. The target: the
time at 1 M is at most 3 × the time at 10 k, because each pass reads what is
due through an index and does a bounded batch. The plans of the passes'
selecting queries at 1 M are printed and kept in the JSON.
"""

import argparse
import datetime
import json
import os
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "bench" / "results" / "passes.json"
SIZES = {"10k": 10_000, "1m": 1_000_000}
DUE = 100
PRICE = 19900
SUBSCRIPTIONS_PER_CUSTOMER = 10
PASSES = ("renewal", "commerce_maintenance", "payment_reconcile")


def fresh_database(server_url, name):
    from bench.chaos import _fresh_pg_database

    return _fresh_pg_database(server_url, name)


def open_bench_database(url):
    import migrations
    from config.database import open_database
    from config.settings import parse_database_url

    database = open_database(parse_database_url(url), pool_size=4)
    migrations.apply(database)
    return database


def fill(database, rows, renewing):
    """The mostly-not-due rows of one database; `renewing` subscriptions are the rounds' renewals."""
    from models.base import utcnow

    now = utcnow()
    customers = rows // SUBSCRIPTIONS_PER_CUSTOMER
    statements = [
        (
            "INSERT INTO plans (code, name, duration_days, squad_ids, grace_period_hours, price_minor, currency,"
            " active, trial) VALUES ('bench', 'Bench', 30, '[]', 0, %s, 'RUB', TRUE, FALSE)",
            (PRICE,),
        ),
        ("INSERT INTO plan_prices (plan_id, currency, amount_minor) VALUES (1, 'RUB', %s)", (PRICE,)),
        (
            "INSERT INTO customers (id, display_name, blocked, created_at)"
            " SELECT 'c' || n, 'bench ' || n, FALSE, %s FROM generate_series(1, %s) AS n",
            (now, customers),
        ),
        (
            "INSERT INTO subscriptions (id, customer_id, slot, plan_id, auto_renew, created_at)"
            " SELECT 's' || n, 'c' || ((n - 1) / %s + 1), (n - 1) %% %s + 1, 1,"
            " n <= %s OR (n %% 30 <> 0 AND n %% 2 = 0), %s FROM generate_series(1, %s) AS n",
            (SUBSCRIPTIONS_PER_CUSTOMER, SUBSCRIPTIONS_PER_CUSTOMER, renewing, now, rows),
        ),
        (
            "INSERT INTO orders (customer_id, subscription_id, plan_id, operation, status, amount_minor, currency,"
            " provider, settled_by, created_at, paid_at)"
            " SELECT 'c' || ((n - 1) / %s + 1), 's' || n, 1, 'purchase', 'paid', %s, 'RUB', 'yookassa',"
            " 'provider_webhook', %s, %s FROM generate_series(1, %s) AS n ORDER BY n",
            (SUBSCRIPTIONS_PER_CUSTOMER, PRICE, now, now, rows),
        ),
        # Period ends: one in 30 within the next day (not auto-renewing), the rest 2 to 32 days ahead;
        # the renewing ones (the first) too, until their round brings their end within the hour.
        (
            "INSERT INTO entitlements (order_id, subscription_id, plan_id, status, starts_at, ends_at, squad_ids,"
            " grace_period_hours, created_at, updated_at)"
            " SELECT n, 's' || n, 1, 'active', e - interval '30 days', e, '[]', 0, %s, %s FROM ("
            "   SELECT n, CASE WHEN n %% 30 = 0 AND n > %s THEN %s + (n / 30 %% 23 + 1) * interval '1 hour'"
            "                  ELSE %s + interval '2 days' + (n %% 720) * interval '1 hour' END AS e"
            "   FROM generate_series(1, %s) AS n) AS periods",
            (now, now, renewing, now, now, rows),
        ),
        (
            "INSERT INTO payment_intents (order_id, provider, provider_payment_id, amount_minor, currency, status,"
            " idempotence_key, created_at, updated_at, last_polled_at)"
            " SELECT n, 'yookassa', 'paid-' || n, %s, 'RUB', 'succeeded', 'order-' || n || '-yookassa-1', %s, %s,"
            " NULL FROM generate_series(1, %s) AS n",
            (PRICE, now, now, rows),
        ),
        (
            "INSERT INTO payment_intents (order_id, provider, provider_payment_id, amount_minor, currency, status,"
            " idempotence_key, created_at, updated_at, last_polled_at)"
            " SELECT n, 'yookassa', 'waiting-' || n, %s, 'RUB', 'pending', 'order-' || n || '-yookassa-2', %s, %s,"
            " %s FROM generate_series(1, %s) AS n",
            (PRICE, now, now, now, rows // 100),
        ),
        (
            "INSERT INTO orders (customer_id, plan_id, operation, status, amount_minor, currency, provider,"
            " created_at, expires_at)"
            " SELECT 'c1', 1, 'purchase', 'pending', %s, 'RUB', 'yookassa', %s, %s + interval '3 hours'"
            " FROM generate_series(1, %s) AS n",
            (PRICE, now, now, rows // 1000),
        ),
    ]
    with database.atomic():
        for sql, params in statements:
            database.execute_sql(sql, params)
    for table in ("customers", "subscriptions", "orders", "entitlements", "payment_intents"):
        database.execute_sql(f"ANALYZE {table}")


def fund(renewing):
    """Each customer of the renewing subscriptions gets a wallet that pays for all of them."""
    from commerce import ledger
    from models.base import db

    customers = sorted({(n - 1) // SUBSCRIPTIONS_PER_CUSTOMER + 1 for n in range(1, renewing + 1)})
    amount = PRICE * SUBSCRIPTIONS_PER_CUSTOMER
    for customer in customers:
        with db.atomic():
            ledger.post(
                "topup",
                [
                    ledger.Entry(ledger.provider_clearing("cryptobot"), -amount, "RUB"),
                    ledger.Entry(ledger.wallet(f"c{customer}"), amount, "RUB"),
                ],
                key=f"bench-funds:{customer}",
            )


# -- one round: make a batch due, run the pass, check it, clear it ------------------------------


def due_renewals(round_number):
    """The round's 100 subscriptions (numbers 1..renewing) end within the hour."""
    from models.base import db, utcnow

    first = round_number * DUE + 1
    db.execute_sql(
        "UPDATE entitlements SET ends_at = %s, starts_at = %s WHERE order_id BETWEEN %s AND %s",
        (utcnow() + datetime.timedelta(hours=1), utcnow() - datetime.timedelta(days=29), first, first + DUE - 1),
    )


def due_maintenance(round_number):
    from commerce import ledger
    from models.base import db, utcnow

    now = utcnow()
    with db.atomic():
        db.execute_sql(
            "INSERT INTO orders (customer_id, plan_id, operation, status, amount_minor, currency, provider,"
            " created_at, expires_at)"
            " SELECT 'c1', 1, 'purchase', 'pending', %s, 'RUB', 'yookassa', %s, %s FROM generate_series(1, %s)",
            (PRICE, now - datetime.timedelta(minutes=31), now - datetime.timedelta(minutes=1), DUE),
        )
        db.execute_sql(
            "INSERT INTO payment_intents (order_id, provider, provider_payment_id, amount_minor, currency, status,"
            " idempotence_key, created_at, updated_at)"
            # Never reached the provider (a payment the provider holds stays pending past its order's expiry).
            " SELECT id, 'yookassa', NULL, %s, 'RUB', 'created', 'order-' || id || '-yookassa-1', %s, %s"
            " FROM orders WHERE status = 'pending' AND expires_at <= %s",
            (PRICE, now, now, now),
        )
        db.execute_sql(
            "INSERT INTO bot_checkout_sessions (chat_id, customer_id, state, created_at, expires_at)"
            " SELECT n, 'c1', '{}', %s, %s FROM generate_series(1, 10) AS n",
            (now - datetime.timedelta(hours=1), now - datetime.timedelta(minutes=30)),
        )
        for n in range(10):
            ledger.grant_bonus(f"c{n + 1}", 100, "RUB", now - datetime.timedelta(minutes=1))


def due_polls(round_number):
    from models.base import db, utcnow

    now = utcnow()
    waited = now - datetime.timedelta(minutes=5)
    with db.atomic():
        db.execute_sql("DELETE FROM jobs WHERE kind = 'payment_poll'")
        # Polled a moment ago: inside the grace, as a pass that just ran leaves them.
        db.execute_sql(
            "UPDATE payment_intents SET last_polled_at = %s WHERE provider_payment_id LIKE 'waiting-%%'", (now,)
        )
        db.execute_sql(
            "INSERT INTO payment_intents (order_id, provider, provider_payment_id, amount_minor, currency, status,"
            " idempotence_key, created_at, updated_at)"
            " SELECT n, 'yookassa', 'due-' || %s || '-' || n, %s, 'RUB', 'pending', 'due-' || %s || '-' || n, %s, %s"
            " FROM generate_series(1, %s) AS n",
            (round_number, PRICE, round_number, waited, waited, DUE),
        )


def after_polls(round_number):
    """The round's intents leave the pending set (their polls would have answered)."""
    from models.base import db

    db.execute_sql(
        "UPDATE payment_intents SET status = 'canceled' WHERE provider_payment_id LIKE %s", (f"due-{round_number}-%",)
    )


def run_once(name, round_number):
    """Make one batch due, run the pass on it (timed), check what it did; returns seconds."""
    from commerce.passes import commerce_maintenance, payment_reconcile, renewal

    if name == "renewal":
        due_renewals(round_number)
        started = time.perf_counter()
        counts = renewal.run()
        seconds = time.perf_counter() - started
        assert counts[renewal.RENEWED] == DUE, counts
    elif name == "commerce_maintenance":
        due_maintenance(round_number)
        started = time.perf_counter()
        done = commerce_maintenance.maintain()
        seconds = time.perf_counter() - started
        assert (done.orders_expired, done.intents_expired) == (DUE, DUE), done
        assert (done.bonuses_expired, done.carts_dropped) == (10, 10), done
    else:
        due_polls(round_number)
        started = time.perf_counter()
        enqueued, skipped = payment_reconcile.dispatch()
        seconds = time.perf_counter() - started
        assert (enqueued, skipped) == (DUE, 0), (enqueued, skipped)
        after_polls(round_number)
    return seconds


def query_plans():
    """EXPLAIN of each pass's selecting query, as it runs now."""
    from commerce.passes import payment_reconcile, renewal
    from models.base import db, utcnow
    from models.commerce import Order

    now = utcnow()
    queries = {
        "renewal": renewal.due_query(now),
        "commerce_maintenance": Order.select(Order.id, Order.status)
        .where(Order.expires_at.is_null(False), Order.expires_at <= now)
        .order_by(Order.expires_at, Order.id)
        .limit(100),
        "payment_reconcile": payment_reconcile.due_intents(now),
    }
    plans = {}
    for name, query in queries.items():
        sql, params = query.sql()
        plans[name] = [line for (line,) in db.execute_sql("EXPLAIN (COSTS OFF) " + sql, params).fetchall()]
    return plans


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--pg-url",
        default=os.environ.get("BENCH_DATABASE_URL")
        or os.environ.get("DATABASE_URL")
        or "postgresql://postgres@127.0.0.1:5432/postgres",
    )
    parser.add_argument("--out", default=str(DEFAULT_OUT))
    args = parser.parse_args(argv)

    from models.base import db

    rounds = args.rounds + 1  # the first warms up
    renewing = rounds * DUE
    databases = {}
    for size, rows in SIZES.items():
        started = time.monotonic()
        database = open_bench_database(fresh_database(args.pg_url, f"omniflow_passes_{size}"))
        db.initialize(database)
        fill(database, rows, renewing)
        fund(renewing)
        databases[size] = database
        print(f"filled {size}: {rows} rows per table in {time.monotonic() - started:.1f}s")

    seconds = {name: {size: [] for size in SIZES} for name in PASSES}
    for round_number in range(rounds):
        sizes = list(SIZES) if round_number % 2 == 0 else list(reversed(SIZES))
        for name in PASSES:
            for size in sizes:
                db.initialize(databases[size])
                taken = run_once(name, round_number)
                if round_number:
                    seconds[name][size].append(taken)
        print(f"round {round_number}{' (warm-up)' if not round_number else ''} done")

    db.initialize(databases["1m"])
    plans = query_plans()
    for name, lines in plans.items():
        print(f"plan of {name} at 1 M:\n  " + "\n  ".join(lines))
    figures = {"passes": {}, "rows": SIZES, "due_per_round": DUE, "rounds": args.rounds, "plans_1m": plans}
    for name in PASSES:
        small, large = (statistics.median(seconds[name][size]) for size in SIZES)
        figures["passes"][name] = {
            "rows_10k_s": round(small, 4),
            "rows_1m_s": round(large, 4),
            "ratio": round(large / small, 2),
            "rounds_10k_s": [round(value, 4) for value in seconds[name]["10k"]],
            "rounds_1m_s": [round(value, 4) for value in seconds[name]["1m"]],
        }
    for database in databases.values():
        database.close_all()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(figures, indent=2, sort_keys=True) + "\n")
    for name, result in figures["passes"].items():
        print(f"{name:>22}: 10k {result['rows_10k_s']:.4f}s  1M {result['rows_1m_s']:.4f}s  ×{result['ratio']}")
    print(f"wrote {args.out}")
    return 0 if all(result["ratio"] <= 3 for result in figures["passes"].values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
