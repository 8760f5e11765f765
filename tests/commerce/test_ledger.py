"""SPEC 13.3: the wallet ledger is double-entry, its balances never go below
zero, bonus credits expire, and PostgreSQL itself refuses an unbalanced transaction."""

import datetime
import threading

import pytest
from peewee import IntegrityError

from commerce import ledger
from commerce.ledger import PROMOTIONS, REVENUE, Entry, LedgerRejected, provider_clearing, wallet
from models.base import db, utcnow
from models.ledger import LedgerAccount, LedgerEntry, LedgerTransaction
from models.transactions import is_postgres, retry_serializable
from tests.support import commerce
from tests.support.ledger import ledger_problems

pytestmark = pytest.mark.usefixtures("ledger_invariant")

HOUR = datetime.timedelta(hours=1)


def topped_up(amount, currency="USD", customer=None):
    """A customer whose wallet a paid top-up filled with `amount`."""
    customer = customer or commerce.customer()
    order = commerce.Order.create(
        customer=customer, operation="topup", status="paid", amount_minor=amount, currency=currency
    )
    with db.atomic():
        ledger.credit_topup(order, "yookassa")
    return customer


def purchase(customer, amount, currency="USD"):
    plan = commerce.Plan.get_or_none(commerce.Plan.code == "basic") or commerce.plan()
    return commerce.Order.create(customer=customer, plan=plan, amount_minor=amount, currency=currency)


def written():
    return LedgerTransaction.select().count(), LedgerEntry.select().count()


def test_post_refuses_entries_that_do_not_sum_to_zero_and_writes_nothing(database):
    customer = commerce.customer()
    with pytest.raises(LedgerRejected) as refused:
        with db.atomic():
            ledger.post("bonus", [Entry(PROMOTIONS, -100, "USD"), Entry(wallet(customer.id), 90, "USD")])
    assert refused.value.code == ledger.UNBALANCED
    with pytest.raises(LedgerRejected) as refused:
        with db.atomic():
            ledger.post("bonus", [Entry(PROMOTIONS, -100, "USD"), Entry(wallet(customer.id), 100, "XTR")])
    assert refused.value.code == ledger.UNBALANCED and "USD, XTR" in str(refused.value)
    assert written() == (0, 0)


def test_post_refuses_to_take_a_wallet_below_zero(database):
    customer = topped_up(300)
    with pytest.raises(LedgerRejected) as refused:
        with db.atomic():
            ledger.post("purchase", [Entry(wallet(customer.id), -301, "USD"), Entry(REVENUE, 301, "USD")])
    assert refused.value.code == ledger.INSUFFICIENT_FUNDS
    assert ledger.balance(customer.id, "USD") == 300
    assert written() == (1, 2)


def test_post_runs_only_inside_the_callers_transaction(database):
    customer = commerce.customer()
    with pytest.raises(RuntimeError):
        ledger.post("bonus", [Entry(PROMOTIONS, -5, "USD"), Entry(wallet(customer.id), 5, "USD")])
    assert written() == (0, 0)


def test_unknown_accounts_and_malformed_entries_are_refused(database):
    customer = commerce.customer()
    cases = [
        ([Entry("cash_drawer", -5, "USD"), Entry(REVENUE, 5, "USD")], ledger.UNKNOWN_ACCOUNT),
        ([Entry(provider_clearing("paypal"), -5, "USD"), Entry(REVENUE, 5, "USD")], ledger.UNKNOWN_ACCOUNT),
        ([Entry(wallet("no-such-customer"), 5, "USD"), Entry(PROMOTIONS, -5, "USD")], ledger.UNKNOWN_ACCOUNT),
        ([Entry(PROMOTIONS, -5.0, "USD"), Entry(wallet(customer.id), 5.0, "USD")], ledger.INVALID_ENTRY),
        ([Entry(PROMOTIONS, -5, "usd"), Entry(wallet(customer.id), 5, "usd")], ledger.INVALID_ENTRY),
        ([Entry(PROMOTIONS, 0, "USD"), Entry(REVENUE, 0, "USD")], ledger.INVALID_ENTRY),
        ([Entry(PROMOTIONS, -5, "USD", utcnow() + HOUR), Entry(REVENUE, 5, "USD")], ledger.INVALID_ENTRY),
    ]
    for entries, code in cases:
        with pytest.raises(LedgerRejected) as refused:
            with db.atomic():
                ledger.post("bonus", entries)
        assert refused.value.code == code, entries
    assert written() == (0, 0) and LedgerAccount.select().count() == 0


def test_balance_is_the_sum_of_entries_per_currency_and_history_pages_newest_first(database):
    customer = topped_up(1000)
    topped_up(70, currency="XTR", customer=customer)
    with db.atomic():
        ledger.charge_wallet(purchase(customer, 400))
    assert ledger.balance(customer.id, "USD") == 600
    assert ledger.balance(customer.id, "XTR") == 70
    assert ledger.balance(commerce.customer().id, "USD") == 0
    page = ledger.history(customer.id, limit=2)
    assert [(item.kind, item.amount_minor, item.currency) for item in page] == [
        ("purchase", -400, "USD"),
        ("topup", 70, "XTR"),
    ]
    rest = ledger.history(customer.id, limit=2, before=page[-1].entry_id)
    assert [(item.kind, item.amount_minor) for item in rest] == [("topup", 1000)]


