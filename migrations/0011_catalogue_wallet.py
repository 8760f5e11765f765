"""Commerce (SPEC 13): the catalogue, orders of every kind, the wallet ledger, payment records.

- Prices per currency (`plan_prices`, `addon_prices`), add-ons, gift cards
  and access codes (hashed codes), their activations (one per customer and
  code), personal offers, trials (one per customer: `UNIQUE(customer_id)`).
  Every existing plan's price is copied into `plan_prices`.
- Customers gain their Telegram identity and a blocked flag; subscriptions
  the plan they renew and `auto_renew`.
- Orders gain the `topup` kind, planless orders (top-ups, add-ons), the
  add-on, the personal offer, a UNIQUE idempotency key (a renewal's
  `renewal:<subscription>:<period end>`), the provider, the refunded amount
  (already-refunded orders count as refunded in full) and the payment
  deadline. On SQLite a CHECK can only change by rebuilding the table: the
  rows are copied with their ids and the id sequence is carried over, because
  order ids are part of fulfillment keys (`order:<id>:fulfill`) and must never
  be handed out twice.
  `orders_awaiting_payment` holds the orders with a payment deadline
  (`expires_at`, set on a pending order and cleared when it stops waiting
  for payment), so the expiry pass reads only those. It is keyed on the
  deadline, not the status: the worker moves a paid order to `fulfilled`,
  and an index on the status would make that update write every index of
  the table instead of updating the row in place (migrations 0003, 0007).
- The ledger: accounts per name and currency, transactions with a UNIQUE
  idempotency key, signed entries that reference their account together
  with its currency (so an entry cannot be in another currency than its
  account). On PostgreSQL a constraint trigger, deferred to COMMIT, refuses
  a transaction whose entries do not sum to zero in every currency.
- Payment intents (one provider payment id per provider; the reconcile
  pass's index on status and age) and webhook deliveries (raw body capped at
  64 KiB, an index on `retain_until` for retention).
"""

from peewee import PostgresqlDatabase


def _in(values):
    return ", ".join(f"'{value}'" for value in values)


CURRENCY = "length({0}) = 3 AND {0} = upper({0})"
PROVIDERS = _in(("yookassa", "cryptobot", "stars"))
ORDER_STATUSES = _in(
    ("draft", "pending", "paid", "fulfilled", "cancelled", "expired", "partially_refunded", "refunded")
)
OPERATIONS_BEFORE = _in(("purchase", "extension", "renewal", "upgrade", "downgrade", "addon", "gift", "code", "trial"))
OPERATIONS = _in(
    ("purchase", "extension", "renewal", "upgrade", "downgrade", "addon", "topup", "gift", "code", "trial")
)
ACCOUNT_KINDS = _in(("customer_wallet", "revenue", "provider_clearing", "promotions"))
TRANSACTION_KINDS = _in(("topup", "purchase", "renewal", "refund", "expiration", "bonus", "proration_credit"))
INTENT_STATUSES = _in(("created", "pending", "succeeded", "canceled", "failed", "expired"))

