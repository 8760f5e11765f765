"""The wallet ledger (SPEC 13.3): double-entry, one writing function.

Every movement of money is a ledger transaction whose entries sum to zero in
each currency. Accounts: `customer_wallet:<customer id>` (what the shop owes
a customer), `revenue`, `provider_clearing:<provider>` (what a provider owes
the shop) and `promotions` (where bonuses come from), one account per name
and currency. A top-up moves clearing → wallet, paying from the wallet
wallet → revenue, a payment at a provider clearing → revenue, a bonus
promotions → wallet.

`post()` is the only writer. It runs inside the caller's transaction (the
one that also settles the order, SPEC 2.2), locks the customer wallets it
touches in id order (so two posts never wait on each other in a circle;
revenue and the other shared accounts are never locked, so purchases do not
queue behind each other), reads their balances under that lock, and refuses
a transaction that does not sum to zero or that would take a wallet below
zero. On PostgreSQL a constraint trigger checks the sum again at COMMIT,
whoever wrote the rows (migration 0011).

A balance is the sum of the account's entries. Bonus credits carry an
expiry; their unspent part is tracked on the credit's entry. Spending
consumes the earliest-expiring live bonus first and cash after it, so what
expires is what the customer had the longest chance to use. A refund taken
back from a wallet consumes cash first: refunding a top-up must not turn a
bonus into money that never expires. A bonus past its expiry cannot be
spent; `expire_bonuses()` (run by commerce_maintenance) posts what is left
of it as an `expiration` transaction back to promotions.
"""

from collections import defaultdict
from dataclasses import dataclass

from commerce.catalogue import is_currency
from models.base import db, utcnow
from models.commerce import PAYMENT_PROVIDERS, Customer
from models.ledger import TRANSACTION_KINDS, LedgerAccount, LedgerEntry, LedgerTransaction
from models.transactions import cached_select, execute_all, fetch_one, locked

WALLET = "customer_wallet"
REVENUE = "revenue"
PROVIDER_CLEARING = "provider_clearing"
PROMOTIONS = "promotions"
EXPIRY_BATCH = 100
# A bonus is taken back by its expiry, a refund or an expiration is not undone.
UNREVERSIBLE_KINDS = ("bonus", "refund", "expiration")

INSUFFICIENT_FUNDS = "insufficient_funds"
UNBALANCED = "ledger_unbalanced"
INVALID_ENTRY = "invalid_ledger_entry"
UNKNOWN_ACCOUNT = "unknown_ledger_account"
INVALID_TRANSACTION_KIND = "invalid_ledger_transaction_kind"
IDEMPOTENCY_KEY_REUSED = "idempotency_key_reused"
NOT_REVERSIBLE = "not_reversible"
REVERSAL_EXCEEDS_ORIGINAL = "reversal_exceeds_original"
NOT_A_TOPUP = "not_a_topup"
NOT_CHARGEABLE = "order_not_chargeable"
EXPIRATION_EXCEEDS_BONUS = "expiration_exceeds_bonus"


