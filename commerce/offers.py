"""Personal offers (SPEC 13.11): a discount for one customer, with an expiry, made by an operator.

An offer takes a percentage (1–100) or an amount in one currency off an
order's catalogue price (commerce/orders.py `discounted`, never below zero),
for one plan or any, until `expires_at`. The operator makes it from the
customer's page in the back office (web/backoffice_codes.py, audited). The
bot's buy flow applies the customer's best usable offer to the order it
creates (`best_for`), and checkout takes an `offerId`; either way
create_order checks the offer again and prices the order with it. Settlement
marks the offer `used` by that order, in the paying transaction
(commerce/settlement.py), so no later order can use it; `lifecycle_sweep`
expires offers past their date. Two orders made with the same offer before
either is paid both keep their price (the first one paid marks it used).
"""

import datetime

from commerce.catalogue import CatalogueError, checked_currency, plan_prices
from commerce.orders import DISCOUNTABLE_KINDS, discounted
from models.base import utcnow
from models.catalogue import PersonalOffer

MAX_VALID_DAYS = 365
MAX_DISCOUNT_MINOR = 10**12

INVALID_DISCOUNT = "invalid_discount"
INVALID_VALIDITY = "invalid_validity"


class OfferRejected(ValueError):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


def _whole(value, low, high):
    return not isinstance(value, bool) and isinstance(value, int) and low <= value <= high


def create_offer(customer, valid_days, plan=None, discount_percent=None, discount_minor=None, currency=None):
    """A new active offer for `customer`; OfferRejected (nothing written) for a bad discount or expiry."""
    if (discount_percent is None) == (discount_minor is None):
        raise OfferRejected(INVALID_DISCOUNT, "give discountPercent or discountMinor with its currency, not both")
    if discount_percent is not None:
        if not _whole(discount_percent, 1, 100) or currency is not None:
            raise OfferRejected(INVALID_DISCOUNT, "discountPercent is a whole number from 1 to 100, without currency")
    else:
        if not _whole(discount_minor, 1, MAX_DISCOUNT_MINOR):
            raise OfferRejected(INVALID_DISCOUNT, "discountMinor is a positive whole number of minor units")
        try:
            checked_currency(currency)
        except CatalogueError:
            raise OfferRejected(INVALID_DISCOUNT, "discountMinor needs its currency (e.g. RUB, XTR)") from None
        if plan is not None and currency not in plan_prices(plan):
            raise OfferRejected(INVALID_DISCOUNT, f"plan {plan.id} is not priced in {currency}")
    if not _whole(valid_days, 1, MAX_VALID_DAYS):
        raise OfferRejected(INVALID_VALIDITY, f"validDays is a whole number from 1 to {MAX_VALID_DAYS}")
    return PersonalOffer.create(
        customer=customer,
        plan=plan,
        discount_percent=discount_percent,
        discount_minor=discount_minor,
        currency=currency,
        status="active",
        expires_at=utcnow().replace(microsecond=0) + datetime.timedelta(days=valid_days),
    )


def usable(customer_id, now=None):
    """The customer's active offers not yet expired, soonest expiry first."""
    return list(
        PersonalOffer.select()
        .where(
            PersonalOffer.customer == customer_id,
            PersonalOffer.status == "active",
            PersonalOffer.expires_at > (now or utcnow()),
        )
        .order_by(PersonalOffer.expires_at, PersonalOffer.id)
    )


def best_for(customer_id, kind, plan, currency, now=None):
    """The usable offer that takes most off `plan` in `currency` for an order of `kind`, or None."""
    if kind not in DISCOUNTABLE_KINDS or plan is None:
        return None
    price = plan_prices(plan).get(currency)
    if price is None:
        return None
    fitting = [
        offer
        for offer in usable(customer_id, now)
        if offer.plan_id in (None, plan.id) and offer.currency in (None, currency)
    ]
    return min(fitting, key=lambda offer: discounted(price, offer), default=None)