BEFORE_ORDERS = [
    "ALTER TABLE customers ADD COLUMN telegram_id BIGINT",
    "ALTER TABLE customers ADD COLUMN telegram_username TEXT",
    "ALTER TABLE customers ADD COLUMN language_code TEXT",
    "ALTER TABLE customers ADD COLUMN blocked BOOLEAN NOT NULL DEFAULT FALSE",
    "ALTER TABLE customers ADD COLUMN blocked_reason TEXT",
    "ALTER TABLE customers ADD COLUMN blocked_at TIMESTAMP",
    "CREATE UNIQUE INDEX customers_telegram_id ON customers (telegram_id)",
    "CREATE INDEX customers_telegram_username ON customers (lower(telegram_username))",
    "ALTER TABLE plans ADD COLUMN trial BOOLEAN NOT NULL DEFAULT FALSE",
    "ALTER TABLE subscriptions ADD COLUMN plan_id BIGINT REFERENCES plans (id)",
    "ALTER TABLE subscriptions ADD COLUMN auto_renew BOOLEAN NOT NULL DEFAULT FALSE",
    f"""CREATE TABLE plan_prices (
        id BIGSERIAL PRIMARY KEY,
        plan_id BIGINT NOT NULL REFERENCES plans (id),
        currency TEXT NOT NULL CHECK ({CURRENCY.format("currency")}),
        amount_minor BIGINT NOT NULL CHECK (amount_minor >= 0),
        UNIQUE (plan_id, currency)
    )""",
    "INSERT INTO plan_prices (plan_id, currency, amount_minor) SELECT id, upper(currency), price_minor FROM plans",
    """CREATE TABLE addons (
        id BIGSERIAL PRIMARY KEY,
        code TEXT NOT NULL UNIQUE,
        name TEXT NOT NULL,
        extra_traffic_bytes BIGINT NOT NULL DEFAULT 0 CHECK (extra_traffic_bytes >= 0),
        extra_devices INTEGER NOT NULL DEFAULT 0 CHECK (extra_devices >= 0),
        active BOOLEAN NOT NULL DEFAULT TRUE,
        created_at TIMESTAMP NOT NULL,
        CONSTRAINT addons_add_something CHECK (extra_traffic_bytes > 0 OR extra_devices > 0)
    )""",
    f"""CREATE TABLE addon_prices (
        id BIGSERIAL PRIMARY KEY,
        addon_id BIGINT NOT NULL REFERENCES addons (id),
        currency TEXT NOT NULL CHECK ({CURRENCY.format("currency")}),
        amount_minor BIGINT NOT NULL CHECK (amount_minor >= 0),
        UNIQUE (addon_id, currency)
    )""",
    f"""CREATE TABLE personal_offers (
        id BIGSERIAL PRIMARY KEY,
        customer_id TEXT NOT NULL REFERENCES customers (id),
        plan_id BIGINT REFERENCES plans (id),
        discount_percent INTEGER CHECK (discount_percent BETWEEN 1 AND 100),
        discount_minor BIGINT CHECK (discount_minor > 0),
        currency TEXT CHECK ({CURRENCY.format("currency")}),
        status TEXT NOT NULL CHECK (status IN ('active', 'used', 'expired')),
        expires_at TIMESTAMP NOT NULL,
        used_at TIMESTAMP,
        used_order_id BIGINT UNIQUE REFERENCES orders (id),
        created_at TIMESTAMP NOT NULL,
        CONSTRAINT personal_offers_one_discount CHECK ((discount_percent IS NULL) <> (discount_minor IS NULL)),
        CONSTRAINT personal_offers_amount_currency CHECK ((discount_minor IS NULL) = (currency IS NULL)),
        CONSTRAINT personal_offers_used CHECK ((status = 'used') = (used_at IS NOT NULL))
    )""",
    "CREATE INDEX personal_offers_customer ON personal_offers (customer_id, id)",
    "CREATE INDEX personal_offers_expiring ON personal_offers (expires_at) WHERE status = 'active'",
]

# The columns orders gain, as both dialects write them; their index is built after them.
ORDER_COLUMNS = [
    "addon_id BIGINT REFERENCES addons (id)",
    "personal_offer_id BIGINT REFERENCES personal_offers (id)",
    "idempotency_key TEXT UNIQUE",
    f"provider TEXT CHECK (provider IN ({PROVIDERS}))",
    "refunded_amount_minor BIGINT NOT NULL DEFAULT 0",
    "expires_at TIMESTAMP",
]
ORDER_CONSTRAINTS = [
    "CONSTRAINT orders_refunded_within_amount CHECK (refunded_amount_minor BETWEEN 0 AND amount_minor)",
    "CONSTRAINT orders_plan_unless_planless CHECK (plan_id IS NOT NULL OR operation IN ('topup', 'addon'))",
    "CONSTRAINT orders_addon_only_on_addon_orders CHECK (addon_id IS NULL OR operation = 'addon')",
]
ORDERS_COPIED = (
    "id, customer_id, subscription_id, plan_id, operation, status, amount_minor, currency, settled_by,"
    " created_at, paid_at, fulfilled_at, refunded_at"
)
ORDER_INDEXES = [
    "CREATE INDEX orders_customer ON orders (customer_id, id)",
]


