"""SPEC 13.5, 13.7: what a provider says about a payment is applied to its order, and the poll
that payment_reconcile runs asks the provider (the fakes, real servers) when a webhook was lost."""

import pytest

from commerce import payments
from commerce.checkout import checkout
from commerce.payments import apply_payment, poll_intent
from integrations.payments import STATUS_SUCCEEDED, ProviderPayment
from models.commerce import Order
from models.ledger import LedgerTransaction
from models.ops import OperatorNotice
from models.payments import PaymentIntent
from tests.support import commerce
from tests.support.shop import PUBLIC_URL, rub_plan

pytestmark = pytest.mark.usefixtures("ledger_invariant")


def bought(shop, provider="yookassa", key="k"):
    result = checkout(
        shop.providers, PUBLIC_URL, commerce.customer().id, "purchase", provider, "RUB", plan_id=rub_plan().id, key=key
    )
    return result.order_id, PaymentIntent.get(PaymentIntent.order == result.order_id)


def test_the_poll_of_a_canceled_payment_cancels_the_intent_and_its_pending_order(shop):
    order_id, intent = bought(shop)
    shop.yookassa.cancel(intent.provider_payment_id)
    assert poll_intent(intent).outcome == payments.CANCELED
    assert PaymentIntent.get_by_id(intent.id).status == "canceled"
    order = Order.get_by_id(order_id)
    assert (order.status, order.expires_at) == ("cancelled", None)


def test_the_poll_of_an_expired_invoice_expires_the_intent_and_its_order(shop):
    order_id, intent = bought(shop, "cryptobot")
    shop.cryptobot.expire(intent.provider_payment_id)
    assert poll_intent(intent).outcome == payments.CANCELED
    assert PaymentIntent.get_by_id(intent.id).status == "expired"
    assert Order.get_by_id(order_id).status == "expired"


def test_the_poll_of_a_pending_payment_changes_nothing_but_when_it_was_polled(shop):
    order_id, intent = bought(shop)
    assert intent.last_polled_at is None
    assert poll_intent(intent).outcome == payments.PENDING
    polled = PaymentIntent.get_by_id(intent.id)
    assert (polled.status, polled.last_polled_at is not None) == ("pending", True)
    assert Order.get_by_id(order_id).status == "pending"


def test_a_poll_the_provider_cannot_answer_reports_its_code_and_settles_nothing(shop):
    order_id, intent = bought(shop)
    shop.yookassa.set_faults(webhook_lost_rate=1.0)
    shop.yookassa.succeed(intent.provider_payment_id)
    shop.yookassa.set_faults(fail_rate=1.0)
    assert poll_intent(intent).outcome == "provider_http_500"
    assert Order.get_by_id(order_id).status == "pending"
    assert PaymentIntent.get_by_id(intent.id).last_polled_at is not None
    shop.yookassa.clear_faults()
    assert poll_intent(intent).outcome == payments.SETTLED


def test_what_cannot_be_polled_is_said_so(shop):
    _, intent = bought(shop)
    PaymentIntent.update(provider_payment_id=None, status="created").where(PaymentIntent.id == intent.id).execute()
    assert poll_intent(PaymentIntent.get_by_id(intent.id)).outcome == payments.NOT_CREATED
    PaymentIntent.update(provider="stars", provider_payment_id="charge").where(PaymentIntent.id == intent.id).execute()
    assert poll_intent(PaymentIntent.get_by_id(intent.id)).outcome == payments.NOT_POLLABLE


def paid(order, payment_id, amount=None):
    return ProviderPayment(
        provider="cryptobot",
        payment_id=payment_id,
        status=STATUS_SUCCEEDED,
        provider_status="paid",
        amount_minor=order.amount_minor if amount is None else amount,
        currency=order.currency,
        order_id=order.id,
    )


def test_a_payment_whose_creation_answer_was_lost_finds_the_intent_waiting_for_it(shop):
    order_id, intent = bought(shop, "cryptobot")
    PaymentIntent.update(provider_payment_id=None).where(PaymentIntent.id == intent.id).execute()
    applied = apply_payment(paid(Order.get_by_id(order_id), "8800"), "provider_webhook")
    assert (applied.outcome, applied.intent_id) == (payments.SETTLED, intent.id)
    assert PaymentIntent.get_by_id(intent.id).provider_payment_id == "8800" and PaymentIntent.select().count() == 1


def test_a_second_payment_for_a_settled_order_is_recorded_and_noticed_never_booked(shop):
    order_id, intent = bought(shop, "cryptobot")
    order = Order.get_by_id(order_id)
    assert apply_payment(paid(order, intent.provider_payment_id), "provider_webhook").outcome == payments.SETTLED
    second = apply_payment(paid(order, "9999"), "provider_webhook")
    assert second.outcome == payments.UNAPPLIED
    assert PaymentIntent.get(PaymentIntent.provider_payment_id == "9999").status == "succeeded"
    assert LedgerTransaction.select().count() == 1
    assert [n.kind for n in OperatorNotice.select().where(OperatorNotice.kind.startswith("payment_"))] == [
        payments.NOTICE_PAYMENT_UNAPPLIED
    ]
