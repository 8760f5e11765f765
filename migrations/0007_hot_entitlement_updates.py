"""Let a successful run update its entitlement in place (a HOT update on PostgreSQL).

Recording a success writes the entitlement's observed `status` and its
`reconciled_at`. Both were part of the reconcile pass's partial index (the
key and the predicate), so every such update wrote new entries into every
index of `entitlements`, the primary key's leaf page included, which the
records of neighbouring entitlements had just read. Under SERIALIZABLE those
page-level reads and writes made concurrent records refuse to serialize and
run again (about one in four under load).

The reconcile pass runs every 15 minutes and reads at most 500 rows; it now
reads the table in order of `reconciled_at` without an index (a sequential
scan and a top-500 sort, about 150 ms at a million entitlements, four times
an hour, in a READ COMMITTED transaction that takes no predicate locks).
New entitlement pages keep free room (fillfactor) so the new row version fits
on the same page; pages written before this migration get that room when the
table is next rewritten (VACUUM FULL), until then their updates cost what
they did.
"""

from peewee import PostgresqlDatabase


def up(migrator, db):
    db.execute_sql("DROP INDEX entitlements_reconcile")
    if isinstance(db, PostgresqlDatabase):
        db.execute_sql("ALTER TABLE entitlements SET (fillfactor = 85)")


def down(migrator, db):
    if isinstance(db, PostgresqlDatabase):
        db.execute_sql("ALTER TABLE entitlements RESET (fillfactor)")
    db.execute_sql(
        "CREATE INDEX entitlements_reconcile ON entitlements (reconciled_at)"
        " WHERE status NOT IN ('pending', 'superseded')"
    )
