"""Let a claim update its operation in place (a HOT update on PostgreSQL).

A claim changes an operation's status, attempt and lease. While `status`
was part of an index, every such update wrote new entries into every index
of the table, including the primary key's leaf page that the neighbouring
operations' claims had just read. Under SERIALIZABLE those page-level reads
and writes made concurrent claims of adjacent operations refuse to
serialize, over and over. Now no index of `fulfillment_operations` contains
a column a claim changes, and its pages keep room for the new row version,
so a claim touches no index at all.

- The index of open operations (what revive scans) is keyed on
  `completed_at IS NULL`: an operation is open exactly until a terminal
  status (succeeded, failed, cancelled) sets its completion time.
- The `(status, id)` index goes: nothing reads operations by status alone.
- Operations, orders and subscriptions keep free room in each page
  (fillfactor) so their fulfillment updates stay on the same page.
"""

from peewee import PostgresqlDatabase

COMMON = [
    "DROP INDEX fulfillment_operations_status",
    "DROP INDEX fulfillment_operations_revive",
    "CREATE INDEX fulfillment_operations_open ON fulfillment_operations (created_at) WHERE completed_at IS NULL",
]

POSTGRES_ONLY = [
    "ALTER TABLE fulfillment_operations SET (fillfactor = 70)",
    "ALTER TABLE orders SET (fillfactor = 85)",
    "ALTER TABLE subscriptions SET (fillfactor = 85)",
]


def up(migrator, db):
    postgres = isinstance(db, PostgresqlDatabase)
    for statement in COMMON + (POSTGRES_ONLY if postgres else []):
        db.execute_sql(statement)


def down(migrator, db):
    postgres = isinstance(db, PostgresqlDatabase)
    if postgres:
        for table in ("fulfillment_operations", "orders", "subscriptions"):
            db.execute_sql(f"ALTER TABLE {table} RESET (fillfactor)")
    db.execute_sql("DROP INDEX fulfillment_operations_open")
    db.execute_sql("CREATE INDEX fulfillment_operations_status ON fulfillment_operations (status, id)")
    db.execute_sql(
        "CREATE INDEX fulfillment_operations_revive ON fulfillment_operations (created_at)"
        " WHERE status IN ('pending', 'retrying', 'running')"
    )
