"""The back office's lists of every order and every payment, filtered and searched (issue 21).

`/panel/orders` and `/panel/payments` page newest first by (created_at, id)
and narrow by a date range, a status, a customer and a provider's payment id;
with a million orders these need:

- `orders_created` (created_at, id): the keyset pages and a date range, walked backwards from the cursor;
- `orders_status` (status, created_at): one status, newest first, without reading the others
  (`payment_intents_status` (status, created_at) of 0018 does it for payments);
- `payment_intents_created` (created_at, id) likewise for payments;
- `payment_intents_provider_payment_id` (provider_payment_id): a search by the provider's id without
  naming the provider (the unique index leads with the provider).

A customer is found through `orders_customer` (customer_id, id), which exists. `orders` and
`payment_intents` grow with every checkout: on PostgreSQL the indexes are built concurrently, outside
a transaction (like 0026), so checkouts go on writing during the release.
"""

from migrations import create_index_concurrently

atomic = False

INDEXES = {
    "orders_created": "orders (created_at, id)",
    "orders_status": "orders (status, created_at)",
    "payment_intents_created": "payment_intents (created_at, id)",
    "payment_intents_provider_payment_id": "payment_intents (provider_payment_id)",
}


def up(migrator, db):
    for name, on in INDEXES.items():
        create_index_concurrently(db, name, on)


def down(migrator, db):
    for name in INDEXES:
        db.execute_sql(f"DROP INDEX IF EXISTS {name}")
