"""SPEC 13.2, 13.11: a pending order is validated and priced from the catalogue,
a refusal writes nothing, one trial per customer, idempotency keys are promises."""

import datetime
import threading

import pytest
from peewee import IntegrityError

from commerce import orders
from commerce.catalogue import set_addon_price
from commerce.orders import OrderRejected, create_order
from models.base import db, utcnow
from models.catalogue import Addon, PersonalOffer, TrialActivation
from models.commerce import Customer, Order, Subscription
from tests.support import commerce


def refused(code, *args, **kwargs):
    before = Order.select().count()
    with pytest.raises(OrderRejected) as error:
        create_order(*args, **kwargs)
    assert error.value.code == code
    assert Order.select().count() == before


def subscription_of(customer):
    return Subscription.create(customer=customer, slot=1)


def test_a_purchase_is_pending_priced_from_the_catalogue_and_due_in_30_minutes(database):
    customer, plan = commerce.customer(), commerce.priced_plan()
    order = create_order(customer.id, "purchase", "XTR", plan_id=plan.id, provider="stars")
    assert (order.status, order.operation, order.amount_minor, order.currency) == ("pending", "purchase", 250, "XTR")
    assert order.provider == "stars" and order.refunded_amount_minor == 0
    assert order.expires_at - order.created_at == datetime.timedelta(minutes=30)


def test_orders_a_customer_cannot_place_are_refused_and_nothing_is_written(database):
    customer, plan = commerce.customer(), commerce.priced_plan(prices={"USD": 500})
    blocked = Customer.create(display_name="Mallory", blocked=True, blocked_reason="chargebacks")
    refused(orders.CUSTOMER_NOT_FOUND, "no-such-customer", "purchase", "USD", plan_id=plan.id)
    refused(orders.CUSTOMER_BLOCKED, blocked.id, "purchase", "USD", plan_id=plan.id)
    refused(orders.INVALID_ORDER_KIND, customer.id, "code", "USD", plan_id=plan.id)
    refused("invalid_currency", customer.id, "purchase", "usd", plan_id=plan.id)
    refused("plan_not_priced", customer.id, "purchase", "RUB", plan_id=plan.id)
    refused("plan_not_found", customer.id, "purchase", "USD", plan_id=999999)
    refused(orders.UNKNOWN_PROVIDER, customer.id, "purchase", "USD", plan_id=plan.id, provider="paypal")
    refused(orders.PROVIDER_CURRENCY_MISMATCH, customer.id, "purchase", "USD", plan_id=plan.id, provider="stars")
    refused(orders.UNEXPECTED_FIELD, customer.id, "purchase", "USD", plan_id=plan.id, amount_minor=1)
    refused(orders.SUBSCRIPTION_REQUIRED, customer.id, "renewal", "USD", plan_id=plan.id)
    other = subscription_of(commerce.customer("Bob"))
    refused(orders.SUBSCRIPTION_NOT_FOUND, customer.id, "renewal", "USD", plan_id=plan.id, subscription_id=other.id)


def test_a_topup_names_its_amount_and_buys_nothing_else(database):
    customer = commerce.customer()
    order = create_order(customer.id, "topup", "RUB", amount_minor=100000, provider="yookassa")
    assert (order.plan_id, order.addon_id, order.amount_minor) == (None, None, 100000)
    refused(orders.INVALID_AMOUNT, customer.id, "topup", "RUB", amount_minor=0)
    refused(orders.INVALID_AMOUNT, customer.id, "topup", "RUB", amount_minor=12.5)
    refused(orders.UNEXPECTED_FIELD, customer.id, "topup", "RUB", amount_minor=100, plan_id=1)


def test_an_addon_applies_to_one_of_the_customers_subscriptions(database):
    customer = commerce.customer()
    subscription = subscription_of(customer)
    addon = Addon.create(code="devices-2", name="+2 devices", extra_devices=2)
    set_addon_price(addon, "USD", 99)
    order = create_order(customer.id, "addon", "USD", addon_id=addon.id, subscription_id=subscription.id)
    assert (order.addon_id, order.plan_id, order.subscription_id, order.amount_minor) == (
        addon.id,
        None,
        subscription.id,
        99,
    )
    refused(orders.SUBSCRIPTION_REQUIRED, customer.id, "addon", "USD", addon_id=addon.id)
    refused("addon_not_priced", customer.id, "addon", "XTR", addon_id=addon.id, subscription_id=subscription.id)
    Addon.update(active=False).execute()
    refused("addon_inactive", customer.id, "addon", "USD", addon_id=addon.id, subscription_id=subscription.id)


