"""What upgrades credited for the periods they replaced (SPEC 13.9, 13.10), and what is left of it.

An upgrade credits the unused part of each period it replaces to the
customer's wallet: a `proration_credit` transaction of the upgrade's order,
keyed `order:<upgrade>:proration:<entitlement>`. That money was given back
once, so:

- a period already credited (and not taken back) is never credited again,
  however many upgrades follow before the worker applied the first one
  (commerce/settlement.py);
- a refund of the order that bought a credited period gives back at most
  what was paid less what was credited for it (commerce/refunds.py);
- a full refund of the upgrade itself takes its credits back from the
  wallet: the upgrade is undone, so the periods it replaced are not bought
  back either (commerce/refunds.py).

What was taken back is a `refund` transaction reversing the credit
(`ledger.reverse`); "left" below is a credit less its reversals.
"""

from models.transactions import fetch_all

KIND = "proration_credit"


def key(upgrade_order_id, entitlement_id):
    return f"order:{upgrade_order_id}:proration:{entitlement_id}"


def credits_of_upgrade(upgrade_order_id):
    """[(transaction id, amount left)] of the credits an upgrade posted, oldest first."""
    return [(transaction_id, left) for transaction_id, _, left in _credits("t.order_id = %s", (upgrade_order_id,))]


def credited_for_periods(subscription_id):
    """{entitlement id: amount credited for its unused part and not taken back} in a subscription."""
    credited = {}
    rows = _credits(
        "t.order_id IN (SELECT o.id FROM orders o WHERE o.subscription_id = %s AND o.operation = 'upgrade')",
        (subscription_id,),
    )
    for _, transaction_key, left in rows:
        entitlement_id = _entitlement_of(transaction_key)
        if entitlement_id is not None and left > 0:
            credited[entitlement_id] = credited.get(entitlement_id, 0) + left
    return credited


def _credits(condition, params):
    """(transaction id, key, credited less reversed) of proration credits matching `condition` on t."""
    return [
        (row[0], row[1], int(row[2]) - int(row[3]))
        for row in fetch_all(
            "SELECT t.id, t.idempotency_key,"
            " (SELECT COALESCE(SUM(e.amount_minor), 0) FROM ledger_entries e"
            "  WHERE e.transaction_id = t.id AND e.amount_minor > 0),"
            " (SELECT COALESCE(SUM(r.amount_minor), 0) FROM ledger_entries r"
            "  JOIN ledger_transactions b ON b.id = r.transaction_id WHERE b.reverses_id = t.id AND r.amount_minor > 0)"
            f" FROM ledger_transactions t WHERE t.kind = %s AND {condition} ORDER BY t.id",
            (KIND, *params),
        )
    ]


def _entitlement_of(transaction_key):
    _, _, reference = (transaction_key or "").rpartition(":proration:")
    return int(reference) if reference.isascii() and reference.isdigit() else None
