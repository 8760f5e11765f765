"""Anomaly rules (SPEC 15.7) and the customers' ratings of the shop (SPEC 14.7).

- `anomaly_rules`: one row per rule of ops/anomalies.py (`rule`), its
  `threshold` (an integer in the rule's unit: percent, count or seconds), the
  `window_s` it looks back over and that bounds one notice, and `enabled`;
  an operator edits them in the back office (`updated_by`, `updated_at`).
  Seeded here with the defaults; a rule the code knows and the table lacks
  runs with its defaults until an operator changes it.
- `anomaly_samples`: counts that leave no row of their own, written by the
  pass that knows them (`revive_count`: operations `fulfillment_revive` gave
  a job again), read by window through `anomaly_samples_window`; pruned by
  the anomaly pass after SAMPLE_KEEP_DAYS.
- `fulfillment_history_created`: the anomaly pass reads the last window's
  attempt outcomes through it. History is insert-only, so the index costs an
  insert and never a HOT update of `fulfillment_operations` (migration 0003
  keeps that table's indexes few). Built concurrently on PostgreSQL: this
  file runs outside a transaction (`atomic = False`) and every statement is
  idempotent.
- `shop_ratings`: one rating (1–5) per order, written by the bot when the
  customer presses a star under their "access is ready" message (the review
  prompt in `bot_shop_reviews`, kept a day, SPEC 14.7). Not disposable.
"""

import datetime

from peewee import PostgresqlDatabase

from migrations import create_index_concurrently

atomic = False

DEFAULTS = (
    # rule, threshold, window_s
    ("fulfillment_failure_rate", 20, 3600),
    ("payment_success_rate", 50, 3600),
    ("revive_count", 50, 3600),
    ("outbox_oldest_age", 1800, 900),
    ("dead_letter_growth", 20, 3600),
)

SQLITE_KEY = "INTEGER PRIMARY KEY AUTOINCREMENT"
UP = [
    """CREATE TABLE IF NOT EXISTS anomaly_rules (
        rule TEXT PRIMARY KEY,
        threshold BIGINT NOT NULL,
        window_s INTEGER NOT NULL,
        enabled BOOLEAN NOT NULL,
        updated_at TIMESTAMP NOT NULL,
        updated_by TEXT
    )""",
    """CREATE TABLE IF NOT EXISTS anomaly_samples (
        id BIGSERIAL PRIMARY KEY,
        rule TEXT NOT NULL,
        value BIGINT NOT NULL,
        observed_at TIMESTAMP NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS anomaly_samples_window ON anomaly_samples (rule, observed_at)",
    """CREATE TABLE IF NOT EXISTS shop_ratings (
        order_id BIGINT PRIMARY KEY REFERENCES orders (id),
        customer_id TEXT NOT NULL REFERENCES customers (id),
        rating INTEGER NOT NULL CHECK (rating BETWEEN 1 AND 5),
        created_at TIMESTAMP NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS shop_ratings_customer ON shop_ratings (customer_id, created_at)",
]

DOWN = [
    "DROP INDEX IF EXISTS fulfillment_history_created",
    "DROP TABLE IF EXISTS shop_ratings",
    "DROP TABLE IF EXISTS anomaly_samples",
    "DROP TABLE IF EXISTS anomaly_rules",
]


def up(migrator, db):
    postgres = isinstance(db, PostgresqlDatabase)
    now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    with db.atomic():
        for statement in UP:
            db.execute_sql(statement if postgres else statement.replace("BIGSERIAL PRIMARY KEY", SQLITE_KEY))
        for rule, threshold, window_s in DEFAULTS:
            db.execute_sql(
                "INSERT INTO anomaly_rules (rule, threshold, window_s, enabled, updated_at)"
                f" VALUES ({db.param}, {db.param}, {db.param}, TRUE, {db.param}) ON CONFLICT (rule) DO NOTHING",
                (rule, threshold, window_s, now),
            )
    create_index_concurrently(db, "fulfillment_history_created", "fulfillment_history (created_at)")


def down(migrator, db):
    for statement in DOWN:
        db.execute_sql(statement)
