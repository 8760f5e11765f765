"""Digital goods (SPEC 3, 15.4): products sold beside plans and their delivery by a goods provider.

- `goods_providers`: where goods are bought (base URL) and its API token,
  sealed with APP_DATA_ENCRYPTION_KEY (SPEC 12.3).
- `goods` (a provider SKU) and `goods_prices` (a price per currency).
- Orders gain the `goods` kind and `goods_id` (a goods order buys no plan).
  On PostgreSQL the two CHECKs are replaced; on SQLite, where a CHECK lives in
  the table's text, the text is edited in place (SQLite's documented way for a
  change that no stored row can violate: both CHECKs only accept more), so the
  orders table and the ids in its fulfillment keys stay as they are.
- `goods_deliveries`: one per paid goods order (UNIQUE order_id), the truth
  about what is owed to whom (SPEC 3.2): status, the provider attempts made,
  the deadline of the next, the failure class and code of the last, and how an
  operator resolved one that needed review. `goods_deliveries_due` holds the
  open ones for the schedule pass.
"""

from peewee import PostgresqlDatabase

OPERATIONS_BEFORE = (
    "'purchase', 'extension', 'renewal', 'upgrade', 'downgrade', 'addon', 'topup', 'gift', 'code', 'trial'"
)
OPERATIONS = OPERATIONS_BEFORE + ", 'goods'"
PLANLESS_BEFORE = "plan_id IS NOT NULL OR operation IN ('topup', 'addon')"
PLANLESS = "plan_id IS NOT NULL OR operation IN ('topup', 'addon', 'goods')"
DELIVERY_STATUSES = "'pending', 'submitting', 'retrying', 'delivered', 'needs_review', 'refunded', 'cancelled'"
FAILURE_CLASSES = (
    "'retryable', 'permanent', 'recipient_invalid', 'provider_balance', 'provider_unavailable', 'ambiguous',"
    " 'adapter_error'"
)

TABLES = [
    """CREATE TABLE goods_providers (
        id BIGSERIAL PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        base_url TEXT NOT NULL,
        api_token TEXT NOT NULL,
        created_at TIMESTAMP NOT NULL
    )""",
    """CREATE TABLE goods (
        id BIGSERIAL PRIMARY KEY,
        code TEXT NOT NULL UNIQUE,
        name TEXT NOT NULL,
        provider_id BIGINT NOT NULL REFERENCES goods_providers (id),
        provider_sku TEXT NOT NULL,
        active BOOLEAN NOT NULL DEFAULT TRUE,
        created_at TIMESTAMP NOT NULL
    )""",
    """CREATE TABLE goods_prices (
        id BIGSERIAL PRIMARY KEY,
        goods_id BIGINT NOT NULL REFERENCES goods (id),
        currency TEXT NOT NULL CHECK (length(currency) = 3 AND currency = upper(currency)),
        amount_minor BIGINT NOT NULL CHECK (amount_minor >= 0),
        UNIQUE (goods_id, currency)
    )""",
    "ALTER TABLE orders ADD COLUMN goods_id BIGINT REFERENCES goods (id)",
    f"""CREATE TABLE goods_deliveries (
        id BIGSERIAL PRIMARY KEY,
        order_id BIGINT NOT NULL UNIQUE REFERENCES orders (id),
        goods_id BIGINT NOT NULL REFERENCES goods (id),
        customer_id TEXT NOT NULL REFERENCES customers (id),
        status TEXT NOT NULL CHECK (status IN ({DELIVERY_STATUSES})),
        attempt_count INTEGER NOT NULL DEFAULT 0 CHECK (attempt_count >= 0),
        next_attempt_at TIMESTAMP,
        failure_class TEXT CHECK (failure_class IN ({FAILURE_CLASSES})),
        last_error_code TEXT,
        provider_reference TEXT,
        resolved_by TEXT,
        resolution_reason TEXT,
        created_at TIMESTAMP NOT NULL,
        updated_at TIMESTAMP NOT NULL,
        finished_at TIMESTAMP
    )""",
    "CREATE INDEX goods_deliveries_due ON goods_deliveries (next_attempt_at)"
    " WHERE status IN ('pending', 'submitting', 'retrying')",
    "CREATE INDEX goods_deliveries_review ON goods_deliveries (id) WHERE status = 'needs_review'",
]

POSTGRES_ORDERS = [
    "ALTER TABLE orders DROP CONSTRAINT orders_operation_check",
    f"ALTER TABLE orders ADD CONSTRAINT orders_operation_check CHECK (operation IN ({OPERATIONS}))",
    "ALTER TABLE orders DROP CONSTRAINT orders_plan_unless_planless",
    f"ALTER TABLE orders ADD CONSTRAINT orders_plan_unless_planless CHECK ({PLANLESS})",
    "ALTER TABLE orders ADD CONSTRAINT orders_goods_only_on_goods_orders"
    " CHECK ((goods_id IS NULL) = (operation <> 'goods'))",
]


def _sqlite(sql):
    return sql.replace("BIGSERIAL PRIMARY KEY", "INTEGER PRIMARY KEY AUTOINCREMENT")


def _widen_sqlite_orders(db):
    """The orders CHECKs accept `goods`, edited in the table's stored text (both only widen)."""
    (text,) = db.execute_sql("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'orders'").fetchone()
    widened = text.replace(f"operation IN ({OPERATIONS_BEFORE})", f"operation IN ({OPERATIONS})").replace(
        PLANLESS_BEFORE, PLANLESS
    )
    if widened.count("'goods'") != 2:
        raise RuntimeError("the orders table is not as migration 0011 left it: its CHECKs were not found")
    (version,) = db.execute_sql("PRAGMA schema_version").fetchone()
    db.execute_sql("PRAGMA writable_schema = ON")
    try:
        db.execute_sql("UPDATE sqlite_master SET sql = ? WHERE type = 'table' AND name = 'orders'", (widened,))
        db.execute_sql(f"PRAGMA schema_version = {version + 1}")
    finally:
        db.execute_sql("PRAGMA writable_schema = OFF")


def up(migrator, db):
    postgres = isinstance(db, PostgresqlDatabase)
    for statement in TABLES:
        db.execute_sql(statement if postgres else _sqlite(statement))
    if postgres:
        for statement in POSTGRES_ORDERS:
            db.execute_sql(statement)
    else:
        _widen_sqlite_orders(db)


def down(migrator, db):
    """The goods tables go; on PostgreSQL orders lose `goods_id` too (on SQLite a column that references
    a table cannot be dropped: it stays, empty). The widened CHECKs stay: they refuse nothing."""
    db.execute_sql("DROP TABLE goods_deliveries")
    if isinstance(db, PostgresqlDatabase):
        db.execute_sql("ALTER TABLE orders DROP CONSTRAINT orders_goods_only_on_goods_orders")
        db.execute_sql("ALTER TABLE orders DROP COLUMN goods_id")
    else:
        db.execute_sql("UPDATE orders SET goods_id = NULL")
    for table in ("goods_prices", "goods", "goods_providers"):
        db.execute_sql(f"DROP TABLE {table}")
