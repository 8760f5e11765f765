"""What the shop earned in a window of time, per currency, read from the ledger's
`revenue` account (SPEC 13.3).

The ledger rather than paid orders, because only the ledger counts each unit
of money once, when it is earned: a top-up is money the shop owes its
customer (the wallet), not revenue, and becomes revenue when the wallet pays
for an order; summing paid orders would count the top-up and the purchase it
paid for twice. The ledger also nets what was given back — a refund's
reversal and an upgrade's proration credit debit revenue — so the figure is
net revenue. A transaction counts at the time it was posted.
"""

from peewee import fn

from commerce.ledger import REVENUE
from models.ledger import LedgerAccount, LedgerEntry, LedgerTransaction


def revenue(since, until=None):
    """{currency: net minor units} posted to revenue from `since` (until `until`, when given)."""
    window = LedgerTransaction.created_at >= since
    if until is not None:
        window &= LedgerTransaction.created_at < until
    rows = (
        LedgerEntry.select(LedgerEntry.currency, fn.SUM(LedgerEntry.amount_minor))
        .join(LedgerTransaction, on=(LedgerEntry.transaction == LedgerTransaction.id))
        .switch(LedgerEntry)
        .join(LedgerAccount, on=(LedgerEntry.account == LedgerAccount.id))
        .where(LedgerAccount.kind == REVENUE, window)
        .group_by(LedgerEntry.currency)
        .order_by(LedgerEntry.currency)
        .tuples()
    )
    return {currency: int(total) for currency, total in rows}