def _orders_table(name, plan_id, operations, extra):
    """The orders table as SQLite creates it (a CHECK lives in the table's definition)."""
    columns = [
        "id INTEGER PRIMARY KEY AUTOINCREMENT",
        "customer_id TEXT NOT NULL REFERENCES customers (id)",
        "subscription_id TEXT REFERENCES subscriptions (id)",
        f"plan_id BIGINT {plan_id}REFERENCES plans (id)",
        f"operation TEXT NOT NULL CHECK (operation IN ({operations}))",
        f"status TEXT NOT NULL CHECK (status IN ({ORDER_STATUSES}))",
        "amount_minor BIGINT NOT NULL CHECK (amount_minor >= 0)",
        "currency TEXT NOT NULL",
        "settled_by TEXT",
        "created_at TIMESTAMP NOT NULL",
        "paid_at TIMESTAMP",
        "fulfilled_at TIMESTAMP",
        "refunded_at TIMESTAMP",
    ]
    return f"CREATE TABLE {name} (\n    " + ",\n    ".join(columns + extra) + "\n)"


POSTGRES_ORDERS = [
    "ALTER TABLE orders DROP CONSTRAINT orders_operation_check",
    f"ALTER TABLE orders ADD CONSTRAINT orders_operation_check CHECK (operation IN ({OPERATIONS}))",
    "ALTER TABLE orders ALTER COLUMN plan_id DROP NOT NULL",
    *(f"ALTER TABLE orders ADD COLUMN {column}" for column in ORDER_COLUMNS),
    *(f"ALTER TABLE orders ADD {constraint}" for constraint in ORDER_CONSTRAINTS),
    "UPDATE orders SET refunded_amount_minor = amount_minor WHERE status = 'refunded'",
]