class LedgerRejected(ValueError):
    """Nothing was posted; `code` is machine-readable."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Entry:
    """One leg of a transaction: a signed amount on an account (by name) in a currency.
    A positive wallet entry with `expires_at` is a bonus credit."""

    account: str
    amount_minor: int
    currency: str
    expires_at: object = None


@dataclass(frozen=True)
class HistoryItem:
    entry_id: int
    transaction_id: int
    kind: str
    order_id: object
    amount_minor: int
    currency: str
    expires_at: object
    created_at: object


def wallet(customer_id):
    return f"{WALLET}:{customer_id}"


def provider_clearing(provider):
    return f"{PROVIDER_CLEARING}:{provider}"


def post(kind, entries, order=None, key=None, reverses=None):
    """Write one balanced transaction in the caller's transaction and return it.

    With a key, posting again returns the first transaction and writes
    nothing (the same key for another kind or order is refused)."""
    if not db.in_transaction():
        raise RuntimeError("ledger.post() runs inside the caller's transaction (with db.atomic():)")
    if kind not in TRANSACTION_KINDS:
        raise LedgerRejected(INVALID_TRANSACTION_KIND, f"a transaction is one of {', '.join(TRANSACTION_KINDS)}")
    entries = list(entries)
    _check_entries(kind, entries)
    order_id = getattr(order, "id", order)
    accounts = _accounts(entries)
    wallets = sorted({account.id for account in accounts.values() if account.kind == WALLET})
    if wallets:
        lock = LedgerAccount.select(LedgerAccount.id).where(LedgerAccount.id.in_(wallets)).order_by(LedgerAccount.id)
        list(locked(lock))
    if key is not None and wallets:
        # Before the wallets are judged: a replay is not refused for what they hold now.
        existing = LedgerTransaction.get_or_none(LedgerTransaction.idempotency_key == key)
        if existing is not None:
            return _same_transaction(existing, kind, order_id)
    now = utcnow()
    spending = {account_id: _spend(kind, account_id, entries, accounts, now) for account_id in wallets}
    row = fetch_one(
        "INSERT INTO ledger_transactions (kind, order_id, reverses_id, idempotency_key, created_at)"
        " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (idempotency_key) DO NOTHING RETURNING id",
        (kind, order_id, getattr(reverses, "id", reverses), key, now),
    )
    if row is None:  # posted before under this key (or by a concurrent post that committed first)
        return _same_transaction(LedgerTransaction.get(LedgerTransaction.idempotency_key == key), kind, order_id)
    rows = [
        {
            "transaction": row[0],
            "account": accounts[(entry.account, entry.currency)].id,
            "currency": entry.currency,
            "amount_minor": entry.amount_minor,
            "expires_at": entry.expires_at,
            "unspent_minor": entry.amount_minor if entry.expires_at is not None else None,
        }
        for entry in entries
    ]
    writes = [
        (
            "INSERT INTO ledger_entries (transaction_id, account_id, currency, amount_minor, expires_at, unspent_minor)"
            " VALUES " + ", ".join(["(%s, %s, %s, %s, %s, %s)"] * len(rows)),
            [value for entry in rows for value in entry.values()],
        )
    ]
    for consumed in spending.values():
        for entry_id, unspent in consumed:
            writes.append(("UPDATE ledger_entries SET unspent_minor = %s WHERE id = %s", (unspent, entry_id)))
    execute_all(writes)  # nothing reads their results: on PostgreSQL they ride with the next round trip
    return LedgerTransaction(
        id=row[0], kind=kind, order=order_id, reverses=getattr(reverses, "id", reverses), idempotency_key=key,
        created_at=now,
    )  # fmt: skip


def balance(customer_id, currency):
    """The wallet's balance: the sum of its entries (0 when it has none)."""
    account = LedgerAccount.get_or_none(LedgerAccount.name == wallet(customer_id), LedgerAccount.currency == currency)
    return 0 if account is None else _sum(account.id)


def balances(customer_id):
    """{currency: balance} of every wallet account the customer has (none: {})."""
    accounts = LedgerAccount.select(LedgerAccount.id, LedgerAccount.currency).where(
        LedgerAccount.name == wallet(customer_id)
    )
    return {account.currency: _sum(account.id) for account in accounts.order_by(LedgerAccount.currency)}


def history(customer_id, limit=50, before=None):
    """The customer's wallet entries, newest first; `before` an entry id to page on from."""
    query = (
        LedgerEntry.select(LedgerEntry, LedgerTransaction)
        .join(LedgerAccount, on=(LedgerEntry.account == LedgerAccount.id))
        .switch(LedgerEntry)
        .join(LedgerTransaction)
        .where(LedgerAccount.name == wallet(customer_id))
        .order_by(LedgerEntry.id.desc())
        .limit(limit)
    )
    if before is not None:
        query = query.where(LedgerEntry.id < before)
    return [
        HistoryItem(
            entry.id,
            entry.transaction.id,
            entry.transaction.kind,
            entry.transaction.order_id,
            entry.amount_minor,
            entry.currency,
            entry.expires_at,
            entry.transaction.created_at,
        )
        for entry in query
    ]


def credit_topup(order, provider):
    """A paid top-up: provider clearing → the customer's wallet (key `order:<id>:topup`)."""
    if order.operation != "topup":
        raise LedgerRejected(NOT_A_TOPUP, f"order {order.id} is a {order.operation}, not a top-up")
    return post(
        "topup",
        [
            Entry(provider_clearing(provider), -order.amount_minor, order.currency),
            Entry(wallet(order.customer_id), order.amount_minor, order.currency),
        ],
        order=order,
        key=f"order:{order.id}:topup",
    )


def record_sale(order, provider):
    """An order paid at a provider: provider clearing → revenue (key `order:<id>:payment`)."""
    if order.operation == "topup":
        raise LedgerRejected(NOT_CHARGEABLE, "a top-up goes to the wallet: credit_topup")
    return post(
        _sale_kind(order),
        [
            Entry(provider_clearing(provider), -order.amount_minor, order.currency),
            Entry(REVENUE, order.amount_minor, order.currency),
        ],
        order=order,
        key=f"order:{order.id}:payment",
    )


