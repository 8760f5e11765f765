"""Customer notices say how their delivery ended (SPEC 14.4, 14.6).

`customer_notices.status`: `pending` until the bot's customer-notice loop
(bot/customer_notices.py) delivered it (`sent`, with `sent_at`) or gave up
on it (`failed`, with `failure_code`: the customer blocked the bot
(`forbidden`), Telegram refused the message (`rejected`), or its kind has
no text (`unknown_kind`)). A failed notice is never sent later, so a
customer who blocked the bot is not written to again and again, and an
operator can see why a customer was not told. The loop reads pending
notices oldest first: `customer_notices_unsent` now holds those.
"""

UP = [
    "ALTER TABLE customer_notices ADD COLUMN status TEXT NOT NULL DEFAULT 'pending'"
    " CHECK (status IN ('pending', 'sent', 'failed'))",
    "ALTER TABLE customer_notices ADD COLUMN failure_code TEXT",
    "UPDATE customer_notices SET status = 'sent' WHERE sent_at IS NOT NULL",
    "DROP INDEX customer_notices_unsent",
    "CREATE INDEX customer_notices_unsent ON customer_notices (id) WHERE status = 'pending'",
]

DOWN = [
    "DROP INDEX customer_notices_unsent",
    "CREATE INDEX customer_notices_unsent ON customer_notices (id) WHERE sent_at IS NULL",
    "ALTER TABLE customer_notices DROP COLUMN failure_code",
    "ALTER TABLE customer_notices DROP COLUMN status",
]


def up(migrator, db):
    for statement in UP:
        db.execute_sql(statement)


def down(migrator, db):
    for statement in DOWN:
        db.execute_sql(statement)
