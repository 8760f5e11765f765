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

from peewee import SQL, fn

from commerce.ledger import REVENUE
from models import days
from models.ledger import LedgerAccount, LedgerEntry, LedgerTransaction


def _posted(*columns):
    """Revenue entries with their transaction (by ledger_transactions_created when the window is on its time)."""
    return (
        LedgerEntry.select(*columns)
        .join(LedgerTransaction, on=(LedgerEntry.transaction == LedgerTransaction.id))
        .switch(LedgerEntry)
        .join(LedgerAccount, on=(LedgerEntry.account == LedgerAccount.id))
    )


def revenue(since, until=None):
    """{currency: net minor units} posted to revenue from `since` (until `until`, when given)."""
    window = LedgerTransaction.created_at >= since
    if until is not None:
        window &= LedgerTransaction.created_at < until
    rows = (
        _posted(LedgerEntry.currency, fn.SUM(LedgerEntry.amount_minor))
        .where(LedgerAccount.kind == REVENUE, window)
        .group_by(LedgerEntry.currency)
        .order_by(LedgerEntry.currency)
        .tuples()
    )
    return {currency: int(total) for currency, total in rows}


def revenue_by_day(starts, end):
    """{currency: [net minor units of each day]} for the days beginning at `starts` (models/days.py), the
    last one ending at `end`; a day without revenue is 0, a day whose refunds outweigh it below 0."""
    rows = (
        _posted(days.day_index(LedgerTransaction.created_at, starts).alias("day_number"), LedgerEntry.currency,
                fn.SUM(LedgerEntry.amount_minor))
        .where(LedgerAccount.kind == REVENUE, days.within(LedgerTransaction.created_at, starts, end))
        .group_by(SQL("day_number"), LedgerEntry.currency)
        .tuples()
    )  # fmt: skip
    series = {}
    for day, currency, total in rows:
        series.setdefault(currency, [0] * len(starts))[int(day)] = int(total)
    return dict(sorted(series.items()))
