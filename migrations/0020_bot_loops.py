"""The bot's loops besides purchase (SPEC 6, 14.4, 14.6): campaigns and their recipients, support tickets and
their messages, and customers Telegram will not deliver to.

- `customers.telegram_unreachable_at`: set when Telegram answered 403 (the
  customer blocked the bot); campaigns leave such customers out.
- `campaigns` (a campaign or an announcement: one text for many chats) and
  `campaign_recipients`, one row per (campaign, customer) with the chat it
  goes to. A recipient is `pending`, `sending` (claimed in its own
  transaction just before the Telegram call, so a bot that dies mid-call
  never sends it again: the next one finds it `sending` and marks it
  `failed`), `sent`, `unreachable` (403) or `failed`.
  `campaign_recipients_due` holds only the pending and claimed rows, which
  the delivery loop reads in id order.
- `support_tickets` and `support_messages`: a customer's ticket and its
  thread. An operator's reply carries `push_status` (`pending` until the
  bot's reply push delivered it; then `sent`, `unreachable` or `failed`);
  a customer's message has none. `support_messages_unpushed` holds the
  replies still to push. Attachments stay in `support_attachments`
  (migration 0013), which names its ticket and message.
"""

from peewee import PostgresqlDatabase

UP = [
    "ALTER TABLE customers ADD COLUMN telegram_unreachable_at TIMESTAMP",
    """CREATE TABLE campaigns (
        id BIGSERIAL PRIMARY KEY,
        kind TEXT NOT NULL CHECK (kind IN ('campaign', 'announcement')),
        text TEXT NOT NULL CHECK (length(text) BETWEEN 1 AND 4096),
        status TEXT NOT NULL DEFAULT 'sending' CHECK (status IN ('sending', 'done')),
        recipients INTEGER NOT NULL DEFAULT 0,
        created_by TEXT NOT NULL,
        created_at TIMESTAMP NOT NULL,
        finished_at TIMESTAMP
    )""",
    """CREATE TABLE campaign_recipients (
        id BIGSERIAL PRIMARY KEY,
        campaign_id BIGINT NOT NULL REFERENCES campaigns (id),
        customer_id TEXT NOT NULL REFERENCES customers (id),
        chat_id BIGINT NOT NULL,
        status TEXT NOT NULL DEFAULT 'pending'
            CHECK (status IN ('pending', 'sending', 'sent', 'unreachable', 'failed')),
        attempts INTEGER NOT NULL DEFAULT 0,
        error_code TEXT,
        sent_at TIMESTAMP,
        UNIQUE (campaign_id, customer_id)
    )""",
    "CREATE INDEX campaign_recipients_due ON campaign_recipients (id) WHERE status IN ('pending', 'sending')",
    """CREATE TABLE support_tickets (
        id BIGSERIAL PRIMARY KEY,
        customer_id TEXT NOT NULL REFERENCES customers (id),
        chat_id BIGINT NOT NULL,
        status TEXT NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'answered', 'closed')),
        created_at TIMESTAMP NOT NULL,
        updated_at TIMESTAMP NOT NULL
    )""",
    "CREATE INDEX support_tickets_customer ON support_tickets (customer_id, id)",
    "CREATE INDEX support_tickets_status ON support_tickets (status, updated_at)",
    """CREATE TABLE support_messages (
        id BIGSERIAL PRIMARY KEY,
        ticket_id BIGINT NOT NULL REFERENCES support_tickets (id),
        author TEXT NOT NULL CHECK (author IN ('customer', 'operator')),
        operator_username TEXT,
        text TEXT NOT NULL DEFAULT '',
        push_status TEXT CHECK (push_status IN ('pending', 'sent', 'unreachable', 'failed')),
        pushed_at TIMESTAMP,
        created_at TIMESTAMP NOT NULL
    )""",
    "CREATE INDEX support_messages_ticket ON support_messages (ticket_id, id)",
    "CREATE INDEX support_messages_unpushed ON support_messages (id) WHERE push_status = 'pending'",
]

DOWN = [
    "DROP TABLE support_messages",
    "DROP TABLE support_tickets",
    "DROP TABLE campaign_recipients",
    "DROP TABLE campaigns",
    "ALTER TABLE customers DROP COLUMN telegram_unreachable_at",
]


def up(migrator, db):
    postgres = isinstance(db, PostgresqlDatabase)
    for statement in UP:
        db.execute_sql(
            statement if postgres else statement.replace("BIGSERIAL PRIMARY KEY", "INTEGER PRIMARY KEY AUTOINCREMENT")
        )


def down(migrator, db):
    for statement in DOWN:
        db.execute_sql(statement)