AFTER_ORDERS = [
    "CREATE INDEX orders_awaiting_payment ON orders (expires_at) WHERE expires_at IS NOT NULL",
    """CREATE TABLE gift_cards (
        id BIGSERIAL PRIMARY KEY,
        code_hash TEXT NOT NULL UNIQUE,
        plan_id BIGINT NOT NULL REFERENCES plans (id),
        purchase_order_id BIGINT UNIQUE REFERENCES orders (id),
        status TEXT NOT NULL CHECK (status IN ('active', 'redeemed', 'expired')),
        expires_at TIMESTAMP NOT NULL,
        redeemed_by_id TEXT REFERENCES customers (id),
        redeemed_at TIMESTAMP,
        redemption_order_id BIGINT UNIQUE REFERENCES orders (id),
        created_at TIMESTAMP NOT NULL,
        CONSTRAINT gift_cards_redeemed CHECK ((status = 'redeemed') = (redeemed_at IS NOT NULL)),
        CONSTRAINT gift_cards_redeemed_by CHECK ((redeemed_by_id IS NULL) = (redeemed_at IS NULL))
    )""",
    "CREATE INDEX gift_cards_expiring ON gift_cards (expires_at) WHERE status = 'active'",
    """CREATE TABLE access_codes (
        id BIGSERIAL PRIMARY KEY,
        code_hash TEXT NOT NULL UNIQUE,
        plan_id BIGINT NOT NULL REFERENCES plans (id),
        max_activations INTEGER NOT NULL CHECK (max_activations > 0),
        activation_count INTEGER NOT NULL DEFAULT 0,
        expires_at TIMESTAMP,
        active BOOLEAN NOT NULL DEFAULT TRUE,
        created_at TIMESTAMP NOT NULL,
        CONSTRAINT access_codes_within_limit CHECK (activation_count BETWEEN 0 AND max_activations)
    )""",
    """CREATE TABLE access_code_activations (
        id BIGSERIAL PRIMARY KEY,
        access_code_id BIGINT NOT NULL REFERENCES access_codes (id),
        customer_id TEXT NOT NULL REFERENCES customers (id),
        order_id BIGINT NOT NULL UNIQUE REFERENCES orders (id),
        activated_at TIMESTAMP NOT NULL,
        UNIQUE (access_code_id, customer_id)
    )""",
    """CREATE TABLE trial_activations (
        id BIGSERIAL PRIMARY KEY,
        customer_id TEXT NOT NULL UNIQUE REFERENCES customers (id),
        plan_id BIGINT NOT NULL REFERENCES plans (id),
        order_id BIGINT NOT NULL UNIQUE REFERENCES orders (id),
        activated_at TIMESTAMP NOT NULL
    )""",
    f"""CREATE TABLE ledger_accounts (
        id BIGSERIAL PRIMARY KEY,
        name TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ({ACCOUNT_KINDS})),
        currency TEXT NOT NULL CHECK ({CURRENCY.format("currency")}),
        customer_id TEXT REFERENCES customers (id),
        created_at TIMESTAMP NOT NULL,
        UNIQUE (name, currency),
        UNIQUE (id, currency),
        CONSTRAINT ledger_accounts_wallet_customer CHECK ((kind = 'customer_wallet') = (customer_id IS NOT NULL))
    )""",
    f"""CREATE TABLE ledger_transactions (
        id BIGSERIAL PRIMARY KEY,
        kind TEXT NOT NULL CHECK (kind IN ({TRANSACTION_KINDS})),
        order_id BIGINT REFERENCES orders (id),
        reverses_id BIGINT REFERENCES ledger_transactions (id),
        idempotency_key TEXT UNIQUE,
        created_at TIMESTAMP NOT NULL
    )""",
    "CREATE INDEX ledger_transactions_order ON ledger_transactions (order_id) WHERE order_id IS NOT NULL",
    "CREATE INDEX ledger_transactions_reverses ON ledger_transactions (reverses_id) WHERE reverses_id IS NOT NULL",
    """CREATE TABLE ledger_entries (
        id BIGSERIAL PRIMARY KEY,
        transaction_id BIGINT NOT NULL REFERENCES ledger_transactions (id),
        account_id BIGINT NOT NULL,
        currency TEXT NOT NULL,
        amount_minor BIGINT NOT NULL CHECK (amount_minor <> 0),
        expires_at TIMESTAMP,
        unspent_minor BIGINT,
        FOREIGN KEY (account_id, currency) REFERENCES ledger_accounts (id, currency),
        CONSTRAINT ledger_entries_bonus CHECK ((expires_at IS NULL) = (unspent_minor IS NULL)),
        CONSTRAINT ledger_entries_unspent CHECK (unspent_minor IS NULL OR unspent_minor BETWEEN 0 AND amount_minor)
    )""",
    "CREATE INDEX ledger_entries_account ON ledger_entries (account_id, id)",
    "CREATE INDEX ledger_entries_transaction ON ledger_entries (transaction_id)",
    "CREATE INDEX ledger_entries_bonus_due ON ledger_entries (expires_at) WHERE unspent_minor > 0",
    f"""CREATE TABLE payment_intents (
        id BIGSERIAL PRIMARY KEY,
        order_id BIGINT NOT NULL REFERENCES orders (id),
        provider TEXT NOT NULL CHECK (provider IN ({PROVIDERS})),
        provider_payment_id TEXT,
        amount_minor BIGINT NOT NULL CHECK (amount_minor > 0),
        currency TEXT NOT NULL CHECK ({CURRENCY.format("currency")}),
        status TEXT NOT NULL CHECK (status IN ({INTENT_STATUSES})),
        confirmation_url TEXT,
        idempotence_key TEXT NOT NULL UNIQUE,
        created_at TIMESTAMP NOT NULL,
        updated_at TIMESTAMP NOT NULL,
        last_polled_at TIMESTAMP,
        UNIQUE (provider, provider_payment_id)
    )""",
    "CREATE INDEX payment_intents_order ON payment_intents (order_id, id)",
    "CREATE INDEX payment_intents_status ON payment_intents (status, created_at)",
    f"""CREATE TABLE provider_webhook_events (
        id BIGSERIAL PRIMARY KEY,
        provider TEXT NOT NULL CHECK (provider IN ({PROVIDERS})),
        provider_event_id TEXT,
        received_at TIMESTAMP NOT NULL,
        signature_ok BOOLEAN NOT NULL,
        processed_at TIMESTAMP,
        outcome TEXT,
        payment_intent_id BIGINT REFERENCES payment_intents (id),
        retain_until TIMESTAMP NOT NULL,
        body BYTEA NOT NULL CHECK (octet_length(body) <= {64 * 1024})
    )""",
    "CREATE INDEX provider_webhook_events_event ON provider_webhook_events (provider, provider_event_id)",
    "CREATE INDEX provider_webhook_events_retention ON provider_webhook_events (retain_until)",
]

