"""A bought gift card's code reaches its buyer (SPEC 13.11).

`customer_notices.secret`: what a notice must show its customer once and
nothing else may read — the code of a gift card bought at a provider or
from the wallet (commerce/gift_purchase.py). It is sealed at rest
(ops/sealing.py, context `customer_notices.secret`) and erased by the bot in
the transaction that marks the notice sent, so after the one delivery only
the card's hash is left anywhere. NULL for every other notice.
"""

UP = ["ALTER TABLE customer_notices ADD COLUMN secret TEXT"]

DOWN = ["ALTER TABLE customer_notices DROP COLUMN secret"]


def up(migrator, db):
    for statement in UP:
        db.execute_sql(statement)


def down(migrator, db):
    for statement in DOWN:
        db.execute_sql(statement)
