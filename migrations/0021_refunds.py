"""Refunds (SPEC 13.10): one row per refund of an order, and where its money went.

- `refunds`: the amount, where it goes (`provider`: back through the
  provider's refund API — YooKassa, Telegram Stars; `wallet`: to the
  customer's wallet; `manual`: the provider has no refund API — Crypto Pay —
  so an operator pays it back by hand), its state (`pending` until the
  provider has answered, `processing` while the provider is still working on
  it, `succeeded`, `failed`, `manual`), the provider's ids, the ledger
  transaction that reversed the money and the last classified error. The
  `idempotence_key` is what the provider is sent (YooKassa's Idempotence-Key),
  so a retried call never refunds twice.
- `refunds_order`: an order's refunds, for the panel's order answer.
"""

from peewee import PostgresqlDatabase

DESTINATIONS = "'provider', 'wallet', 'manual'"
STATUSES = "'pending', 'processing', 'succeeded', 'failed', 'manual'"

UP = [
    f"""CREATE TABLE refunds (
        id BIGSERIAL PRIMARY KEY,
        order_id BIGINT NOT NULL REFERENCES orders (id),
        amount_minor BIGINT NOT NULL CHECK (amount_minor > 0),
        currency TEXT NOT NULL,
        destination TEXT NOT NULL CHECK (destination IN ({DESTINATIONS})),
        status TEXT NOT NULL CHECK (status IN ({STATUSES})),
        provider TEXT,
        provider_payment_id TEXT,
        provider_refund_id TEXT,
        idempotence_key TEXT NOT NULL UNIQUE,
        ledger_transaction_id BIGINT REFERENCES ledger_transactions (id),
        last_error_code TEXT,
        created_at TIMESTAMP NOT NULL,
        updated_at TIMESTAMP NOT NULL,
        completed_at TIMESTAMP
    )""",
    "CREATE INDEX refunds_order ON refunds (order_id, id)",
]

DOWN = ["DROP TABLE refunds"]


def up(migrator, db):
    postgres = isinstance(db, PostgresqlDatabase)
    for statement in UP:
        db.execute_sql(
            statement if postgres else statement.replace("BIGSERIAL PRIMARY KEY", "INTEGER PRIMARY KEY AUTOINCREMENT")
        )


def down(migrator, db):
    for statement in DOWN:
        db.execute_sql(statement)
