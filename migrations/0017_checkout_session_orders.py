"""A bot checkout session names the order it became (SPEC 7, 14.7).

Retention deletes expired checkout sessions "that never became an order":
`bot_checkout_sessions.order_id` is set when a session's checkout creates
its order, and stays NULL for a cart the customer walked away from.
"""


def up(migrator, db):
    db.execute_sql("ALTER TABLE bot_checkout_sessions ADD COLUMN order_id BIGINT REFERENCES orders (id)")


def down(migrator, db):
    db.execute_sql("ALTER TABLE bot_checkout_sessions DROP COLUMN order_id")
