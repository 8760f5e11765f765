"""SPEC 13.2, 13.4, 13.12: POST /v1/checkout creates an order and what pays it, over real HTTP;
every refusal is a 4xx (or 503 in maintenance) with a code and writes nothing."""

import json

import pytest
import requests

from commerce import ledger
from commerce.settlement import settle_order
from models.commerce import Customer, Order, Subscription
from models.fulfillment import Entitlement
from models.ledger import LedgerTransaction
from models.ops import OutboxEvent
from models.payments import PaymentIntent
from tests.support import commerce
from tests.support.shop import OPERATOR_TOKEN, addon, rub_plan, settle_deliveries
from tests.web.conftest import serving

pytestmark = pytest.mark.usefixtures("ledger_invariant")


def written():
    return (
        Order.select().count(),
        PaymentIntent.select().count(),
        LedgerTransaction.select().count(),
        OutboxEvent.select().count(),
    )


def purchase(shop, customer, plan, provider, currency="RUB", **extra):
    return shop.checkout(
        customerId=customer.id,
        kind="purchase",
        provider=provider,
        currency=currency,
        planId=plan.id,
        requestId="req-1",
        **extra,
    )


def topped_up(shop, customer, amount):
    answer = shop.checkout(
        customerId=customer.id, kind="topup", provider="cryptobot", currency="RUB", amountMinor=amount, requestId="t"
    )
    assert answer.status_code == 200, answer.text
    invoice = PaymentIntent.get(PaymentIntent.order == answer.json()["orderId"]).provider_payment_id
    shop.cryptobot.pay(invoice)
    assert settle_deliveries() == ["settled"]
    return answer.json()["orderId"]


def test_a_topup_through_a_provider_credits_the_wallet_with_wallet_credited(shop):
    customer = commerce.customer()
    order_id = topped_up(shop, customer, 30000)
    assert ledger.balance(customer.id, "RUB") == 30000
    assert Order.get_by_id(order_id).status == "fulfilled" and Entitlement.select().count() == 0
    event = OutboxEvent.get()
    assert event.topic == "wallet.credited" and json.loads(event.payload)["amountMinor"] == 30000


def test_a_wallet_purchase_with_funds_is_paid_at_once(shop):
    customer, plan = commerce.customer(), rub_plan()
    topped_up(shop, customer, 20000)
    answer = purchase(shop, customer, plan, "wallet")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert (body["orderStatus"], body["confirmationUrl"], body["invoice"]) == ("paid", None, None)
    assert ledger.balance(customer.id, "RUB") == 100
    assert purchase(shop, customer, plan, "wallet").json() == body  # the same request again
    assert ledger.balance(customer.id, "RUB") == 100


def test_a_wallet_purchase_without_funds_is_refused_and_keeps_no_order(shop):
    customer, plan = commerce.customer(), rub_plan()
    topped_up(shop, customer, 19899)
    before = written()
    answer = purchase(shop, customer, plan, "wallet")
    assert (answer.status_code, answer.json()["code"]) == (422, "insufficient_funds")
    assert written() == before and ledger.balance(customer.id, "RUB") == 19899


def test_a_stars_checkout_answers_the_invoice_for_the_bot(shop):
    customer, plan = commerce.customer(), rub_plan()
    answer = purchase(shop, customer, plan, "stars", currency="XTR")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["invoice"] == {
        "title": plan.name,
        "description": f"{plan.name}, order {body['orderId']}",
        "payload": f"order:{body['orderId']}",
        "currency": "XTR",
        "amount": 250,
    }
    assert body["orderStatus"] == "pending" and PaymentIntent.select().count() == 0


def test_a_free_trial_is_settled_at_once_and_moves_no_money(shop):
    customer = commerce.customer()
    trial = commerce.priced_plan("trial", prices={"RUB": 0}, trial=True)
    answer = shop.checkout(
        customerId=customer.id, kind="trial", provider="yookassa", currency="RUB", planId=trial.id, requestId="t"
    )
    assert (answer.status_code, answer.json()["orderStatus"]) == (200, "paid")
    assert Order.get().settled_by == "trial" and LedgerTransaction.select().count() == 0
    assert shop.yookassa.payments() == []


