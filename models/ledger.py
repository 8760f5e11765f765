"""The wallet ledger's tables (SPEC 13.3): accounts, transactions, entries.

Written only by commerce/ledger.py `post()`. Entries never change, except a
bonus credit's `unspent_minor`, the part of it not yet spent or expired.
"""

from peewee import BigAutoField, BigIntegerField, DateTimeField, ForeignKeyField, TextField

from models.base import BaseModel, utcnow
from models.commerce import Customer, Order

ACCOUNT_KINDS = ("customer_wallet", "revenue", "provider_clearing", "promotions")
TRANSACTION_KINDS = ("topup", "purchase", "renewal", "refund", "expiration", "bonus", "proration_credit")


class LedgerAccount(BaseModel):
    """One account per name and currency: `customer_wallet:<id>`, `revenue`,
    `provider_clearing:<provider>`, `promotions`."""

    id = BigAutoField()
    name = TextField()
    kind = TextField()
    currency = TextField()
    customer = ForeignKeyField(Customer, null=True, backref="+", column_name="customer_id")  # wallets only
    created_at = DateTimeField(default=utcnow)

    class Meta:
        table_name = "ledger_accounts"
        indexes = ((("name", "currency"), True),)


class LedgerTransaction(BaseModel):
    id = BigAutoField()
    kind = TextField()
    order = ForeignKeyField(Order, null=True, backref="+", column_name="order_id")
    reverses = ForeignKeyField("self", null=True, backref="reversals", column_name="reverses_id")
    idempotency_key = TextField(null=True, unique=True)
    created_at = DateTimeField(default=utcnow)

    class Meta:
        table_name = "ledger_transactions"


class LedgerEntry(BaseModel):
    id = BigAutoField()
    transaction = ForeignKeyField(LedgerTransaction, backref="entries", column_name="transaction_id")
    account = ForeignKeyField(LedgerAccount, backref="entries", column_name="account_id")
    currency = TextField()  # the account's: (account_id, currency) references the account
    amount_minor = BigIntegerField()  # signed; never 0
    expires_at = DateTimeField(null=True)  # bonus credits only
    unspent_minor = BigIntegerField(null=True)  # bonus credits only

    class Meta:
        table_name = "ledger_entries"


LEDGER_MODELS = [LedgerAccount, LedgerTransaction, LedgerEntry]
