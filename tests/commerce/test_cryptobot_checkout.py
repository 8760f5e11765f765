"""SPEC 13.4, 13.12: a retried CryptoBot checkout never makes a second invoice, though Crypto Pay keeps no
idempotency key.

The fake Crypto Pay (a real server) makes the invoice and loses the answer
(its `timeout` fault on createInvoice); the retry of the same checkout finds
that invoice among the app's active ones (getInvoices, newest first, a page at
a time) by the payload naming its intent, records it and sends the payer there.
"""

import pytest

from commerce.checkout import CheckoutRejected, checkout
from fakes.cryptobot import ROUTE_CREATE_INVOICE
from integrations.payments import PROVIDER_UNAVAILABLE
from integrations.payments import cryptobot as adapter
from models.commerce import Plan
from models.payments import PaymentIntent
from tests.support import commerce
from tests.support.shop import PUBLIC_URL, rub_plan

pytestmark = pytest.mark.usefixtures("ledger_invariant")


def buy(shop, buyer, key, currency="RUB"):
    plan = Plan.get_or_none(Plan.code == "monthly") or rub_plan()
    return checkout(shop.providers, PUBLIC_URL, buyer.id, "purchase", "cryptobot", currency, plan_id=plan.id, key=key)


def lost_create(shop, buyer, key):
    """A checkout whose createInvoice Crypto Pay applied and whose answer never came: the invoice it made."""
    shop.cryptobot.set_faults(timeout_rate=1.0, routes=[ROUTE_CREATE_INVOICE])
    with pytest.raises(CheckoutRejected) as rejected:
        buy(shop, buyer, key)
    shop.cryptobot.clear_faults()
    assert rejected.value.code == PROVIDER_UNAVAILABLE
    (made,) = shop.cryptobot.invoices()
    intent = PaymentIntent.get()
    assert (intent.status, intent.provider_payment_id) == ("created", None)
    return made


def test_a_create_whose_answer_was_lost_is_reused_by_the_retry_and_makes_one_invoice(shop):
    buyer = commerce.customer()
    made = lost_create(shop, buyer, key="lost")
    buy(shop, commerce.customer("Someone Else"), key="other")  # a newer invoice the retry must not take

    retried = buy(shop, buyer, key="lost")

    assert retried.confirmation_url == made["bot_invoice_url"]
    intent = PaymentIntent.get(PaymentIntent.order == retried.order_id)
    assert (intent.provider_payment_id, intent.status) == (str(made["invoice_id"]), "pending")
    mine = [invoice for invoice in shop.cryptobot.invoices() if invoice["payload"] == made["payload"]]
    assert len(mine) == 1 and len(shop.cryptobot.invoices()) == 2
    assert buy(shop, buyer, key="lost").confirmation_url == made["bot_invoice_url"]


def test_the_lost_invoice_is_found_pages_back_among_newer_ones(shop, monkeypatch):
    monkeypatch.setattr(adapter, "INVOICE_PAGE", 2)
    buyer = commerce.customer()
    made = lost_create(shop, buyer, key="lost")
    for number in range(5):
        buy(shop, commerce.customer(f"Buyer {number}"), key=f"newer-{number}")

    retried = buy(shop, buyer, key="lost")

    assert retried.confirmation_url == made["bot_invoice_url"]
    assert len(shop.cryptobot.invoices()) == 6


def test_a_retry_whose_create_never_reached_crypto_pay_creates_the_invoice(shop):
    buyer = commerce.customer()
    shop.cryptobot.set_faults(fail_rate=1.0, routes=[ROUTE_CREATE_INVOICE])
    with pytest.raises(CheckoutRejected):
        buy(shop, buyer, key="failed")
    shop.cryptobot.clear_faults()
    assert shop.cryptobot.invoices() == []

    retried = buy(shop, buyer, key="failed")

    (made,) = shop.cryptobot.invoices()
    assert retried.confirmation_url == made["bot_invoice_url"]


def test_the_fake_pages_and_filters_invoices_as_crypto_pay_does(shop):
    for number, currency in enumerate(("RUB", "USD", "RUB")):
        buy(shop, commerce.customer(f"Buyer {number}"), key=f"k{number}", currency=currency)
    provider = shop.providers["cryptobot"]
    page = provider._call(adapter.METHOD_GET_INVOICES, {"fiat": "RUB", "status": "active", "count": 1, "offset": 1})
    assert [item["invoice_id"] for item in page["items"]] == [1]
    assert provider._call(adapter.METHOD_GET_INVOICES, {"fiat": "USD"})["items"][0]["invoice_id"] == 2
    assert provider._call(adapter.METHOD_GET_INVOICES, {"asset": "TON"})["items"] == []
