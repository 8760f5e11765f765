"""Payments the provider still holds after their order expired are polled a day longer (SPEC 13.7).

commerce_maintenance leaves a pending intent the provider holds open when its
order expires, so payment_reconcile keeps asking until the provider answers;
after LATE_POLL_WINDOW it expires the intent. It finds those through
`payment_intents_pending_created`, oldest first, without reading every
pending intent.
"""

UP = ["CREATE INDEX payment_intents_pending_created ON payment_intents (created_at) WHERE status = 'pending'"]
DOWN = ["DROP INDEX payment_intents_pending_created"]


def up(migrator, db):
    for statement in UP:
        db.execute_sql(statement)


def down(migrator, db):
    for statement in DOWN:
        db.execute_sql(statement)
