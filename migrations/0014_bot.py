"""The bot (SPEC 14): applied updates, sessions swept by retention, forum topics, the notifier's queue.

- `bot_updates`: one row per applied update, keyed by `update_id`, written
  in the transaction that applies the update's effect (14.3). A key rather
  than a "last applied id" mark: Telegram picks the next id at random after
  a week without updates, so an id lower than the last one is a new update.
  `applied_at` is indexed so old rows can be pruned (Telegram keeps an
  unconfirmed update for at most a day).
- `bot_sessions` (24 h), `bot_checkout_sessions` (30 min),
  `bot_shop_reviews` (1 day): each with `expires_at` and an index on it,
  which is what retention sweeps by (SPEC 7).
- `bot_forum_topics`: the forum topic made once per notice topic in the
  operator chat (UNIQUE chat and topic).
- `operator_notices_pending`: the notifier reads pending notices oldest
  first, 50 at a time; the partial index holds only those.
"""

from peewee import PostgresqlDatabase

STATEMENTS = [
    """CREATE TABLE bot_updates (
        update_id BIGINT PRIMARY KEY,
        kind TEXT NOT NULL,
        applied_at TIMESTAMP NOT NULL
    )""",
    "CREATE INDEX bot_updates_applied ON bot_updates (applied_at)",
    """CREATE TABLE bot_sessions (
        chat_id BIGINT PRIMARY KEY,
        customer_id TEXT REFERENCES customers (id),
        state TEXT NOT NULL DEFAULT '{}',
        updated_at TIMESTAMP NOT NULL,
        expires_at TIMESTAMP NOT NULL
    )""",
    "CREATE INDEX bot_sessions_expiry ON bot_sessions (expires_at)",
    """CREATE TABLE bot_checkout_sessions (
        id BIGSERIAL PRIMARY KEY,
        chat_id BIGINT NOT NULL,
        customer_id TEXT NOT NULL REFERENCES customers (id),
        state TEXT NOT NULL DEFAULT '{}',
        created_at TIMESTAMP NOT NULL,
        expires_at TIMESTAMP NOT NULL
    )""",
    "CREATE INDEX bot_checkout_sessions_expiry ON bot_checkout_sessions (expires_at)",
    "CREATE INDEX bot_checkout_sessions_chat ON bot_checkout_sessions (chat_id, id)",
    """CREATE TABLE bot_shop_reviews (
        id BIGSERIAL PRIMARY KEY,
        chat_id BIGINT NOT NULL,
        customer_id TEXT REFERENCES customers (id),
        screen TEXT NOT NULL DEFAULT '{}',
        created_at TIMESTAMP NOT NULL,
        expires_at TIMESTAMP NOT NULL
    )""",
    "CREATE INDEX bot_shop_reviews_expiry ON bot_shop_reviews (expires_at)",
    """CREATE TABLE bot_forum_topics (
        id BIGSERIAL PRIMARY KEY,
        chat_id BIGINT NOT NULL,
        topic TEXT NOT NULL,
        message_thread_id BIGINT NOT NULL,
        created_at TIMESTAMP NOT NULL,
        UNIQUE (chat_id, topic)
    )""",
    "CREATE INDEX operator_notices_pending ON operator_notices (id) WHERE status = 'pending'",
]
TABLES = ("bot_forum_topics", "bot_shop_reviews", "bot_checkout_sessions", "bot_sessions", "bot_updates")


def up(migrator, db):
    postgres = isinstance(db, PostgresqlDatabase)
    for statement in STATEMENTS:
        db.execute_sql(
            statement if postgres else statement.replace("BIGSERIAL PRIMARY KEY", "INTEGER PRIMARY KEY AUTOINCREMENT")
        )


def down(migrator, db):
    db.execute_sql("DROP INDEX IF EXISTS operator_notices_pending")
    for table in TABLES:
        db.execute_sql(f"DROP TABLE IF EXISTS {table}")
