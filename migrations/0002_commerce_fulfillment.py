"""Commerce and fulfillment: customers, plans, subscriptions, orders,
entitlements, fulfillment operations and their history, drifts, operator
notices, audit events, the outbox and the maintenance switch.

The rules that must hold whatever code writes the rows are constraints
here: one entitlement per order, a period that ends after it starts, only
the eight operations, one idempotency key per operation, one open drift per
entitlement and kind, one notice per kind and dedupe key.
"""

from peewee import PostgresqlDatabase


def _in(values):
    return ", ".join(f"'{value}'" for value in values)


ORDER_STATUSES = _in(
    ("draft", "pending", "paid", "fulfilled", "cancelled", "expired", "partially_refunded", "refunded")
)
ORDER_OPERATIONS = _in(("purchase", "extension", "renewal", "upgrade", "downgrade", "addon", "gift", "code", "trial"))
ENTITLEMENT_STATUSES = _in(("pending", "active", "limited", "disabled", "expired", "superseded", "failed", "paused"))
OPERATIONS = _in(("create", "reconcile", "extend", "set_limits", "set_squads", "enable", "disable", "reset_traffic"))
OPERATION_STATUSES = _in(("pending", "running", "succeeded", "retrying", "failed", "cancelled"))
DRIFT_KINDS = _in(("missing_remote", "expiry", "traffic", "device_limit", "squads", "status", "external_edit"))
NOTICE_STATUSES = _in(("pending", "sent", "suppressed", "failed"))

