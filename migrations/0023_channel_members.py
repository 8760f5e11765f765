"""Channel membership state (SPEC 6, 14.6): per customer, whether they were a member of the required channel when
last checked, so the bot's 10-minute loop re-verifies members in batches and a restart forgets nothing.

- `bot_channel_members`: one row per customer checked, for `channel` (the
  `APP_TELEGRAM_REQUIRED_CHANNEL` it was checked against: a row for another
  channel counts as never checked), `member`, `checked_at` (the last answer
  of getChatMember) and `left_at` (when a re-check found a member gone).
- `bot_channel_members_due`: the loop's read, members of a channel by the
  time they were last checked.

Not disposable (SPEC 7 sweeps nothing here): one row per customer, the
customer's current state.
"""

UP = [
    """CREATE TABLE bot_channel_members (
        customer_id TEXT PRIMARY KEY REFERENCES customers (id),
        channel TEXT NOT NULL,
        member BOOLEAN NOT NULL,
        checked_at TIMESTAMP NOT NULL,
        left_at TIMESTAMP
    )""",
    "CREATE INDEX bot_channel_members_due ON bot_channel_members (channel, checked_at) WHERE member",
]

DOWN = ["DROP TABLE bot_channel_members"]


def up(migrator, db):
    for statement in UP:
        db.execute_sql(statement)


def down(migrator, db):
    for statement in DOWN:
        db.execute_sql(statement)
