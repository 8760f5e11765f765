"""The ledger's invariant (SPEC 13.3), checked from the rows alone, whoever wrote them.

Used by the `ledger_invariant` fixture (tests/conftest.py) after every test
that moves money.
"""

from models.base import db

UNBALANCED = """SELECT transaction_id, currency, SUM(amount_minor) FROM ledger_entries
    GROUP BY transaction_id, currency HAVING SUM(amount_minor) <> 0 ORDER BY transaction_id"""
WALLETS = """SELECT a.name, a.currency, SUM(e.amount_minor), COALESCE(SUM(e.unspent_minor), 0)
    FROM ledger_accounts a JOIN ledger_entries e ON e.account_id = a.id
    WHERE a.kind = 'customer_wallet' GROUP BY a.id, a.name, a.currency ORDER BY a.id"""


def ledger_problems():
    """What breaks the invariant now: transactions that do not sum to zero in a
    currency, wallets below zero, wallets whose unspent bonus exceeds their balance."""
    problems = [
        f"transaction {transaction_id} sums to {total} {currency}"
        for transaction_id, currency, total in db.execute_sql(UNBALANCED).fetchall()
    ]
    for name, currency, total, unspent in db.execute_sql(WALLETS).fetchall():
        if total < 0:
            problems.append(f"{name} holds {total} {currency}")
        elif unspent > total:
            problems.append(f"{name} has {unspent} {currency} of unspent bonus but a balance of {total}")
    return problems
