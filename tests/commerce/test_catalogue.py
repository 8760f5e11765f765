"""SPEC 13.1, 13.9: prices per currency in integer minor units, what is on sale, the unused part of a period."""

import pytest

from commerce import catalogue
from commerce.catalogue import CatalogueError
from models.catalogue import Addon, PlanPrice
from models.commerce import Plan
from tests.support import commerce


def test_a_plan_has_its_own_price_in_each_currency(database):
    plan = commerce.priced_plan(prices={"RUB": 29900, "USD": 399, "XTR": 150})
    assert catalogue.plan_price(plan, "RUB") == 29900
    assert catalogue.plan_price(plan.id, "XTR") == 150
    assert catalogue.plan_prices(plan) == {"RUB": 29900, "USD": 399, "XTR": 150}
    with pytest.raises(CatalogueError) as refused:
        catalogue.plan_price(plan, "EUR")
    assert refused.value.code == catalogue.PLAN_NOT_PRICED


def test_setting_a_price_again_replaces_it_and_bad_prices_are_refused(database):
    plan = commerce.priced_plan(prices={"USD": 399})
    catalogue.set_plan_price(plan, "USD", 499)
    assert catalogue.plan_price(plan, "USD") == 499 and PlanPrice.select().count() == 1
    for currency, amount, code in [
        ("USD", 4.99, catalogue.INVALID_PRICE),
        ("USD", -1, catalogue.INVALID_PRICE),
        ("usd", 499, catalogue.INVALID_CURRENCY),
        ("DOLLAR", 499, catalogue.INVALID_CURRENCY),
    ]:
        with pytest.raises(CatalogueError) as refused:
            catalogue.set_plan_price(plan, currency, amount)
        assert refused.value.code == code
    assert catalogue.plan_prices(plan) == {"USD": 499}


def test_active_plans_are_those_on_sale_in_the_currency_cheapest_first(database):
    commerce.priced_plan("dear", prices={"USD": 900, "XTR": 400})
    cheap = commerce.priced_plan("cheap", prices={"USD": 300})
    retired = commerce.priced_plan("retired", prices={"USD": 100})
    Plan.update(active=False).where(Plan.id == retired.id).execute()
    trial = commerce.priced_plan("trial", prices={"USD": 0}, trial=True)
    assert [p.code for p in catalogue.active_plans("USD")] == ["cheap", "dear"]
    assert [p.code for p in catalogue.active_plans("XTR")] == ["dear"]
    assert [p.code for p in catalogue.active_plans()] == ["dear", "cheap"]
    assert [p.id for p in catalogue.active_plans(trial=True)] == [trial.id]
    with pytest.raises(CatalogueError) as refused:
        catalogue.purchasable_plan(retired.id)
    assert refused.value.code == catalogue.PLAN_INACTIVE
    assert catalogue.purchasable_plan(cheap.id).id == cheap.id


def test_addons_are_priced_per_currency_and_listed_when_active(database):
    traffic = Addon.create(code="traffic-50", name="+50 GB", extra_traffic_bytes=50 * commerce.GIB)
    devices = Addon.create(code="devices-2", name="+2 devices", extra_devices=2)
    catalogue.set_addon_price(traffic, "USD", 199)
    catalogue.set_addon_price(devices, "USD", 99)
    catalogue.set_addon_price(devices, "XTR", 50)
    assert [a.code for a in catalogue.active_addons("USD")] == ["devices-2", "traffic-50"]
    assert [a.code for a in catalogue.active_addons("XTR")] == ["devices-2"]
    assert catalogue.addon_price(traffic, "USD") == 199
    with pytest.raises(CatalogueError) as refused:
        catalogue.addon_price(traffic, "XTR")
    assert refused.value.code == catalogue.ADDON_NOT_PRICED


def test_the_unused_part_of_a_period_is_worth_its_seconds_rounded_down(database):
    plan = commerce.priced_plan(prices={"USD": 1000}, days=30)
    period = 30 * 86400
    assert catalogue.unused_value(plan, "USD", period) == 1000
    assert catalogue.unused_value(plan, "USD", period // 2) == 500
    assert catalogue.unused_value(plan, "USD", period // 3 + 1) == 333  # 333.33… rounds down
    assert catalogue.unused_value(plan, "USD", 2591) == 0  # under one minor unit's worth
    assert catalogue.unused_value(plan, "USD", -60) == 0
    assert catalogue.unused_value(plan, "USD", 2 * period) == 1000