def test_a_topup_is_credited_once_however_often_it_is_posted(database):
    customer = commerce.customer()
    order = commerce.Order.create(customer=customer, operation="topup", status="paid", amount_minor=500)
    with db.atomic():
        first = ledger.credit_topup(order, "cryptobot")
    with db.atomic():
        again = ledger.credit_topup(order, "cryptobot")
    assert again.id == first.id
    assert ledger.balance(customer.id, "USD") == 500
    assert written() == (1, 2)


def test_an_idempotency_key_used_for_another_transaction_is_refused(database):
    customer = topped_up(500)
    order = purchase(customer, 100)
    with pytest.raises(LedgerRejected) as refused:
        with db.atomic():
            ledger.post(
                "purchase",
                [Entry(wallet(customer.id), -100, "USD"), Entry(REVENUE, 100, "USD")],
                order=order,
                key=LedgerTransaction.get().idempotency_key,
            )
    assert refused.value.code == ledger.IDEMPOTENCY_KEY_REUSED
    assert ledger.balance(customer.id, "USD") == 500


def test_charge_wallet_refuses_insufficient_funds_and_writes_nothing(database):
    customer = topped_up(299)
    with pytest.raises(LedgerRejected) as refused:
        with db.atomic():
            ledger.charge_wallet(purchase(customer, 300))
    assert refused.value.code == ledger.INSUFFICIENT_FUNDS == "insufficient_funds"
    assert ledger.balance(customer.id, "USD") == 299 and written() == (1, 2)


def test_a_paid_order_at_a_provider_is_revenue_and_a_renewal_is_booked_as_one(database):
    customer = commerce.customer()
    with db.atomic():
        sale = ledger.record_sale(purchase(customer, 500), "yookassa")
    renewal = purchase(customer, 200)
    renewal.operation = "renewal"
    topped_up(200, customer=customer)
    with db.atomic():
        renewed = ledger.charge_wallet(renewal)
    assert (sale.kind, renewed.kind) == ("purchase", "renewal")
    revenue = LedgerAccount.get(LedgerAccount.name == REVENUE)
    assert sum(e.amount_minor for e in revenue.entries) == 700
    assert ledger.balance(customer.id, "USD") == 0


@pytest.mark.parametrize("isolation", ["atomic", "serializable"])
def test_concurrent_charges_on_one_wallet_never_overdraw(database, isolation):
    customer = topped_up(1000)
    orders = [purchase(customer, 300) for _ in range(8)]
    barrier = threading.Barrier(len(orders))
    charged, refused, errors = [], [], []

    def charge(order):
        try:
            barrier.wait()
            if isolation == "atomic":
                with db.atomic():
                    ledger.charge_wallet(order)
            else:
                retry_serializable(lambda: ledger.charge_wallet(order))
            charged.append(order.id)
        except LedgerRejected as error:
            refused.append(error.code)
        except Exception as error:  # surfaced below
            errors.append(error)
        finally:
            db.close()

    threads = [threading.Thread(target=charge, args=(order,)) for order in orders]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(charged) == 3 and refused == [ledger.INSUFFICIENT_FUNDS] * 5
    assert ledger.balance(customer.id, "USD") == 100


def test_spending_takes_the_earliest_expiring_bonus_first_and_its_rest_expires(database):
    customer = topped_up(1000)
    now = utcnow()
    with db.atomic():
        later = ledger.grant_bonus(customer.id, 200, "USD", now + 48 * HOUR)
        sooner = ledger.grant_bonus(customer.id, 100, "USD", now + 24 * HOUR)
    with db.atomic():
        ledger.charge_wallet(purchase(customer, 150))
    unspent = {
        e.transaction_id: e.unspent_minor for e in LedgerEntry.select().where(LedgerEntry.expires_at.is_null(False))
    }
    assert unspent == {sooner.id: 0, later.id: 150}
    # Two days pass: both bonuses are past their expiry.
    LedgerEntry.update(expires_at=now - HOUR).where(LedgerEntry.expires_at.is_null(False)).execute()
    assert ledger.expire_bonuses() == 1
    assert ledger.expire_bonuses() == 0
    expiration = LedgerTransaction.get(LedgerTransaction.kind == "expiration")
    assert sorted(e.amount_minor for e in expiration.entries) == [-150, 150]
    assert ledger.balance(customer.id, "USD") == 1000 + 300 - 150 - 150


