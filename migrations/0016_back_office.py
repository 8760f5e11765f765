"""The panel as a shop's back office (SPEC 13.14): the operator's time zone, and
the indexes its views read by.

- `operators.time_zone`: an IANA zone name every page shows times in
  (default UTC); each operator sets their own.
- `customers_created`: new customers today and this month (the Home page).
- `ledger_transactions_created`: revenue today and this month, read from the
  ledger's revenue account by the transactions' time.
- `subscriptions_remote_username`: finding a customer by their panel
  username. The worker writes `remote_username` on every success, but the
  same value after the first, so those updates stay in place (HOT) on
  PostgreSQL; nothing else the worker writes is indexed here.
"""

STATEMENTS = [
    "ALTER TABLE operators ADD COLUMN time_zone TEXT NOT NULL DEFAULT 'UTC'",
    "CREATE INDEX customers_created ON customers (created_at)",
    "CREATE INDEX ledger_transactions_created ON ledger_transactions (created_at)",
    "CREATE INDEX subscriptions_remote_username ON subscriptions (remote_username) WHERE remote_username IS NOT NULL",
]


def up(migrator, db):
    for statement in STATEMENTS:
        db.execute_sql(statement)


def down(migrator, db):
    for index in ("subscriptions_remote_username", "ledger_transactions_created", "customers_created"):
        db.execute_sql(f"DROP INDEX {index}")
    db.execute_sql("ALTER TABLE operators DROP COLUMN time_zone")
