"""Bulk actions (SPEC 15.6, 2.19): one operator change to many subscriptions, applied item by item.

- `bulk_actions`: what an operator previewed (`action` with its `days` or
  `squad_ids`, the plan it was chosen by or none), who previewed it and
  when, and its state: `previewed` (a frozen list waiting for a
  confirmation), `running` (confirmed, with the operator and reason),
  `paused`, `done`, `cancelled`.
- `bulk_action_items`: the frozen list, one subscription per `position`;
  `pending` until the `bulk_actions` pass applies it, then `applied` with
  the fulfillment operation it queued (keyed `bulk:<id>:<position>`) or
  `skipped` with the code of why not; `cancelled` when the action was.
- `bulk_action_items_pending`: what the pass reads next, in position order.
"""

from peewee import PostgresqlDatabase

ACTIONS = "'extend', 'set_squads', 'pause', 'resume'"
STATUSES = "'previewed', 'running', 'paused', 'done', 'cancelled'"
ITEM_STATUSES = "'pending', 'applied', 'skipped', 'cancelled'"

UP = [
    f"""CREATE TABLE bulk_actions (
        id BIGSERIAL PRIMARY KEY,
        action TEXT NOT NULL CHECK (action IN ({ACTIONS})),
        status TEXT NOT NULL CHECK (status IN ({STATUSES})),
        plan_id BIGINT REFERENCES plans (id),
        days INTEGER CHECK (days > 0),
        squad_ids TEXT,
        item_count INTEGER NOT NULL CHECK (item_count > 0),
        created_by TEXT NOT NULL,
        created_at TIMESTAMP NOT NULL,
        confirmed_by TEXT,
        confirmed_at TIMESTAMP,
        reason TEXT,
        finished_at TIMESTAMP,
        updated_at TIMESTAMP NOT NULL
    )""",
    f"""CREATE TABLE bulk_action_items (
        id BIGSERIAL PRIMARY KEY,
        bulk_action_id BIGINT NOT NULL REFERENCES bulk_actions (id),
        position INTEGER NOT NULL CHECK (position > 0),
        subscription_id TEXT NOT NULL REFERENCES subscriptions (id),
        status TEXT NOT NULL CHECK (status IN ({ITEM_STATUSES})),
        operation_id BIGINT REFERENCES fulfillment_operations (id),
        error_code TEXT,
        applied_at TIMESTAMP,
        UNIQUE (bulk_action_id, position)
    )""",
    "CREATE INDEX bulk_action_items_pending ON bulk_action_items (bulk_action_id, position) WHERE status = 'pending'",
]

DOWN = ["DROP TABLE bulk_action_items", "DROP TABLE bulk_actions"]


def up(migrator, db):
    postgres = isinstance(db, PostgresqlDatabase)
    for statement in UP:
        db.execute_sql(
            statement if postgres else statement.replace("BIGSERIAL PRIMARY KEY", "INTEGER PRIMARY KEY AUTOINCREMENT")
        )


def down(migrator, db):
    for statement in DOWN:
        db.execute_sql(statement)