POSTGRES = [
    """CREATE TABLE customers (
        id TEXT PRIMARY KEY,
        display_name TEXT NOT NULL DEFAULT '',
        created_at TIMESTAMP NOT NULL
    )""",
    """CREATE TABLE plans (
        id BIGSERIAL PRIMARY KEY,
        code TEXT NOT NULL UNIQUE,
        name TEXT NOT NULL,
        duration_days INTEGER NOT NULL CHECK (duration_days > 0),
        traffic_allowance_bytes BIGINT CHECK (traffic_allowance_bytes >= 0),
        device_limit INTEGER CHECK (device_limit >= 0),
        squad_ids TEXT NOT NULL DEFAULT '[]',
        grace_period_hours INTEGER NOT NULL DEFAULT 0 CHECK (grace_period_hours >= 0),
        price_minor BIGINT NOT NULL CHECK (price_minor >= 0),
        currency TEXT NOT NULL DEFAULT 'USD',
        active BOOLEAN NOT NULL DEFAULT TRUE
    )""",
    """CREATE TABLE subscriptions (
        id TEXT PRIMARY KEY,
        customer_id TEXT NOT NULL REFERENCES customers (id),
        slot INTEGER NOT NULL CHECK (slot >= 1),
        remote_user_id TEXT,
        remote_username TEXT,
        observed_state TEXT,
        created_at TIMESTAMP NOT NULL,
        UNIQUE (customer_id, slot)
    )""",
    f"""CREATE TABLE orders (
        id BIGSERIAL PRIMARY KEY,
        customer_id TEXT NOT NULL REFERENCES customers (id),
        subscription_id TEXT REFERENCES subscriptions (id),
        plan_id BIGINT NOT NULL REFERENCES plans (id),
        operation TEXT NOT NULL CHECK (operation IN ({ORDER_OPERATIONS})),
        status TEXT NOT NULL CHECK (status IN ({ORDER_STATUSES})),
        amount_minor BIGINT NOT NULL CHECK (amount_minor >= 0),
        currency TEXT NOT NULL,
        settled_by TEXT,
        created_at TIMESTAMP NOT NULL,
        paid_at TIMESTAMP,
        fulfilled_at TIMESTAMP,
        refunded_at TIMESTAMP
    )""",
    "CREATE INDEX orders_customer ON orders (customer_id, id)",
    f"""CREATE TABLE entitlements (
        id BIGSERIAL PRIMARY KEY,
        order_id BIGINT NOT NULL UNIQUE REFERENCES orders (id),
        subscription_id TEXT NOT NULL REFERENCES subscriptions (id),
        plan_id BIGINT NOT NULL REFERENCES plans (id),
        status TEXT NOT NULL CHECK (status IN ({ENTITLEMENT_STATUSES})),
        starts_at TIMESTAMP NOT NULL,
        ends_at TIMESTAMP NOT NULL,
        traffic_allowance_bytes BIGINT CHECK (traffic_allowance_bytes >= 0),
        device_limit INTEGER CHECK (device_limit >= 0),
        squad_ids TEXT NOT NULL DEFAULT '[]',
        grace_period_hours INTEGER NOT NULL DEFAULT 0,
        paused_at TIMESTAMP,
        reconciled_at TIMESTAMP,
        observed_state TEXT,
        created_at TIMESTAMP NOT NULL,
        updated_at TIMESTAMP NOT NULL,
        CONSTRAINT entitlements_period CHECK (ends_at > starts_at)
    )""",
    "CREATE INDEX entitlements_subscription ON entitlements (subscription_id, id)",
    "CREATE INDEX entitlements_reconcile ON entitlements (reconciled_at) WHERE status NOT IN ('pending', 'superseded')",
    f"""CREATE TABLE fulfillment_operations (
        id BIGSERIAL PRIMARY KEY,
        entitlement_id BIGINT NOT NULL REFERENCES entitlements (id),
        operation TEXT NOT NULL CHECK (operation IN ({OPERATIONS})),
        status TEXT NOT NULL CHECK (status IN ({OPERATION_STATUSES})),
        idempotency_key TEXT NOT NULL UNIQUE,
        desired_state TEXT NOT NULL,
        attempt_count INTEGER NOT NULL DEFAULT 0 CHECK (attempt_count >= 0),
        next_attempt_at TIMESTAMP,
        last_error_code TEXT,
        correlation_id TEXT NOT NULL,
        request_summary TEXT,
        response_summary TEXT,
        created_at TIMESTAMP NOT NULL,
        updated_at TIMESTAMP NOT NULL,
        completed_at TIMESTAMP
    )""",
    "CREATE INDEX fulfillment_operations_entitlement ON fulfillment_operations (entitlement_id, id)",
    "CREATE INDEX fulfillment_operations_status ON fulfillment_operations (status, id)",
    """CREATE INDEX fulfillment_operations_revive ON fulfillment_operations (created_at)
       WHERE status IN ('pending', 'retrying', 'running')""",
    """CREATE TABLE fulfillment_history (
        id BIGSERIAL PRIMARY KEY,
        operation_id BIGINT NOT NULL REFERENCES fulfillment_operations (id),
        attempt INTEGER NOT NULL,
        status TEXT NOT NULL,
        error_code TEXT,
        correlation_id TEXT NOT NULL,
        request_summary TEXT,
        response_summary TEXT,
        created_at TIMESTAMP NOT NULL
    )""",
    "CREATE INDEX fulfillment_history_operation ON fulfillment_history (operation_id, id)",
    f"""CREATE TABLE entitlement_drifts (
        id BIGSERIAL PRIMARY KEY,
        entitlement_id BIGINT NOT NULL REFERENCES entitlements (id),
        kind TEXT NOT NULL CHECK (kind IN ({DRIFT_KINDS})),
        status TEXT NOT NULL CHECK (status IN ('open', 'resolved')),
        expected TEXT NOT NULL,
        observed TEXT NOT NULL,
        detected_at TIMESTAMP NOT NULL,
        resolved_at TIMESTAMP
    )""",
    """CREATE UNIQUE INDEX entitlement_drifts_one_open ON entitlement_drifts (entitlement_id, kind)
       WHERE status = 'open'""",
    "CREATE INDEX entitlement_drifts_resolved ON entitlement_drifts (resolved_at) WHERE status <> 'open'",
    f"""CREATE TABLE operator_notices (
        id BIGSERIAL PRIMARY KEY,
        kind TEXT NOT NULL,
        dedupe_key TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ({NOTICE_STATUSES})),
        payload TEXT NOT NULL DEFAULT '{{}}',
        created_at TIMESTAMP NOT NULL,
        sent_at TIMESTAMP,
        UNIQUE (kind, dedupe_key)
    )""",
    """CREATE TABLE audit_events (
        id BIGSERIAL PRIMARY KEY,
        category TEXT NOT NULL,
        action TEXT NOT NULL,
        actor TEXT NOT NULL,
        reason TEXT,
        subject_type TEXT,
        subject_id TEXT,
        details TEXT NOT NULL DEFAULT '{}',
        created_at TIMESTAMP NOT NULL
    )""",
    """CREATE TABLE outbox_events (
        id BIGSERIAL PRIMARY KEY,
        topic TEXT NOT NULL,
        payload TEXT NOT NULL,
        created_at TIMESTAMP NOT NULL,
        published_at TIMESTAMP,
        attempt_count INTEGER NOT NULL DEFAULT 0,
        next_attempt_at TIMESTAMP,
        last_error TEXT
    )""",
    "CREATE INDEX outbox_events_pending ON outbox_events (created_at) WHERE published_at IS NULL",
    """CREATE TABLE maintenance_state (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        active BOOLEAN NOT NULL DEFAULT FALSE,
        since TIMESTAMP,
        reason TEXT,
        set_by TEXT,
        updated_at TIMESTAMP NOT NULL
    )""",
]

SQLITE = [
    statement.replace("BIGSERIAL PRIMARY KEY", "INTEGER PRIMARY KEY AUTOINCREMENT")
    .replace("DEFAULT TRUE", "DEFAULT 1")
    .replace("DEFAULT FALSE", "DEFAULT 0")
    for statement in POSTGRES
]

TABLES = (
    "maintenance_state",
    "outbox_events",
    "audit_events",
    "operator_notices",
    "entitlement_drifts",
    "fulfillment_history",
    "fulfillment_operations",
    "entitlements",
    "orders",
    "subscriptions",
    "plans",
    "customers",
)


def up(migrator, db):
    for statement in POSTGRES if isinstance(db, PostgresqlDatabase) else SQLITE:
        db.execute_sql(statement)
    db.execute_sql(
        "INSERT INTO maintenance_state (id, active, updated_at) VALUES (1, FALSE, CURRENT_TIMESTAMP)"
        if isinstance(db, PostgresqlDatabase)
        else "INSERT INTO maintenance_state (id, active, updated_at) VALUES (1, 0, CURRENT_TIMESTAMP)"
    )


def down(migrator, db):
    for table in TABLES:
        db.execute_sql(f"DROP TABLE IF EXISTS {table}")
