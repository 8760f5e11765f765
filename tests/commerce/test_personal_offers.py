"""SPEC 13.11: a personal offer is a discount for one customer with an expiry. A bad one is refused
with its code and writes nothing; the best usable offer fits the plan, the currency and the date;
the order paid with it uses it up, in the paying transaction, so no second order can."""

import datetime

import pytest

from commerce import offers
from commerce.orders import OFFER_NOT_APPLICABLE, OrderRejected, create_order
from commerce.settlement import settle_order
from models.base import utcnow
from models.catalogue import PersonalOffer
from tests.support import commerce


@pytest.mark.parametrize(
    ("changes", "code"),
    [
        ({}, offers.INVALID_DISCOUNT),  # neither a percentage nor an amount
        ({"discount_percent": 10, "discount_minor": 100, "currency": "USD"}, offers.INVALID_DISCOUNT),
        ({"discount_percent": 0}, offers.INVALID_DISCOUNT),
        ({"discount_percent": 101}, offers.INVALID_DISCOUNT),
        ({"discount_percent": True}, offers.INVALID_DISCOUNT),
        ({"discount_percent": 10, "currency": "USD"}, offers.INVALID_DISCOUNT),
        ({"discount_minor": -5, "currency": "USD"}, offers.INVALID_DISCOUNT),
        ({"discount_minor": 100}, offers.INVALID_DISCOUNT),  # an amount without its currency
        ({"discount_minor": 100, "currency": "usd"}, offers.INVALID_DISCOUNT),
        ({"discount_percent": 10, "valid_days": 0}, offers.INVALID_VALIDITY),
        ({"discount_percent": 10, "valid_days": 366}, offers.INVALID_VALIDITY),
        ({"discount_percent": 10, "valid_days": "7"}, offers.INVALID_VALIDITY),
    ],
)
def test_a_bad_offer_is_refused_with_its_code_before_anything_is_written(changes, code):
    arguments = {"valid_days": 7, **changes}
    with pytest.raises(offers.OfferRejected) as refused:
        offers.create_offer(None, arguments.pop("valid_days"), **arguments)
    assert refused.value.code == code


def test_the_best_usable_offer_fits_plan_currency_and_date_and_the_paid_order_uses_it_up(database):
    buyer = commerce.customer()
    plan = commerce.priced_plan(prices={"USD": 1000, "XTR": 250})
    other = commerce.priced_plan("other", prices={"USD": 1000})
    assert offers.best_for(buyer.id, "purchase", plan, "USD") is None
    ten = offers.create_offer(buyer, 7, discount_percent=10)
    three_dollars = offers.create_offer(buyer, 7, plan, discount_minor=300, currency="USD")
    offers.create_offer(buyer, 7, other, discount_percent=90)  # another plan's
    stars = offers.create_offer(buyer, 7, discount_minor=200, currency="XTR")  # another currency's
    late = offers.create_offer(buyer, 7, discount_percent=80)
    gone = utcnow() - datetime.timedelta(seconds=1)
    PersonalOffer.update(expires_at=gone).where(PersonalOffer.id == late.id).execute()
    assert offers.best_for(buyer.id, "purchase", plan, "USD").id == three_dollars.id  # 700 beats 900
    assert offers.best_for(buyer.id, "purchase", plan, "XTR").id == stars.id  # 200 XTR off beats 10 %
    assert offers.best_for(buyer.id, "topup", plan, "USD") is None  # a top-up takes no discount
    with pytest.raises(offers.OfferRejected):
        offers.create_offer(buyer, 7, other, discount_minor=100, currency="XTR")  # not priced in XTR

    order = create_order(buyer.id, "purchase", "USD", plan_id=plan.id, provider="yookassa", offer_id=three_dollars.id)
    assert order.amount_minor == 700
    settle_order(order.id, "provider_webhook", provider="yookassa")
    used = PersonalOffer.get_by_id(three_dollars.id)
    assert (used.status, used.used_order_id) == ("used", order.id) and used.used_at is not None
    with pytest.raises(OrderRejected) as refused:
        create_order(buyer.id, "purchase", "USD", plan_id=plan.id, provider="yookassa", offer_id=three_dollars.id)
    assert refused.value.code == OFFER_NOT_APPLICABLE
    assert offers.best_for(buyer.id, "purchase", plan, "USD").id == ten.id
