"""SPEC 13.11: a gift card is used once, an access code up to its limit and once per customer, a
trial once per customer; each activation settles a free order through settlement in one transaction."""

import datetime
import threading

import pytest

from commerce import codes
from commerce.activations import (
    CODE_ALREADY_USED,
    CODE_EXPIRED,
    CODE_USED_UP,
    INVALID_CODE,
    ActivationRejected,
    activate_access_code,
    activate_gift_card,
)
from commerce.orders import OrderRejected, create_order
from commerce.settlement import settle_order
from models.base import db, utcnow
from models.catalogue import AccessCode, AccessCodeActivation, GiftCard
from models.commerce import Customer, Order
from models.fulfillment import FulfillmentOperation
from models.ledger import LedgerTransaction
from tests.support import commerce

pytestmark = pytest.mark.usefixtures("ledger_invariant")

LATER = datetime.timedelta(days=30)


def rejected(call, *args):
    with pytest.raises(ActivationRejected) as refused:
        call(*args)
    return refused.value.code


def test_a_gift_card_gives_its_plan_once_under_its_own_key_and_moves_no_money(database):
    plan = commerce.limited_plan()
    card, code = codes.issue_gift_card(plan, utcnow() + LATER)
    alice, bob = commerce.customer("Alice"), commerce.customer("Bob")

    activation = activate_gift_card(alice.id, code.lower().replace("-", " "))  # typed loosely

    order = Order.get_by_id(activation.order_id)
    assert (order.operation, order.amount_minor, order.settled_by, order.status) == ("gift", 0, "gift", "paid")
    create = FulfillmentOperation.get_by_id(activation.operation_id)
    assert create.idempotency_key == f"gift:{order.id}:fulfill"
    redeemed = GiftCard.get_by_id(card.id)
    assert (redeemed.status, redeemed.redeemed_by_id, redeemed.redemption_order_id) == ("redeemed", alice.id, order.id)
    assert rejected(activate_gift_card, bob.id, code) == CODE_USED_UP
    assert rejected(activate_gift_card, alice.id, code) == CODE_USED_UP
    assert Order.select().count() == 1
    assert LedgerTransaction.select().count() == 0


def test_an_expired_or_unknown_gift_card_activates_nothing(database):
    plan = commerce.limited_plan()
    _, code = codes.issue_gift_card(plan, utcnow() - datetime.timedelta(seconds=1))
    alice = commerce.customer()
    assert rejected(activate_gift_card, alice.id, code) == CODE_EXPIRED
    assert rejected(activate_gift_card, alice.id, "NOPE-NOPE-NOPE-NOPE") == INVALID_CODE
    assert (Order.select().count(), FulfillmentOperation.select().count()) == (0, 0)


def test_an_access_code_activates_up_to_its_limit_and_once_per_customer(database):
    plan = commerce.limited_plan()
    row, code = codes.issue_access_code(plan, max_activations=2, code="SPRING2027")
    alice, bob, carol = (commerce.customer(name) for name in ("Alice", "Bob", "Carol"))

    first = activate_access_code(alice.id, "spring2027")
    assert rejected(activate_access_code, alice.id, code) == CODE_ALREADY_USED
    activate_access_code(bob.id, code)
    assert rejected(activate_access_code, carol.id, code) == CODE_USED_UP

    assert AccessCode.get_by_id(row.id).activation_count == 2
    assert AccessCodeActivation.select().count() == 2
    create = FulfillmentOperation.get_by_id(first.operation_id)
    assert create.idempotency_key == f"code:{first.order_id}:fulfill"
    assert Order.select().where(Order.customer == carol.id).count() == 0


def test_an_inactive_or_expired_access_code_and_a_blocked_customer_activate_nothing(database):
    plan = commerce.limited_plan()
    _, expired = codes.issue_access_code(plan, 5, expires_at=utcnow() - datetime.timedelta(seconds=1))
    off, switched_off = codes.issue_access_code(plan, 5)
    AccessCode.update(active=False).where(AccessCode.id == off.id).execute()
    _, fine = codes.issue_access_code(plan, 5)
    alice = commerce.customer()
    assert rejected(activate_access_code, alice.id, expired) == CODE_EXPIRED
    assert rejected(activate_access_code, alice.id, switched_off) == CODE_EXPIRED
    Customer.update(blocked=True).where(Customer.id == alice.id).execute()
    assert rejected(activate_access_code, alice.id, fine) == "customer_blocked"
    assert Order.select().count() == 0


def test_a_customer_gets_one_trial(database):
    trial = commerce.priced_plan("trial", prices={"USD": 0}, trial=True)
    alice = commerce.customer()
    order = create_order(alice.id, "trial", "USD", plan_id=trial.id)
    settle_order(order.id, "trial")
    with pytest.raises(OrderRejected) as refused:
        create_order(alice.id, "trial", "USD", plan_id=trial.id)
    assert refused.value.code == "trial_already_used"


def concurrently(activate, customers, code):
    """Every customer activates `code` at once, each in a thread of its own; (activated, refused codes, errors)."""
    barrier = threading.Barrier(len(customers))
    activated, refused, errors = [], [], []

    def one(customer):
        try:
            barrier.wait()
            activated.append(activate(customer.id, code).order_id)
        except ActivationRejected as rejected:
            refused.append(rejected.code)
        except Exception as error:  # surfaced by the caller's assertion
            errors.append(error)
        finally:
            db.close()

    threads = [threading.Thread(target=one, args=(customer,)) for customer in customers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return activated, refused, errors


def test_a_gift_card_redeemed_by_eight_customers_at_once_is_redeemed_once(database):
    _, code = codes.issue_gift_card(commerce.limited_plan(), utcnow() + LATER)
    customers = [commerce.customer(f"C{i}") for i in range(8)]

    activated, refused, errors = concurrently(activate_gift_card, customers, code)

    assert errors == []
    assert len(activated) == 1 and refused == [CODE_USED_UP] * 7
    assert (Order.select().count(), FulfillmentOperation.select().count()) == (1, 1)


def test_an_access_code_activated_by_eight_customers_at_once_stops_at_its_limit(database):
    row, code = codes.issue_access_code(commerce.limited_plan(), max_activations=3)
    customers = [commerce.customer(f"C{i}") for i in range(8)]

    activated, refused, errors = concurrently(activate_access_code, customers, code)

    assert errors == []
    assert len(activated) == 3 and refused == [CODE_USED_UP] * 5
    assert AccessCode.get_by_id(row.id).activation_count == 3 == AccessCodeActivation.select().count()