def charge_wallet(order):
    """Pay an order from its customer's wallet: wallet → revenue (key `order:<id>:wallet`).
    LedgerRejected(INSUFFICIENT_FUNDS) when the wallet cannot cover it; None for a free order."""
    if order.operation == "topup":
        raise LedgerRejected(NOT_CHARGEABLE, "a top-up cannot be paid from the wallet it fills")
    if order.amount_minor == 0:
        return None
    return post(
        _sale_kind(order),
        [
            Entry(wallet(order.customer_id), -order.amount_minor, order.currency),
            Entry(REVENUE, order.amount_minor, order.currency),
        ],
        order=order,
        key=f"order:{order.id}:wallet",
    )


def grant_bonus(customer_id, amount_minor, currency, expires_at, key=None, order=None):
    """A bonus credit that expires: promotions → wallet."""
    return post(
        "bonus",
        [Entry(PROMOTIONS, -amount_minor, currency), Entry(wallet(customer_id), amount_minor, currency, expires_at)],
        order=order,
        key=key,
    )


def reverse(transaction, amount_minor, key=None):
    """Give back `amount_minor` of a two-entry transaction (a refund, in full or in
    part): its entries mirrored, never more in total than the original moved."""
    transaction_id = getattr(transaction, "id", transaction)
    original = locked(LedgerTransaction.select().where(LedgerTransaction.id == transaction_id)).first()
    legs = list(
        LedgerEntry.select(LedgerEntry, LedgerAccount).join(LedgerAccount).where(LedgerEntry.transaction == original)
    )
    if original is None or original.kind in UNREVERSIBLE_KINDS or len(legs) != 2:
        raise LedgerRejected(NOT_REVERSIBLE, "only a two-entry payment, top-up or credit can be reversed")
    if isinstance(amount_minor, bool) or not isinstance(amount_minor, int) or amount_minor <= 0:
        raise LedgerRejected(INVALID_ENTRY, "a reversal is a whole, positive number of minor units")
    if key is not None:
        existing = LedgerTransaction.get_or_none(LedgerTransaction.idempotency_key == key)
        if existing is not None:
            return _same_transaction(existing, "refund", original.order_id)
    moved = max(leg.amount_minor for leg in legs)
    if _reversed_so_far(original) + amount_minor > moved:
        raise LedgerRejected(REVERSAL_EXCEEDS_ORIGINAL, f"transaction {original.id} moved {moved}, no more comes back")
    mirrored = [
        Entry(leg.account.name, -amount_minor if leg.amount_minor > 0 else amount_minor, leg.currency) for leg in legs
    ]
    return post(
        "refund",
        mirrored,
        order=original.order_id,
        key=key,
        reverses=original,
    )


def expire_bonuses(limit=EXPIRY_BATCH):
    """Post the unspent part of bonus credits past their expiry, one short
    transaction per wallet, for at most `limit` credits (the longest expired
    first). Returns the number of expiration transactions posted."""
    now = utcnow()
    due = (
        LedgerEntry.select(LedgerEntry.account)
        .where(LedgerEntry.unspent_minor > 0, LedgerEntry.expires_at <= now)
        .order_by(LedgerEntry.expires_at, LedgerEntry.id)
        .limit(limit)
    )
    posted = 0
    for account_id in dict.fromkeys(entry.account_id for entry in due):
        with db.atomic():
            account = locked(LedgerAccount.select().where(LedgerAccount.id == account_id)).get()
            left = _expired_unspent(account.id, now)
            if left:
                post(
                    "expiration",
                    [Entry(account.name, -left, account.currency), Entry(PROMOTIONS, left, account.currency)],
                )
                posted += 1
    return posted


# -- inside post() --------------------------------------------------------------


def _check_entries(kind, entries):
    if not entries:
        raise LedgerRejected(UNBALANCED, "a transaction has entries")
    totals = defaultdict(int)
    for entry in entries:
        if not is_currency(entry.currency):
            raise LedgerRejected(INVALID_ENTRY, "an entry's currency is three capital letters")
        if isinstance(entry.amount_minor, bool) or not isinstance(entry.amount_minor, int) or entry.amount_minor == 0:
            raise LedgerRejected(INVALID_ENTRY, "an entry is a whole, non-zero number of minor units")
        if entry.expires_at is not None and not (entry.amount_minor > 0 and _kind_of(entry.account) == WALLET):
            raise LedgerRejected(INVALID_ENTRY, "only a credit to a customer wallet can expire")
        totals[entry.currency] += entry.amount_minor
    unbalanced = sorted(currency for currency, total in totals.items() if total != 0)
    if unbalanced:
        raise LedgerRejected(UNBALANCED, f"the entries do not sum to zero in {', '.join(unbalanced)}")


