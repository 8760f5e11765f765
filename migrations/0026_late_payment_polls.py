"""Payments the provider still holds after their order expired are polled a day longer (SPEC 13.7).

commerce_maintenance leaves a pending intent the provider holds open when its
order expires, so payment_reconcile keeps asking until the provider answers;
after LATE_POLL_WINDOW it expires the intent. It finds those through
`payment_intents_pending_created`, oldest first, without reading every
pending intent.

`payment_intents` grows with every checkout: on PostgreSQL the index is built
concurrently, outside a transaction, so checkouts go on writing during the
release. Databases that applied this file before it did so keep their index.
"""

from migrations import create_index_concurrently

atomic = False


def up(migrator, db):
    create_index_concurrently(
        db, "payment_intents_pending_created", "payment_intents (created_at) WHERE status = 'pending'"
    )


def down(migrator, db):
    db.execute_sql("DROP INDEX IF EXISTS payment_intents_pending_created")
