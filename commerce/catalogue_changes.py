"""Operators change the catalogue (SPEC 13.1): create and edit plans and add-ons, put them on or off sale.

Each change is checked whole before anything is written, and is written with
its audit event in one transaction: a refused change writes nothing. What
would break a sale is refused: a plan that is not a trial needs a price in at
least one currency, an add-on always does; every price is a positive whole
number of minor units of a known currency (integrations/payments/amounts.py);
a period is at least one day.

A price change touches `plan_prices`/`addon_prices` only. An order keeps the
amount it was created with (orders.amount_minor): checkout, the hosted
payment, the Stars invoice and the webhook that settles it all read the
order, never the catalogue, so an order placed before a change is paid (and
refunded) at its own price. A plan is never deleted, only taken off sale:
orders, subscriptions, gift cards and codes keep pointing at it, and a
subscription on it keeps its period.
"""

import json
import re
import uuid

from peewee import IntegrityError

from integrations.payments.amounts import EXPONENTS
from models.base import db
from models.catalogue import Addon, AddonPrice, PlanPrice
from models.commerce import Plan
from models.transactions import locked
from ops.records import record_audit

CATEGORY = "payments"
GIB = 1 << 30
MAX_DAYS = 3650
MAX_GRACE_HOURS = 720
MAX_LIMIT = 1_000_000  # GiB or devices
MAX_MINOR = 10**15
MAX_SQUADS = 50

INVALID_CODE = "invalid_code"
INVALID_NAME = "invalid_name"
INVALID_DURATION = "invalid_duration"
INVALID_PRICES = "invalid_prices"
INVALID_LIMIT = "invalid_limit"
INVALID_SQUADS = "invalid_squads"
INVALID_GRACE = "invalid_grace"
INVALID_FLAG = "invalid_flag"
UNKNOWN_FIELD = "unknown_field"
NO_PRICE = "no_price"
NO_EXTRA = "no_extra"
CODE_TAKEN = "code_taken"
PLAN_NOT_FOUND = "plan_not_found"
ADDON_NOT_FOUND = "addon_not_found"

_CODE = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")

PLAN_FIELDS = ("code", "name", "durationDays", "prices", "trafficGb", "deviceLimit", "squads", "graceHours",
               "trial", "active")  # fmt: skip
ADDON_FIELDS = ("code", "name", "prices", "extraTrafficGb", "extraDevices", "active")


class CatalogueChangeRejected(ValueError):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


def plan_view(plan, prices=None):
    """A plan as the panel shows it: limits in GiB and devices, None meaning unlimited."""
    traffic = plan.traffic_allowance_bytes
    return {
        "id": plan.id,
        "code": plan.code,
        "name": plan.name,
        "durationDays": plan.duration_days,
        "prices": _prices_of(PlanPrice, PlanPrice.plan, plan) if prices is None else prices,
        "trafficBytes": traffic,
        "trafficGb": None if traffic is None else traffic // GIB,
        "deviceLimit": plan.device_limit,
        "squads": plan.squads,
        "graceHours": plan.grace_period_hours,
        "trial": plan.trial,
        "active": plan.active,
    }


def addon_view(addon, prices=None):
    return {
        "id": addon.id,
        "code": addon.code,
        "name": addon.name,
        "prices": _prices_of(AddonPrice, AddonPrice.addon, addon) if prices is None else prices,
        "extraTrafficBytes": addon.extra_traffic_bytes,
        "extraTrafficGb": addon.extra_traffic_bytes // GIB,
        "extraDevices": addon.extra_devices,
        "active": addon.active,
    }


def create_plan(values, reason, actor):
    """A new plan from the panel's fields; CatalogueChangeRejected (nothing written) if it could not be sold."""
    wanted = _plan_values(values, None)
    with db.atomic():
        try:
            with db.atomic():
                plan = Plan.create(**_plan_columns(wanted))
        except IntegrityError:
            raise _code_taken(wanted["code"]) from None
        _replace_prices(PlanPrice, PlanPrice.plan, plan, wanted["prices"])
        after = plan_view(plan, wanted["prices"])
        record_audit(CATEGORY, "catalogue.plan.created", actor, reason, "plan", plan.id, {"after": after})
    return after


def change_plan(plan_id, values, reason, actor):
    """Edit a plan: the fields given replace the plan's (`prices` replaces every price); audited with
    the values before and after. Only `active` changed is audited as the plan put on or taken off sale."""
    with db.atomic():
        plan = locked(Plan.select().where(Plan.id == plan_id)).get_or_none()
        if plan is None:
            raise CatalogueChangeRejected(PLAN_NOT_FOUND, f"plan {plan_id} does not exist")
        before = plan_view(plan)
        wanted = _plan_values(values, before)
        for column, value in _plan_columns(wanted).items():
            setattr(plan, column, value)
        try:
            with db.atomic():
                plan.save()
        except IntegrityError:
            raise _code_taken(wanted["code"]) from None
        _replace_prices(PlanPrice, PlanPrice.plan, plan, wanted["prices"])
        after = plan_view(plan, wanted["prices"])
        record_audit(CATEGORY, _action("plan", before, after), actor, reason, "plan", plan.id,
                     {"before": before, "after": after})  # fmt: skip
    return after