def _kind_of(name):
    kind, _, reference = str(name).partition(":")
    valid = (
        (kind in (REVENUE, PROMOTIONS) and not reference)
        or (kind == PROVIDER_CLEARING and reference in PAYMENT_PROVIDERS)
        or (kind == WALLET and bool(reference))
    )
    if not valid:
        raise LedgerRejected(UNKNOWN_ACCOUNT, f"unknown ledger account {name!r}")
    return kind


def _accounts(entries):
    """{(name, currency): account}, opening the accounts that do not exist yet."""
    wanted = {(entry.account, entry.currency) for entry in entries}
    found = _existing_accounts(wanted)
    for name, currency in sorted(wanted - set(found)):
        kind = _kind_of(name)
        customer_id = name.partition(":")[2] if kind == WALLET else None
        if customer_id is not None and not Customer.select().where(Customer.id == customer_id).exists():
            raise LedgerRejected(UNKNOWN_ACCOUNT, "no such customer for a wallet")
        fetch_one(
            "INSERT INTO ledger_accounts (name, kind, currency, customer_id, created_at)"
            " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (name, currency) DO NOTHING RETURNING id",
            (name, kind, currency, customer_id, utcnow()),
        )
    return found if len(found) == len(wanted) else _existing_accounts(wanted)


def _existing_accounts(wanted):
    names = sorted({name for name, _ in wanted})
    rows = cached_select(
        f"ledger.accounts.{len(names)}", lambda: LedgerAccount.select().where(LedgerAccount.name.in_(names)), names
    )
    return {(row.name, row.currency): row for row in rows if (row.name, row.currency) in wanted}


def _spend(kind, account_id, entries, accounts, now):
    """Check one locked wallet can bear the transaction; return the bonus
    credits it consumes as [(entry id, unspent after)]."""
    mine = [entry for entry in entries if accounts[(entry.account, entry.currency)].id == account_id]
    debit = -sum(entry.amount_minor for entry in mine if entry.expires_at is None)
    if debit <= 0:
        return []
    bonuses = list(
        LedgerEntry.select(LedgerEntry.id, LedgerEntry.expires_at, LedgerEntry.unspent_minor)
        .where(LedgerEntry.account == account_id, LedgerEntry.unspent_minor > 0)
        .order_by(LedgerEntry.expires_at, LedgerEntry.id)
    )
    expired = [bonus for bonus in bonuses if bonus.expires_at <= now]
    live = [bonus for bonus in bonuses if bonus.expires_at > now]
    if kind == "expiration":
        if debit > sum(bonus.unspent_minor for bonus in expired):
            raise LedgerRejected(EXPIRATION_EXCEEDS_BONUS, "an expiration takes back only expired bonus credit")
        return _consume(expired, debit)
    available = _sum(account_id) - sum(bonus.unspent_minor for bonus in expired)
    if debit > available:
        raise LedgerRejected(INSUFFICIENT_FUNDS, "the wallet does not hold enough")
    if kind == "refund":
        cash = available - sum(bonus.unspent_minor for bonus in live)
        return _consume(live, debit - min(cash, debit))
    return _consume(live, debit)


def _consume(bonuses, amount):
    consumed = []
    for bonus in bonuses:
        if amount <= 0:
            break
        taken = min(bonus.unspent_minor, amount)
        consumed.append((bonus.id, bonus.unspent_minor - taken))
        amount -= taken
    return consumed


def _sum(account_id):
    row = fetch_one("SELECT COALESCE(SUM(amount_minor), 0) FROM ledger_entries WHERE account_id = %s", (account_id,))
    return int(row[0])


def _expired_unspent(account_id, now):
    row = fetch_one(
        "SELECT COALESCE(SUM(unspent_minor), 0) FROM ledger_entries"
        " WHERE account_id = %s AND unspent_minor > 0 AND expires_at <= %s",
        (account_id, now),
    )
    return int(row[0])


def _reversed_so_far(original):
    row = fetch_one(
        "SELECT COALESCE(SUM(e.amount_minor), 0) FROM ledger_entries e"
        " JOIN ledger_transactions t ON t.id = e.transaction_id WHERE t.reverses_id = %s AND e.amount_minor > 0",
        (original.id,),
    )
    return int(row[0])


def _same_transaction(existing, kind, order_id):
    if existing.kind != kind or existing.order_id != order_id:
        raise LedgerRejected(IDEMPOTENCY_KEY_REUSED, "the idempotency key was already used for another transaction")
    return existing


def _sale_kind(order):
    return "renewal" if order.operation == "renewal" else "purchase"