@pytest.mark.parametrize(
    "change, status, code",
    [
        ({"customerId": "no-such-customer"}, 404, "customer_not_found"),
        ({"blocked": True}, 403, "customer_blocked"),
        ({"planId": 999999}, 404, "plan_not_found"),
        ({"currency": "EUR"}, 422, "plan_not_priced"),
        ({"currency": "rub"}, 400, "invalid_currency"),
        ({"provider": "paypal"}, 400, "unknown_payment_method"),
        ({"provider": "stars"}, 422, "provider_currency_unsupported"),
        ({"kind": "refund"}, 400, "invalid_order_kind"),
        ({"amountMinor": 5}, 400, "unexpected_field"),
        ({"requestId": ""}, 400, "invalid_body"),
        ({"planId": True}, 400, "invalid_body"),
        ({"planId": 2**70}, 400, "invalid_body"),
        ({"customerId": "a\x00b"}, 400, "invalid_body"),
        ({"colour": "red"}, 400, "invalid_body"),
    ],
)
def test_bad_checkouts_are_refused_with_a_code_and_write_nothing(shop, change, status, code):
    customer, plan = commerce.customer(), rub_plan()
    change = dict(change)  # the same parameters run on both databases
    if change.pop("blocked", False):
        Customer.update(blocked=True).where(Customer.id == customer.id).execute()
    body = {
        "customerId": customer.id,
        "kind": "purchase",
        "provider": "yookassa",
        "currency": "RUB",
        "planId": plan.id,
        "requestId": "r",
        **change,
    }
    answer = shop.checkout(**body)
    assert (answer.status_code, answer.json()["code"]) == (status, code)
    assert answer.headers["Content-Type"].startswith("application/problem+json")
    assert written() == (0, 0, 0, 0) and shop.yookassa.payments() == []


def test_an_addon_for_a_subscription_with_no_period_is_a_409(shop):
    customer = commerce.customer()
    subscription = Subscription.create(customer=customer, slot=1)
    answer = shop.checkout(
        customerId=customer.id,
        kind="addon",
        provider="yookassa",
        currency="RUB",
        addonId=addon().id,
        subscriptionId=subscription.id,
        requestId="a",
    )
    assert (answer.status_code, answer.json()["code"]) == (409, "no_current_entitlement")
    assert written() == (0, 0, 0, 0)


def test_an_addon_is_bought_for_a_provisioned_subscription(shop):
    customer, plan = commerce.customer(), rub_plan()
    first = settle_order(commerce.order(customer, plan).id, "provider_webhook")
    subscription = Entitlement.get_by_id(first.entitlement_id).subscription_id
    answer = shop.checkout(
        customerId=customer.id,
        kind="addon",
        provider="cryptobot",
        currency="RUB",
        addonId=addon().id,
        subscriptionId=subscription,
        requestId="a",
    )
    assert answer.status_code == 200, answer.text
    shop.cryptobot.pay(PaymentIntent.get(PaymentIntent.order == answer.json()["orderId"]).provider_payment_id)
    assert settle_deliveries() == ["settled"]
    assert Order.get_by_id(answer.json()["orderId"]).status == "paid"
    assert [e.topic for e in OutboxEvent.select().order_by(OutboxEvent.id)] == ["order.paid", "addon.purchased"]


def test_checkout_needs_the_operator_token(shop):
    answer = requests.post(shop.web + "/v1/checkout", json={}, timeout=10)
    assert (answer.status_code, answer.json()["code"]) == (401, "unauthorized")


def test_a_provider_the_shop_has_not_configured_is_refused_and_writes_nothing(database, ledger_invariant):
    customer, plan = commerce.customer(), rub_plan()
    with serving() as web:
        answer = requests.post(
            web + "/v1/checkout",
            headers={"Authorization": f"Bearer {OPERATOR_TOKEN}"},
            json={
                "customerId": customer.id,
                "kind": "purchase",
                "provider": "cryptobot",
                "currency": "RUB",
                "planId": plan.id,
                "requestId": "r",
            },
            timeout=10,
        )
    assert (answer.status_code, answer.json()["code"]) == (422, "provider_not_configured")
    assert written() == (0, 0, 0, 0)


def test_the_payer_comes_back_to_a_page_of_the_shop(shop):
    answer = requests.get(shop.web + "/checkout/return", timeout=10)
    assert answer.status_code == 200 and answer.headers["Content-Type"].startswith("text/html")