def test_an_expired_bonus_cannot_be_spent_before_the_pass_takes_it_back(database):
    customer = commerce.customer()
    with db.atomic():
        ledger.grant_bonus(customer.id, 500, "USD", utcnow() - HOUR)
    assert ledger.balance(customer.id, "USD") == 500
    with pytest.raises(LedgerRejected) as refused:
        with db.atomic():
            ledger.charge_wallet(purchase(customer, 100))
    assert refused.value.code == ledger.INSUFFICIENT_FUNDS
    assert ledger.expire_bonuses() == 1 and ledger.balance(customer.id, "USD") == 0


def test_a_refunded_topup_takes_back_cash_before_bonus(database):
    customer = commerce.customer()
    order = commerce.Order.create(customer=customer, operation="topup", status="paid", amount_minor=1000)
    with db.atomic():
        topup = ledger.credit_topup(order, "yookassa")
        ledger.grant_bonus(customer.id, 200, "USD", utcnow() + HOUR)
    with db.atomic():
        ledger.reverse(topup, 1000, key=f"refund:{order.id}:1")
    bonus = LedgerEntry.get(LedgerEntry.expires_at.is_null(False))
    assert bonus.unspent_minor == 200 and ledger.balance(customer.id, "USD") == 200


def test_a_reversal_never_gives_back_more_than_the_original_moved(database):
    customer = topped_up(1000)
    order = purchase(customer, 600)
    with db.atomic():
        paid = ledger.charge_wallet(order)
    with db.atomic():
        ledger.reverse(paid, 400, key="refund:a")
    with db.atomic():
        assert ledger.reverse(paid, 400, key="refund:a").reverses_id == paid.id  # the same refund again
    with pytest.raises(LedgerRejected) as refused:
        with db.atomic():
            ledger.reverse(paid, 201, key="refund:b")
    assert refused.value.code == ledger.REVERSAL_EXCEEDS_ORIGINAL
    with db.atomic():
        ledger.reverse(paid, 200, key="refund:b")
    assert ledger.balance(customer.id, "USD") == 1000
    refund = LedgerTransaction.get(LedgerTransaction.idempotency_key == "refund:b")
    assert (refund.kind, refund.order_id) == ("refund", order.id)


def test_a_topup_already_spent_cannot_be_reversed_from_the_wallet(database):
    customer = commerce.customer()
    order = commerce.Order.create(customer=customer, operation="topup", status="paid", amount_minor=500)
    with db.atomic():
        topup = ledger.credit_topup(order, "yookassa")
    with db.atomic():
        ledger.charge_wallet(purchase(customer, 400))
    with pytest.raises(LedgerRejected) as refused:
        with db.atomic():
            ledger.reverse(topup, 500)
    assert refused.value.code == ledger.INSUFFICIENT_FUNDS
    assert ledger.balance(customer.id, "USD") == 100


def _hand_written(kind, legs):
    """A transaction written with SQL, past post(): one entry per (account, amount)."""
    transaction = LedgerTransaction.create(kind=kind)
    for account, amount in legs:
        LedgerEntry.insert(transaction=transaction, account=account, currency="USD", amount_minor=amount).execute()
    return transaction


def _accounts():
    customer = topped_up(10)
    with db.atomic():
        ledger.charge_wallet(purchase(customer, 10))
    return LedgerAccount.get(LedgerAccount.kind == "customer_wallet"), LedgerAccount.get(LedgerAccount.name == REVENUE)


def test_postgres_refuses_a_hand_written_unbalanced_transaction_at_commit(database):
    if not is_postgres():
        pytest.skip("the zero-sum trigger is PostgreSQL's; on SQLite post() and the invariant fixture keep the rule")
    wallet_account, revenue = _accounts()
    before = written()
    with pytest.raises(IntegrityError, match="does not sum to zero in USD"):
        with db.atomic():
            _hand_written("refund", [(revenue, -100), (wallet_account, 90)])
    assert written() == before
    with db.atomic():  # entries inserted one by one are checked together, at COMMIT
        _hand_written("refund", [(revenue, -100), (wallet_account, 60), (wallet_account, 40)])
    entry = LedgerEntry.select().order_by(LedgerEntry.id.desc()).get()
    with pytest.raises(IntegrityError, match="does not sum to zero"):
        with db.atomic():
            LedgerEntry.update(amount_minor=41).where(LedgerEntry.id == entry.id).execute()
    assert LedgerEntry.get_by_id(entry.id).amount_minor == 40


def test_the_invariant_check_reports_negative_wallets_and_unbalanced_transactions(database):
    wallet_account, revenue = _accounts()
    assert ledger_problems() == []
    with db.atomic():
        overdraft = _hand_written("purchase", [(wallet_account, -20), (revenue, 20)])
    assert ledger_problems() == [f"{wallet_account.name} holds -20 USD"]
    if not is_postgres():  # PostgreSQL would refuse this row at COMMIT (the test above)
        _hand_written("purchase", [(revenue, 5)])
        assert f"transaction {overdraft.id + 1} sums to 5 USD" in ledger_problems()
    LedgerEntry.delete().where(LedgerEntry.transaction >= overdraft.id).execute()  # leave the ledger whole
