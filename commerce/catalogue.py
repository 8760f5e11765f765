"""The catalogue (SPEC 13.1): what is for sale, at which price in which currency.

Prices are integer minor units per currency (`XTR` for Telegram Stars); a
plan or add-on without a price in a currency is not for sale in it. A plan's
legacy `price_minor`/`currency` columns are not read here: `plan_prices` is
the catalogue (migration 0011 copied them over).
"""

import re

from models.base import db
from models.catalogue import Addon, AddonPrice, PlanPrice
from models.commerce import Plan

STARS = "XTR"
SECONDS_PER_DAY = 86400

PLAN_NOT_FOUND = "plan_not_found"
PLAN_INACTIVE = "plan_inactive"
PLAN_NOT_PRICED = "plan_not_priced"
ADDON_NOT_FOUND = "addon_not_found"
ADDON_INACTIVE = "addon_inactive"
ADDON_NOT_PRICED = "addon_not_priced"
INVALID_CURRENCY = "invalid_currency"
INVALID_PRICE = "invalid_price"

_CURRENCY = re.compile(r"[A-Z]{3}")


class CatalogueError(ValueError):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


def is_currency(code):
    """Three capital letters: an ISO 4217 code, or XTR."""
    return isinstance(code, str) and _CURRENCY.fullmatch(code) is not None


def checked_currency(currency):
    """The currency code if it is one (is_currency), else CatalogueError."""
    if not is_currency(currency):
        raise CatalogueError(INVALID_CURRENCY, "a currency is three capital letters, e.g. RUB, USD or XTR")
    return currency


def plan_price(plan, currency):
    """A plan's price in minor units of `currency`; CatalogueError if it has none there."""
    row = PlanPrice.get_or_none(PlanPrice.plan == plan, PlanPrice.currency == checked_currency(currency))
    if row is None:
        raise CatalogueError(PLAN_NOT_PRICED, f"plan {_id(plan)} has no price in {currency}")
    return row.amount_minor


def addon_price(addon, currency):
    row = AddonPrice.get_or_none(AddonPrice.addon == addon, AddonPrice.currency == checked_currency(currency))
    if row is None:
        raise CatalogueError(ADDON_NOT_PRICED, f"add-on {_id(addon)} has no price in {currency}")
    return row.amount_minor


def plan_prices(plan):
    """{currency: amount_minor} of one plan."""
    return {row.currency: row.amount_minor for row in PlanPrice.select().where(PlanPrice.plan == plan)}


def active_plans(currency=None, trial=False):
    """Active plans (the trial plans when `trial`), priced in `currency` if one is given, cheapest first."""
    query = Plan.select().where(Plan.active, Plan.trial == trial)
    if currency is None:
        return list(query.order_by(Plan.id))
    query = query.join(PlanPrice).where(PlanPrice.currency == checked_currency(currency))
    return list(query.order_by(PlanPrice.amount_minor, Plan.id))


def active_addons(currency=None):
    query = Addon.select().where(Addon.active)
    if currency is None:
        return list(query.order_by(Addon.id))
    query = query.join(AddonPrice).where(AddonPrice.currency == checked_currency(currency))
    return list(query.order_by(AddonPrice.amount_minor, Addon.id))


def purchasable_plan(plan_id):
    """The plan, if it exists and is on sale; CatalogueError otherwise."""
    plan = Plan.get_or_none(Plan.id == plan_id)
    if plan is None:
        raise CatalogueError(PLAN_NOT_FOUND, f"plan {plan_id} does not exist")
    if not plan.active:
        raise CatalogueError(PLAN_INACTIVE, f"plan {plan_id} is not on sale")
    return plan


def purchasable_addon(addon_id):
    addon = Addon.get_or_none(Addon.id == addon_id)
    if addon is None:
        raise CatalogueError(ADDON_NOT_FOUND, f"add-on {addon_id} does not exist")
    if not addon.active:
        raise CatalogueError(ADDON_INACTIVE, f"add-on {addon_id} is not on sale")
    return addon


def set_plan_price(plan, currency, amount_minor):
    """Put a plan on sale in a currency at a price (replacing an earlier price there)."""
    _set_price(PlanPrice, PlanPrice.plan, plan, currency, amount_minor)


def set_addon_price(addon, currency, amount_minor):
    _set_price(AddonPrice, AddonPrice.addon, addon, currency, amount_minor)


def unused_value(plan, currency, remaining_seconds):
    """What the rest of a period is worth (SPEC 13.9): remaining seconds × the
    plan's price per second in `currency`, rounded down to a whole minor unit."""
    seconds = plan.duration_days * SECONDS_PER_DAY
    remaining = min(max(int(remaining_seconds), 0), seconds)
    return remaining * plan_price(plan, currency) // seconds


def _set_price(model, owner_field, owner, currency, amount_minor):
    if isinstance(amount_minor, bool) or not isinstance(amount_minor, int) or amount_minor < 0:
        raise CatalogueError(INVALID_PRICE, "a price is a whole, non-negative number of minor units")
    checked_currency(currency)
    with db.atomic():
        updated = model.update(amount_minor=amount_minor).where(owner_field == owner, model.currency == currency)
        if not updated.execute():
            model.create(**{owner_field.name: owner, "currency": currency, "amount_minor": amount_minor})


def _id(record):
    return getattr(record, "id", record)