def test_the_database_refuses_an_order_without_a_plan_unless_it_is_a_topup_or_addon(database):
    customer = commerce.customer()
    with pytest.raises(IntegrityError):
        with db.atomic():
            Order.create(customer=customer, operation="purchase", amount_minor=500)
    with pytest.raises(IntegrityError):
        with db.atomic():
            Order.create(customer=customer, operation="topup", amount_minor=500, refunded_amount_minor=501)
    assert Order.select().count() == 0


def test_a_trial_is_free_and_one_per_customer(database):
    customer = commerce.customer()
    trial = commerce.priced_plan("trial", prices={"USD": 300}, trial=True)
    paid = commerce.priced_plan("paid")
    order = create_order(customer.id, "trial", "USD", plan_id=trial.id)
    assert order.amount_minor == 0
    refused(orders.NOT_A_TRIAL_PLAN, customer.id, "trial", "USD", plan_id=paid.id)
    refused(orders.TRIAL_PLAN_NOT_FOR_SALE, customer.id, "purchase", "USD", plan_id=trial.id)
    TrialActivation.create(customer=customer, plan=trial, order=order)
    refused(orders.TRIAL_ALREADY_USED, customer.id, "trial", "USD", plan_id=trial.id)
    # Two settlements racing past that check: the unique constraint refuses the second trial.
    second = Order.create(customer=customer, plan=trial, operation="trial", amount_minor=0)
    with pytest.raises(IntegrityError):
        with db.atomic():
            TrialActivation.create(customer=customer, plan=trial, order=second)
    assert TrialActivation.select().count() == 1


def test_a_personal_offer_discounts_only_its_customers_orders_while_it_is_open(database):
    customer, other = commerce.customer(), commerce.customer("Bob")
    plan = commerce.priced_plan(prices={"USD": 999, "RUB": 50000})
    later = utcnow() + datetime.timedelta(days=1)
    percent = PersonalOffer.create(customer=customer, discount_percent=15, expires_at=later)
    amount = PersonalOffer.create(customer=customer, discount_minor=2000, currency="RUB", expires_at=later)
    assert create_order(customer.id, "purchase", "USD", plan_id=plan.id, offer_id=percent.id).amount_minor == 850
    assert create_order(customer.id, "purchase", "RUB", plan_id=plan.id, offer_id=amount.id).amount_minor == 48000
    refused(orders.OFFER_NOT_APPLICABLE, customer.id, "purchase", "USD", plan_id=plan.id, offer_id=amount.id)
    refused(orders.OFFER_NOT_APPLICABLE, other.id, "purchase", "USD", plan_id=plan.id, offer_id=percent.id)
    refused(orders.OFFER_NOT_APPLICABLE, customer.id, "topup", "RUB", amount_minor=100, offer_id=amount.id)
    PersonalOffer.update(expires_at=utcnow() - datetime.timedelta(seconds=1)).execute()
    refused(orders.OFFER_NOT_APPLICABLE, customer.id, "purchase", "USD", plan_id=plan.id, offer_id=percent.id)


def test_an_idempotency_key_returns_its_order_and_refuses_another_request(database):
    customer, plan = commerce.customer(), commerce.priced_plan()
    subscription = subscription_of(customer)
    key = f"renewal:{subscription.id}:2027-01-01T00:00:00"
    first = create_order(customer.id, "renewal", "USD", plan_id=plan.id, subscription_id=subscription.id, key=key)
    again = create_order(customer.id, "renewal", "USD", plan_id=plan.id, subscription_id=subscription.id, key=key)
    assert again.id == first.id
    other = {"plan_id": plan.id, "subscription_id": subscription.id, "key": key}
    refused(orders.IDEMPOTENCY_KEY_REUSED, customer.id, "renewal", "XTR", **other)


def test_concurrent_orders_with_one_key_make_one_order(database):
    customer, plan = commerce.customer(), commerce.priced_plan()
    subscription = subscription_of(customer)
    rounds, threads_per_round = 10, 6
    made, errors = [], []

    def renew(barrier, key):
        try:
            barrier.wait()
            order = create_order(
                customer.id, "renewal", "USD", plan_id=plan.id, subscription_id=subscription.id, key=key
            )
            made.append((key, order.id))
        except Exception as error:  # surfaced below
            errors.append(error)
        finally:
            db.close()

    for round_ in range(rounds):
        barrier = threading.Barrier(threads_per_round)
        threads = [
            threading.Thread(target=renew, args=(barrier, f"renewal:{round_}")) for _ in range(threads_per_round)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert errors == []
    assert len(set(made)) == rounds and Order.select().count() == rounds