def create_addon(values, reason, actor):
    wanted = _addon_values(values, None)
    with db.atomic():
        try:
            with db.atomic():
                addon = Addon.create(**_addon_columns(wanted))
        except IntegrityError:
            raise _code_taken(wanted["code"]) from None
        _replace_prices(AddonPrice, AddonPrice.addon, addon, wanted["prices"])
        after = addon_view(addon, wanted["prices"])
        record_audit(CATEGORY, "catalogue.addon.created", actor, reason, "addon", addon.id, {"after": after})
    return after


def change_addon(addon_id, values, reason, actor):
    with db.atomic():
        addon = locked(Addon.select().where(Addon.id == addon_id)).get_or_none()
        if addon is None:
            raise CatalogueChangeRejected(ADDON_NOT_FOUND, f"add-on {addon_id} does not exist")
        before = addon_view(addon)
        wanted = _addon_values(values, before)
        for column, value in _addon_columns(wanted).items():
            setattr(addon, column, value)
        try:
            with db.atomic():
                addon.save()
        except IntegrityError:
            raise _code_taken(wanted["code"]) from None
        _replace_prices(AddonPrice, AddonPrice.addon, addon, wanted["prices"])
        after = addon_view(addon, wanted["prices"])
        record_audit(CATEGORY, _action("addon", before, after), actor, reason, "addon", addon.id,
                     {"before": before, "after": after})  # fmt: skip
    return after


def plans_with_prices():
    """Every plan (on sale first, then by id) as plan_view, prices read in one query."""
    prices = {}
    for row in PlanPrice.select().order_by(PlanPrice.currency):
        prices.setdefault(row.plan_id, {})[row.currency] = row.amount_minor
    plans = Plan.select().order_by(Plan.active.desc(), Plan.id)
    return [plan_view(plan, prices.get(plan.id, {})) for plan in plans]


def addons_with_prices():
    prices = {}
    for row in AddonPrice.select().order_by(AddonPrice.currency):
        prices.setdefault(row.addon_id, {})[row.currency] = row.amount_minor
    addons = Addon.select().order_by(Addon.active.desc(), Addon.id)
    return [addon_view(addon, prices.get(addon.id, {})) for addon in addons]


# -- checking --------------------------------------------------------------------------------


def _plan_values(values, before):
    _known(values, PLAN_FIELDS)
    defaults = {
        "trafficGb": None,
        "deviceLimit": None,
        "squads": [],
        "graceHours": 0,
        "trial": False,
        "active": True,
        "prices": {},
    }
    checked = _checker(values, before, defaults)
    days, grace = f"a plan lasts a whole number of days, 1 to {MAX_DAYS}", f"grace is 0 to {MAX_GRACE_HOURS} hours"
    wanted = {
        "code": checked("code", _code),
        "name": checked("name", _name),
        "durationDays": checked("durationDays", lambda v: _whole(v, 1, MAX_DAYS, INVALID_DURATION, days)),
        "trafficGb": checked("trafficGb", lambda v: _limit(v, "traffic")),
        "deviceLimit": checked("deviceLimit", lambda v: _limit(v, "device limit")),
        "squads": checked("squads", _squads),
        "graceHours": checked("graceHours", lambda v: _whole(v, 0, MAX_GRACE_HOURS, INVALID_GRACE, grace)),
        "trial": checked("trial", lambda v: _flag(v, "trial")),
        "active": checked("active", lambda v: _flag(v, "active")),
        "prices": checked("prices", _prices),
    }
    if not wanted["trial"] and not wanted["prices"]:
        raise CatalogueChangeRejected(NO_PRICE, "a plan for sale needs a price in at least one currency")
    if before is not None and wanted["trafficGb"] == before["trafficGb"]:
        wanted["trafficBytes"] = before["trafficBytes"]  # kept exactly, even if not whole GiB
    return wanted


def _checker(values, before, defaults):
    """check(field, check) → the field's value: what the change gives, else what the record has (or the
    default of a new one). A value the change gives is checked unless it is the record's own already, so a
    form sent back whole does not trip over what an earlier version let in (e.g. an older code's dot)."""

    def check(field, checked):
        if field not in values:
            if before is not None:
                return before[field]
            if field not in defaults:
                return checked(None)  # required: refused with the field's own words
            return defaults[field]
        if before is not None and values[field] == before[field]:
            return before[field]
        return checked(values[field])

    return check


def _plan_columns(wanted):
    first = sorted(wanted["prices"].items())[:1] or [("USD", 0)]
    traffic = wanted.get("trafficBytes", None if wanted["trafficGb"] is None else wanted["trafficGb"] * GIB)
    return {
        "code": wanted["code"],
        "name": wanted["name"],
        "duration_days": wanted["durationDays"],
        "traffic_allowance_bytes": traffic,
        "device_limit": wanted["deviceLimit"],
        "squad_ids": json.dumps(wanted["squads"]),
        "grace_period_hours": wanted["graceHours"],
        "price_minor": first[0][1],
        "currency": first[0][0],
        "active": wanted["active"],
        "trial": wanted["trial"],
    }