# Deferred to COMMIT, so the entries of one transaction may be inserted one
# by one; it fires only when an amount, a currency or the owning transaction
# changes (spending a bonus credit changes its unspent part, nothing else).
POSTGRES_LEDGER = [
    """CREATE FUNCTION ledger_transaction_balances() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
        checked BIGINT;
        unbalanced TEXT;
    BEGIN
        FOREACH checked IN ARRAY ARRAY[
            CASE WHEN TG_OP <> 'DELETE' THEN NEW.transaction_id END,
            CASE WHEN TG_OP <> 'INSERT' THEN OLD.transaction_id END
        ] LOOP
            CONTINUE WHEN checked IS NULL;
            SELECT currency INTO unbalanced FROM ledger_entries
                WHERE transaction_id = checked GROUP BY currency HAVING SUM(amount_minor) <> 0 LIMIT 1;
            IF FOUND THEN
                RAISE EXCEPTION USING
                    ERRCODE = 'check_violation',
                    CONSTRAINT = 'ledger_entries_balanced',
                    MESSAGE = 'ledger transaction ' || checked || ' does not sum to zero in ' || unbalanced;
            END IF;
        END LOOP;
        RETURN NULL;
    END
    $$""",
    """CREATE CONSTRAINT TRIGGER ledger_entries_balanced
        AFTER INSERT OR DELETE OR UPDATE OF amount_minor, currency, transaction_id ON ledger_entries
        DEFERRABLE INITIALLY DEFERRED
        FOR EACH ROW EXECUTE FUNCTION ledger_transaction_balances()""",
]

NEW_TABLES = (
    "provider_webhook_events",
    "payment_intents",
    "ledger_entries",
    "ledger_transactions",
    "ledger_accounts",
    "trial_activations",
    "access_code_activations",
    "access_codes",
    "gift_cards",
)
TABLES_BEFORE_ORDERS = ("personal_offers", "addon_prices", "addons", "plan_prices")


def _sqlite(statement):
    return (
        statement.replace("BIGSERIAL PRIMARY KEY", "INTEGER PRIMARY KEY AUTOINCREMENT")
        .replace("DEFAULT TRUE", "DEFAULT 1")
        .replace("DEFAULT FALSE", "DEFAULT 0")
        .replace("BYTEA", "BLOB")
        .replace("octet_length(", "length(")
    )


def _rebuild_sqlite_orders(db, definition, copied, values):
    """SQLite's way to change a table's constraints: build it anew, copy the
    rows, keep the id sequence, swap. The migration runner has turned foreign
    keys off for the migration (SqliteMigrator), as SQLite requires."""
    db.execute_sql(definition)
    db.execute_sql(f"INSERT INTO orders_rebuilt ({copied}) SELECT {values} FROM orders")
    db.execute_sql("DELETE FROM sqlite_sequence WHERE name = 'orders_rebuilt'")
    db.execute_sql(
        "INSERT INTO sqlite_sequence (name, seq)"
        " SELECT 'orders_rebuilt', seq FROM sqlite_sequence WHERE name = 'orders'"
    )
    db.execute_sql("DROP TABLE orders")
    db.execute_sql("ALTER TABLE orders_rebuilt RENAME TO orders")
    for statement in ORDER_INDEXES:
        db.execute_sql(statement)
    broken = db.execute_sql("PRAGMA foreign_key_check").fetchall()
    if broken:
        raise RuntimeError(f"rebuilding orders left {len(broken)} broken references")


