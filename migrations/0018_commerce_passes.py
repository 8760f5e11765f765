"""The commerce passes (SPEC 5.1, 13.7, 13.8, 14.6): what they read by, and the customer notices they write.

- `customer_notices`: a message for one customer that the bot delivers
  (14.4, 14.6), one per (kind, dedupe key): the renewal pass writes a
  `dunning` notice keyed `<subscription>:<period end>`, so a customer hears
  once per period that the wallet could not pay for the renewal, however
  many runs find it short. `sent_at` is set when the bot has delivered it;
  `customer_notices_unsent` holds only those still to send.
- `entitlements_period_end`: the renewal pass reads the periods ending
  within the next day by their end. Only `ends_at` is indexed, with no
  predicate on the status: the worker writes an entitlement's status on
  every success, and an index on it would stop those updates from staying
  in place (HOT, migration 0007); `ends_at` changes only when a period is
  extended or resumed.
- `payment_intents_reconcile` replaces `payment_intents_status`:
  payment_reconcile takes the pending intents polled (or, never polled,
  created) longest ago, so an intent abandoned at the provider that stays
  pending does not keep a newer one from its poll; the index holds pending
  intents only, in that order.
"""

from peewee import PostgresqlDatabase

UP = [
    """CREATE TABLE customer_notices (
        id BIGSERIAL PRIMARY KEY,
        customer_id TEXT NOT NULL REFERENCES customers (id),
        kind TEXT NOT NULL,
        dedupe_key TEXT NOT NULL,
        payload TEXT NOT NULL DEFAULT '{}',
        created_at TIMESTAMP NOT NULL,
        sent_at TIMESTAMP,
        UNIQUE (kind, dedupe_key)
    )""",
    "CREATE INDEX customer_notices_unsent ON customer_notices (id) WHERE sent_at IS NULL",
    "CREATE INDEX entitlements_period_end ON entitlements (ends_at)",
    "DROP INDEX payment_intents_status",
    """CREATE INDEX payment_intents_reconcile ON payment_intents ((COALESCE(last_polled_at, created_at)), id)
        WHERE status = 'pending'""",
]

DOWN = [
    "DROP INDEX payment_intents_reconcile",
    "CREATE INDEX payment_intents_status ON payment_intents (status, created_at)",
    "DROP INDEX entitlements_period_end",
    "DROP TABLE customer_notices",
]


def up(migrator, db):
    postgres = isinstance(db, PostgresqlDatabase)
    for statement in UP:
        db.execute_sql(
            statement if postgres else statement.replace("BIGSERIAL PRIMARY KEY", "INTEGER PRIMARY KEY AUTOINCREMENT")
        )


def down(migrator, db):
    for statement in DOWN:
        db.execute_sql(statement)
