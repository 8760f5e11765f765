"""Customers found by name, gift cards and access codes revoked (SPEC 13.14, 13.11).

- `customers.search_name`: the display name case-folded (str.casefold(), so
  "ИВАН", "Иван" and "иван" are one), its spaces collapsed; written by the
  code that creates or renames a customer (models/commerce.py) and filled here
  for those that exist. Compared by code point (COLLATE "C" on PostgreSQL,
  SQLite's BINARY), so a name prefix is a range on `customers_search_name`
  on both databases: SQLite's LOWER and LIKE fold only ASCII.
- `gift_cards.revoked_at` / `revoked_reason` and `access_codes.revoked_at` /
  `revoked_reason`: an operator's revocation; a revoked card or code
  activates nothing (commerce/activations.py).
"""

from peewee import PostgresqlDatabase

BACKFILL_BATCH = 1000


def fold(name):
    return " ".join(str(name or "").casefold().split())


def up(migrator, db):
    postgres = isinstance(db, PostgresqlDatabase)
    collate = ' COLLATE "C"' if postgres else ""
    db.execute_sql(f"ALTER TABLE customers ADD COLUMN search_name TEXT{collate} NOT NULL DEFAULT ''")
    mark = db.param
    last = ""
    while True:
        rows = db.execute_sql(
            f"SELECT id, display_name FROM customers WHERE id > {mark} ORDER BY id LIMIT {mark}",
            (last, BACKFILL_BATCH),
        ).fetchall()
        if not rows:
            break
        for key, name in rows:
            if fold(name):
                db.execute_sql(f"UPDATE customers SET search_name = {mark} WHERE id = {mark}", (fold(name), key))
        last = rows[-1][0]
    db.execute_sql("CREATE INDEX customers_search_name ON customers (search_name)")
    for table in ("gift_cards", "access_codes"):
        db.execute_sql(f"ALTER TABLE {table} ADD COLUMN revoked_at TIMESTAMP")
        db.execute_sql(f"ALTER TABLE {table} ADD COLUMN revoked_reason TEXT")


def down(migrator, db):
    db.execute_sql("DROP INDEX customers_search_name")
    for table in ("gift_cards", "access_codes"):
        db.execute_sql(f"ALTER TABLE {table} DROP COLUMN revoked_reason")
        db.execute_sql(f"ALTER TABLE {table} DROP COLUMN revoked_at")
    db.execute_sql("ALTER TABLE customers DROP COLUMN search_name")
