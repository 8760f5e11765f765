"""SPEC 13.2, 13.12: an amount no way of paying can take is refused with a 4xx before anything is written.

A top-up has a maximum per currency (APP_TOPUP_MAX_MINOR); each provider states
the largest payment it takes (YooKassa: what its SDK keeps exactly; Stars:
Telegram's limit on one invoice). Checkout checks both before the order, its
payment intent or a call to the provider exist, so a retry of the same request
is refused the same way and the provider never hears of it.
"""

import pytest

from commerce.catalogue import set_plan_price
from commerce.checkout import (
    AMOUNT_ABOVE_PROVIDER_MAXIMUM,
    TOPUP_ABOVE_MAXIMUM,
    TOPUP_CURRENCY_UNSUPPORTED,
    CheckoutRejected,
    checkout,
)
from config.settings import TOPUP_MAX_MINOR, ConfigError, load_settings
from integrations.payments.stars import INVOICE_MAX_AMOUNT as STARS_MAX
from integrations.payments.yookassa import MAX_AMOUNT_MINOR as YOOKASSA_MAX
from models.commerce import Order
from models.payments import PaymentIntent
from tests.support import commerce
from tests.support.shop import PUBLIC_URL, rub_plan

pytestmark = pytest.mark.usefixtures("ledger_invariant")

NO_TOPUP_LIMIT = {"RUB": 2**63 - 1, "XTR": 2**63 - 1}


def written(shop):
    return Order.select().count(), PaymentIntent.select().count(), len(shop.yookassa.payments())


def refused(shop, *args, **kwargs):
    with pytest.raises(CheckoutRejected) as rejected:
        checkout(shop.providers, PUBLIC_URL, *args, **kwargs)
    return rejected.value.code


def test_a_huge_topup_is_refused_with_a_4xx_writes_nothing_and_its_retry_is_refused_alike(shop):
    buyer = commerce.customer()
    body = dict(customerId=buyer.id, kind="topup", provider="yookassa", currency="RUB", requestId="huge")
    for amount in (10**15, TOPUP_MAX_MINOR["RUB"] + 1, 2**63 - 1):
        for _ in range(2):
            answer = shop.checkout(**body, amountMinor=amount)
            assert (answer.status_code, answer.json()["code"]) == (422, TOPUP_ABOVE_MAXIMUM), answer.text
            assert written(shop) == (0, 0, 0)
    allowed = shop.checkout(**body, amountMinor=TOPUP_MAX_MINOR["RUB"])
    assert allowed.status_code == 200 and allowed.json()["confirmationUrl"], allowed.text


def test_a_topup_in_a_currency_without_a_configured_maximum_is_refused(shop):
    code = refused(shop, commerce.customer().id, "topup", "yookassa", "EUR", amount_minor=100, topup_max={"RUB": 1})
    assert code == TOPUP_CURRENCY_UNSUPPORTED
    assert written(shop) == (0, 0, 0)


@pytest.mark.parametrize(
    ("method", "currency", "limit"), [("yookassa", "RUB", YOOKASSA_MAX), ("stars", "XTR", STARS_MAX)]
)
def test_a_topup_above_what_its_provider_takes_is_refused_before_anything_is_written(shop, method, currency, limit):
    buyer = commerce.customer()
    for key in ("first", "first", "second"):
        code = refused(
            shop, buyer.id, "topup", method, currency, amount_minor=limit + 1, key=key, topup_max=NO_TOPUP_LIMIT
        )
        assert code == AMOUNT_ABOVE_PROVIDER_MAXIMUM
        assert written(shop) == (0, 0, 0)
    made = checkout(
        shop.providers,
        PUBLIC_URL,
        buyer.id,
        "topup",
        method,
        currency,
        amount_minor=limit,
        key="at-limit",
        topup_max=NO_TOPUP_LIMIT,
    )
    assert made.amount_minor == limit


def test_a_plan_priced_above_what_the_provider_takes_is_refused_and_its_order_not_kept(shop):
    plan = rub_plan()
    set_plan_price(plan, "RUB", YOOKASSA_MAX + 1)
    code = refused(shop, commerce.customer().id, "purchase", "yookassa", "RUB", plan_id=plan.id, key="k")
    assert code == AMOUNT_ABOVE_PROVIDER_MAXIMUM
    assert written(shop) == (0, 0, 0)


def test_the_topup_maximum_is_a_setting_per_currency_with_defaults_and_a_bad_one_stops_the_start():
    assert load_settings({}).topup_max_minor == {"RUB": 10_000_000, "USD": 100_000, "XTR": 10_000}
    assert load_settings({"APP_TOPUP_MAX_MINOR": "EUR:5000, RUB:100"}).topup_max_minor == {"EUR": 5000, "RUB": 100}
    for bad in ("RUB", "RUB:-1", "RUB:0", "rub:100", "RUB:1e3", f"RUB:{2**63}", "RUB:1,RUB:2"):
        with pytest.raises(ConfigError) as error:
            load_settings({"APP_TOPUP_MAX_MINOR": bad})
        assert error.value.variable == "APP_TOPUP_MAX_MINOR"