def _addon_values(values, before):
    _known(values, ADDON_FIELDS)
    checked = _checker(values, before, {"extraTrafficGb": 0, "extraDevices": 0, "active": True, "prices": {}})
    wanted = {
        "code": checked("code", _code),
        "name": checked("name", _name),
        "extraTrafficGb": checked(
            "extraTrafficGb", lambda v: _whole(v, 0, MAX_LIMIT, INVALID_LIMIT, "extra traffic is a whole number of GiB")
        ),
        "extraDevices": checked(
            "extraDevices",
            lambda v: _whole(v, 0, MAX_LIMIT, INVALID_LIMIT, "extra devices are a whole number, 0 or more"),
        ),
        "active": checked("active", lambda v: _flag(v, "active")),
        "prices": checked("prices", _prices),
    }
    if not wanted["prices"]:
        raise CatalogueChangeRejected(NO_PRICE, "an add-on needs a price in at least one currency")
    if before is not None and wanted["extraTrafficGb"] == before["extraTrafficGb"]:
        wanted["extraTrafficBytes"] = before["extraTrafficBytes"]
    if not wanted.get("extraTrafficBytes", wanted["extraTrafficGb"]) and not wanted["extraDevices"]:
        raise CatalogueChangeRejected(NO_EXTRA, "an add-on adds traffic, devices or both")
    return wanted


def _addon_columns(wanted):
    return {
        "code": wanted["code"],
        "name": wanted["name"],
        "extra_traffic_bytes": wanted.get("extraTrafficBytes", wanted["extraTrafficGb"] * GIB),
        "extra_devices": wanted["extraDevices"],
        "active": wanted["active"],
    }


def _known(values, fields):
    if not isinstance(values, dict):
        raise CatalogueChangeRejected(UNKNOWN_FIELD, "the change is a JSON object of fields")
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise CatalogueChangeRejected(UNKNOWN_FIELD, f"unknown field {unknown[0][:40]!r}; known: {', '.join(fields)}")


def _code(value):
    if not isinstance(value, str) or not _CODE.fullmatch(value):
        raise CatalogueChangeRejected(INVALID_CODE, "a code is 1 to 64 small letters, digits, - or _, e.g. monthly")
    return value


def _name(value):
    if not isinstance(value, str) or not value.strip() or len(value) > 100 or not value.isprintable():
        raise CatalogueChangeRejected(INVALID_NAME, "a name is some text on one line, at most 100 characters")
    return value.strip()


def _whole(value, low, high, code, message):
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise CatalogueChangeRejected(code, message)
    return value


def _limit(value, what):
    """A positive whole number, or None: unlimited."""
    if value is None:
        return None
    return _whole(value, 1, MAX_LIMIT, INVALID_LIMIT, f"the {what} is a whole number of at least 1, or unlimited")


def _flag(value, what):
    if not isinstance(value, bool):
        raise CatalogueChangeRejected(INVALID_FLAG, f"{what} is true or false")
    return value


def _squads(value):
    if not isinstance(value, list) or len(value) > MAX_SQUADS:
        raise CatalogueChangeRejected(INVALID_SQUADS, f"squads are a list of at most {MAX_SQUADS} squad UUIDs")
    squads = []
    for item in value:
        try:
            squads.append(str(uuid.UUID(item)))
        except (TypeError, ValueError, AttributeError):
            raise CatalogueChangeRejected(INVALID_SQUADS, "a squad is named by its UUID") from None
    return sorted(set(squads))


def _prices(value):
    if not isinstance(value, dict):
        raise CatalogueChangeRejected(INVALID_PRICES, "prices are an object of currency: minor units")
    for currency, amount in value.items():
        if currency not in EXPONENTS:
            raise CatalogueChangeRejected(INVALID_PRICES, f"{currency[:10]!r} is not a currency this shop knows")
        if isinstance(amount, bool) or not isinstance(amount, int) or not 0 < amount < MAX_MINOR:
            raise CatalogueChangeRejected(
                INVALID_PRICES, f"the price in {currency} is not a positive whole number of minor units"
            )
    return dict(sorted(value.items()))


def _replace_prices(model, owner_field, owner, prices):
    model.delete().where(owner_field == owner, model.currency.not_in(list(prices) or [""])).execute()
    for currency, amount in prices.items():
        updated = model.update(amount_minor=amount).where(owner_field == owner, model.currency == currency)
        if not updated.execute():
            model.create(**{owner_field.name: owner, "currency": currency, "amount_minor": amount})


def _prices_of(model, owner_field, owner):
    rows = model.select().where(owner_field == owner).order_by(model.currency)
    return {row.currency: row.amount_minor for row in rows}


def _action(kind, before, after):
    if {**before, "active": after["active"]} == after and before["active"] != after["active"]:
        return f"catalogue.{kind}.{'activated' if after['active'] else 'deactivated'}"
    return f"catalogue.{kind}.changed"


def _code_taken(code):
    return CatalogueChangeRejected(CODE_TAKEN, f"the code {code} is taken: codes name one plan or add-on each")
