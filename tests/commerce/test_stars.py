"""SPEC 13.4, 13.12, 14.5: the bot's Stars entry points. A pre-checkout is answered from the order,
its price and the maintenance switch; a successful payment settles in the caller's transaction,
keyed by its telegram_payment_charge_id, so a replayed update never pays twice."""

import datetime

import pytest

from commerce import payments
from commerce.orders import create_order
from commerce.stars import (
    AMOUNT_MISMATCH,
    CURRENCY_MISMATCH,
    MAINTENANCE_ACTIVE,
    NOT_A_STARS_ORDER,
    ORDER_NOT_FOUND,
    ORDER_NOT_PENDING,
    StarsRejected,
    invoice_payload,
    order_of,
    precheck_stars,
    settle_stars_payment,
)
from models.base import db, utcnow
from models.commerce import Order
from models.fulfillment import Entitlement
from models.jobs import Job
from models.ledger import LedgerEntry, LedgerTransaction
from models.ops import OperatorNotice
from models.payments import PaymentIntent
from ops import maintenance
from tests.support import commerce
from tests.support.shop import rub_plan

pytestmark = pytest.mark.usefixtures("ledger_invariant")

CHARGE = "stxAbC123_telegram-payment-charge"


def stars_order(customer=None):
    return create_order(
        (customer or commerce.customer()).id, "purchase", "XTR", plan_id=rub_plan().id, provider="stars"
    )


def test_precheck_is_ok_only_for_a_pending_stars_order_at_its_price_outside_maintenance(database):
    order = stars_order()
    assert precheck_stars(order.id, 250).ok
    assert precheck_stars(order.id, 249).code == AMOUNT_MISMATCH
    assert precheck_stars(order.id, 250, currency="USD").code == CURRENCY_MISMATCH
    assert precheck_stars(999999, 250).code == ORDER_NOT_FOUND
    rub = create_order(commerce.customer().id, "purchase", "RUB", plan_id=order.plan_id, provider="yookassa")
    assert precheck_stars(rub.id, rub.amount_minor).code == NOT_A_STARS_ORDER
    maintenance.set_mode(True, "upgrade", actor="test")
    assert precheck_stars(order.id, 250).code == MAINTENANCE_ACTIVE
    maintenance.set_mode(False, "done", actor="test")
    Order.update(expires_at=utcnow() - datetime.timedelta(seconds=1)).where(Order.id == order.id).execute()
    assert precheck_stars(order.id, 250).code == ORDER_NOT_PENDING
    Order.update(status="expired", expires_at=None).where(Order.id == order.id).execute()
    assert precheck_stars(order.id, 250).code == ORDER_NOT_PENDING


def test_a_stars_payment_replayed_three_times_pays_once(database):
    order = stars_order()
    results = []
    for _ in range(3):
        with db.atomic():  # the bot's update transaction
            results.append(settle_stars_payment(order.id, CHARGE, 250))
    assert [r.outcome for r in results] == [payments.SETTLED, payments.REPLAYED, payments.REPLAYED]
    assert len({r.settlement.operation_id for r in results}) == 1
    assert LedgerTransaction.select().count() == 1 and Job.select().count() == 1
    intent = PaymentIntent.get()
    assert (intent.provider, intent.provider_payment_id, intent.status) == ("stars", CHARGE, "succeeded")
    rows = LedgerEntry.select().join(LedgerTransaction).where(LedgerTransaction.order == order.id)
    assert sorted((e.account.name, e.amount_minor, e.currency) for e in rows) == [
        ("provider_clearing:stars", -250, "XTR"),
        ("revenue", 250, "XTR"),
    ]
    assert Order.get_by_id(order.id).settled_by == "stars"


def test_a_stars_settlement_commits_with_the_callers_transaction_or_not_at_all(database):
    order = stars_order()
    with pytest.raises(RuntimeError):
        with db.atomic():
            settle_stars_payment(order.id, CHARGE, 250)
            raise RuntimeError("recording the update failed")
    assert Order.get_by_id(order.id).status == "pending"
    assert (PaymentIntent.select().count(), LedgerTransaction.select().count(), Entitlement.select().count()) == (
        0,
        0,
        0,
    )


def test_a_stars_payment_at_another_price_settles_nothing_and_raises_one_notice(database):
    order = stars_order()
    for _ in range(2):
        with db.atomic():
            assert settle_stars_payment(order.id, CHARGE, 1).outcome == payments.AMOUNT_MISMATCH
    assert Order.get_by_id(order.id).status == "pending" and LedgerTransaction.select().count() == 0
    assert [n.kind for n in OperatorNotice.select()] == [payments.NOTICE_PAYMENT_MISMATCH]


def test_a_second_charge_for_a_settled_order_is_not_applied_and_is_noticed(database):
    order = stars_order()
    with db.atomic():
        settle_stars_payment(order.id, CHARGE, 250)
    with db.atomic():
        assert settle_stars_payment(order.id, CHARGE + "-2", 250).outcome == payments.UNAPPLIED
    assert LedgerTransaction.select().count() == 1
    assert OperatorNotice.select().where(OperatorNotice.kind == payments.NOTICE_PAYMENT_UNAPPLIED).count() == 1


def test_a_stars_payment_needs_a_charge_id_and_a_whole_amount(database):
    order = stars_order()
    for charge, amount in (("", 250), (None, 250), ("x" * 256, 250), (CHARGE, 0), (CHARGE, 2.5), (CHARGE, True)):
        with pytest.raises(StarsRejected):
            settle_stars_payment(order.id, charge, amount)
    assert PaymentIntent.select().count() == 0


def test_the_invoice_payload_names_the_order(database):
    assert order_of(invoice_payload(42)) == 42
    for payload in ("order:", "order:x", "42", None, "order:٣", "order:" + "9" * 19):
        assert order_of(payload) is None
