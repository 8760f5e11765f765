"""Operators who hold every permission there was get `operators.write`, the Operators page's new one.

Whoever holds it can reset anyone's password, so it goes only to those who
could already do everything (what `operators create` gives by default);
nobody gains a power over operators with more rights than their own.
"""

import json

EARLIER = {
    "system.read", "system.write", "subscriptions.read", "subscriptions.write", "payments.read", "payments.write",
    "campaigns.write", "support.read", "support.write",
}  # fmt: skip
ADDED = "operators.write"


def _rewrite(db, change):
    for operator_id, permissions in db.execute_sql("SELECT id, permissions FROM operators").fetchall():
        held = set(json.loads(permissions))
        changed = change(held)
        if changed != held:
            db.execute_sql(
                f"UPDATE operators SET permissions = {db.param} WHERE id = {db.param}",
                [json.dumps(sorted(changed)), operator_id],
            )


def up(migrator, db):
    _rewrite(db, lambda held: held | {ADDED} if EARLIER <= held else held)


def down(migrator, db):
    _rewrite(db, lambda held: held - {ADDED})
