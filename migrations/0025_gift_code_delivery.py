"""A bought gift card's code reaches its buyer (SPEC 13.11); a refund notification finds its refund (13.10).

`customer_notices.secret`: what a notice must show its customer once and
nothing else may read — the code of a gift card bought at a provider or
from the wallet (commerce/gift_purchase.py). It is sealed at rest
(ops/sealing.py, context `customer_notices.secret`) and erased by the bot in
the transaction that marks the notice sent, so after the one delivery only
the card's hash is left anywhere. NULL for every other notice.

YooKassa's `refund.succeeded` (commerce/provider_refund.py
`apply_notified_refund`) names the provider's refund and its payment: the
webhook finds our row by the refund id once recorded
(`refunds_provider_refund`), else among the pending refunds of that payment
(`refunds_pending_payment`), without reading the whole table.
"""

UP = [
    "ALTER TABLE customer_notices ADD COLUMN secret TEXT",
    "CREATE INDEX refunds_provider_refund ON refunds (provider, provider_refund_id)"
    " WHERE provider_refund_id IS NOT NULL",
    "CREATE INDEX refunds_pending_payment ON refunds (provider, provider_payment_id) WHERE status = 'pending'",
]

DOWN = [
    "DROP INDEX refunds_pending_payment",
    "DROP INDEX refunds_provider_refund",
    "ALTER TABLE customer_notices DROP COLUMN secret",
]


def up(migrator, db):
    for statement in UP:
        db.execute_sql(statement)


def down(migrator, db):
    for statement in DOWN:
        db.execute_sql(statement)