def up(migrator, db):
    postgres = isinstance(db, PostgresqlDatabase)
    adapt = (lambda statement: statement) if postgres else _sqlite
    for statement in BEFORE_ORDERS:
        db.execute_sql(adapt(statement))
    if postgres:
        for statement in POSTGRES_ORDERS:
            db.execute_sql(statement)
    else:
        definition = _orders_table("orders_rebuilt", "", OPERATIONS, ORDER_COLUMNS + ORDER_CONSTRAINTS)
        refunded = "CASE WHEN status = 'refunded' THEN amount_minor ELSE 0 END"
        _rebuild_sqlite_orders(
            db, definition, f"{ORDERS_COPIED}, refunded_amount_minor", f"{ORDERS_COPIED}, {refunded}"
        )
    for statement in AFTER_ORDERS + (POSTGRES_LEDGER if postgres else []):
        db.execute_sql(adapt(statement))


def down(migrator, db):
    postgres = isinstance(db, PostgresqlDatabase)
    for table in NEW_TABLES:
        db.execute_sql(f"DROP TABLE IF EXISTS {table}")
    if postgres:
        db.execute_sql("DROP FUNCTION IF EXISTS ledger_transaction_balances()")
        db.execute_sql("DROP INDEX orders_awaiting_payment")
        for constraint in ORDER_CONSTRAINTS:
            db.execute_sql(f"ALTER TABLE orders DROP CONSTRAINT {constraint.split()[1]}")
        for column in ORDER_COLUMNS:
            db.execute_sql(f"ALTER TABLE orders DROP COLUMN {column.split()[0]}")
        db.execute_sql("ALTER TABLE orders ALTER COLUMN plan_id SET NOT NULL")
        db.execute_sql("ALTER TABLE orders DROP CONSTRAINT orders_operation_check")
        db.execute_sql(
            f"ALTER TABLE orders ADD CONSTRAINT orders_operation_check CHECK (operation IN ({OPERATIONS_BEFORE}))"
        )
        db.execute_sql("ALTER TABLE subscriptions DROP COLUMN plan_id")
        db.execute_sql("ALTER TABLE subscriptions DROP COLUMN auto_renew")
    else:
        before = _orders_table("orders_rebuilt", "NOT NULL ", OPERATIONS_BEFORE, [])
        _rebuild_sqlite_orders(db, before, ORDERS_COPIED, ORDERS_COPIED)
        _rebuild_sqlite_subscriptions(db)
    for table in TABLES_BEFORE_ORDERS:
        db.execute_sql(f"DROP TABLE IF EXISTS {table}")
    db.execute_sql("ALTER TABLE plans DROP COLUMN trial")
    db.execute_sql("DROP INDEX customers_telegram_username")
    db.execute_sql("DROP INDEX customers_telegram_id")
    for column in ("blocked_at", "blocked_reason", "blocked", "language_code", "telegram_username", "telegram_id"):
        db.execute_sql(f"ALTER TABLE customers DROP COLUMN {column}")


def _rebuild_sqlite_subscriptions(db):
    """SQLite cannot drop a column that has a REFERENCES clause: the table is built again without it."""
    kept = "id, customer_id, slot, remote_user_id, remote_username, observed_state, created_at"
    db.execute_sql(
        """CREATE TABLE subscriptions_rebuilt (
            id TEXT PRIMARY KEY,
            customer_id TEXT NOT NULL REFERENCES customers (id),
            slot INTEGER NOT NULL CHECK (slot >= 1),
            remote_user_id TEXT,
            remote_username TEXT,
            observed_state TEXT,
            created_at TIMESTAMP NOT NULL,
            UNIQUE (customer_id, slot)
        )"""
    )
    db.execute_sql(f"INSERT INTO subscriptions_rebuilt ({kept}) SELECT {kept} FROM subscriptions")
    db.execute_sql("DROP TABLE subscriptions")
    db.execute_sql("ALTER TABLE subscriptions_rebuilt RENAME TO subscriptions")
