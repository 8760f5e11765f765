"""SPEC 13.1, 13.14: an operator creates, edits and takes plans and add-ons off sale from the panel, each change
audited with its reason; what would break a sale is refused with words and writes nothing; an order keeps the
price it was placed at; a plan off sale is neither offered nor sold, and whoever holds it keeps their access."""

from types import SimpleNamespace

import requests

from bot.handlers import buy
from commerce.catalogue import plan_prices
from commerce.stars import AMOUNT_MISMATCH, precheck_stars, settle_stars_payment
from models.catalogue import Addon, AddonPrice, PlanPrice
from models.commerce import Order, Plan
from models.fulfillment import Entitlement
from models.ops import AuditEvent
from tests.support import commerce
from tests.support.shop import OPERATOR_TOKEN
from tests.web import test_panel_api as api
from tests.web.test_admin_api import assert_problem
from tests.web.test_openapi import check

REASON = {"X-Operator-Reason": "autumn prices"}
NEW_PLAN = {
    "code": "quarter",
    "name": "Quarter",
    "durationDays": 90,
    "prices": {"RUB": 49900, "XTR": 600},
    "trafficGb": None,
    "deviceLimit": 5,
    "squads": [commerce.SQUAD_A],
    "graceHours": 24,
}


def send(web, headers, path, body):
    return requests.post(web + path, headers=headers, json=body, timeout=10)


def catalogue_rows():
    return (
        list(Plan.select().order_by(Plan.id).dicts()),
        list(PlanPrice.select().order_by(PlanPrice.id).dicts()),
        list(Addon.select().order_by(Addon.id).dicts()),
        list(AddonPrice.select().order_by(AddonPrice.id).dicts()),
        AuditEvent.select().where(AuditEvent.subject_type.in_(["plan", "addon"])).count(),
    )


def stars_checkout(web, customer_id, plan_id, request_id):
    body = {"customerId": customer_id, "kind": "purchase", "provider": "stars", "currency": "XTR",
            "planId": plan_id, "requestId": request_id}  # fmt: skip
    headers = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
    return requests.post(web + "/v1/checkout", json=body, headers=headers, timeout=10)


def offered_in_the_bot():
    """The plan ids the bot's Buy menu lists now (bot/handlers/buy.py reads them on every update)."""
    context = SimpleNamespace(language="en", text=lambda key, **values: key)
    return [plan_id for plan_id, _ in buy._plan_offers(context)]


def test_plans_and_addons_are_created_edited_and_taken_off_sale_each_change_audited_with_its_reason(web):
    headers = {**api.session_of(web), **REASON}

    created = send(web, headers, "/v1/panel/plans", NEW_PLAN)
    check(created, "/v1/panel/plans", "post")
    assert created.status_code == 201, created.text
    plan = created.json()["plan"]
    assert (plan["trafficBytes"], plan["deviceLimit"], plan["active"]) == (None, 5, True)  # None: unlimited
    assert plan_prices(plan["id"]) == {"RUB": 49900, "XTR": 600}
    assert offered_in_the_bot() == [plan["id"]]

    change = {"prices": {"RUB": 59900}, "trafficGb": 200, "deviceLimit": None}
    edited = send(web, headers, f"/v1/panel/plans/{plan['id']}", change)
    check(edited, "/v1/panel/plans/{planID}", "post")
    assert edited.status_code == 200, edited.text
    assert plan_prices(plan["id"]) == {"RUB": 59900}  # the prices given are the plan's prices
    stored = Plan.get_by_id(plan["id"])
    assert (stored.traffic_allowance_bytes, stored.device_limit, stored.duration_days) == (200 << 30, None, 90)

    off = send(web, {**headers, "X-Operator-Reason": "sold out"}, f"/v1/panel/plans/{plan['id']}", {"active": False})
    assert off.status_code == 200 and Plan.get_by_id(plan["id"]).active is False
    assert offered_in_the_bot() == []

    audits = list(AuditEvent.select().where(AuditEvent.subject_type == "plan").order_by(AuditEvent.id))
    assert [(a.action, a.reason, a.actor) for a in audits] == [
        ("catalogue.plan.created", "autumn prices", "operator:alice"),
        ("catalogue.plan.changed", "autumn prices", "operator:alice"),
        ("catalogue.plan.deactivated", "sold out", "operator:alice"),
    ]
    assert '"RUB": 49900' in audits[1].details and '"RUB": 59900' in audits[1].details  # before and after

    addon = send(web, headers, "/v1/panel/addons", {"code": "more-devices", "name": "Two more devices",
                                                    "extraDevices": 2, "prices": {"RUB": 9900}})  # fmt: skip
    check(addon, "/v1/panel/addons", "post")
    assert addon.status_code == 201, addon.text
    addon_id = addon.json()["addon"]["id"]
    edited = send(web, headers, f"/v1/panel/addons/{addon_id}", {"prices": {"RUB": 12900, "XTR": 120}})
    check(edited, "/v1/panel/addons/{addonID}", "post")
    assert edited.status_code == 200
    assert {r.currency: r.amount_minor for r in AddonPrice.select()} == {"RUB": 12900, "XTR": 120}
    actions = [a.action for a in AuditEvent.select().where(AuditEvent.subject_type == "addon").order_by(AuditEvent.id)]
    assert actions == ["catalogue.addon.created", "catalogue.addon.changed"]

    listed = requests.get(web + "/v1/panel/plans", headers=headers, timeout=10)
    check(listed, "/v1/panel/plans", "get")
    assert [row["active"] for row in listed.json()["plans"]] == [False]
    page = requests.get(web + "/panel/plans", headers=headers, timeout=10)  # read without JavaScript
    assert page.status_code == 200
    assert "599.00 RUB" in page.text and "129.00 RUB" in page.text and "off sale" in page.text
    assert "<td>200 GiB</td><td>unlimited</td>" in page.text.replace("\n    ", "")  # devices, in words
    assert 'id="new-plan"' in page.text and 'data-action="/v1/panel/plans"' in page.text


BAD_PLANS = [
    ({"prices": {}}, 400, "no_price"),
    ({"durationDays": 0}, 400, "invalid_duration"),
    ({"durationDays": -30}, 400, "invalid_duration"),
    ({"prices": {"RUB": 0}}, 400, "invalid_prices"),
    ({"prices": {"RUB": 199.5}}, 400, "invalid_prices"),
    ({"prices": {"RUB": "19900"}}, 400, "invalid_prices"),
    ({"prices": {"ABC": 19900}}, 400, "invalid_prices"),
    ({"deviceLimit": 0}, 400, "invalid_limit"),
    ({"squads": ["not-a-uuid"]}, 400, "invalid_squads"),
    ({"code": "Has Spaces"}, 400, "invalid_code"),
    ({"colour": "red"}, 400, "unknown_field"),
]


def test_a_change_that_would_break_a_sale_or_lacks_the_permission_is_refused_with_words_and_writes_nothing(web):
    headers = {**api.session_of(web), **REASON}
    existing = commerce.priced_plan("monthly", prices={"RUB": 19900})
    before = catalogue_rows()
    for change, status, code in BAD_PLANS:
        refused = send(web, headers, "/v1/panel/plans", {**NEW_PLAN, **change})
        assert_problem(refused, status, code)
        assert len(refused.json()["detail"]) > 10, code  # said in words
        assert_problem(send(web, headers, f"/v1/panel/plans/{existing.id}", change), status, code)
    assert_problem(send(web, headers, "/v1/panel/plans", {**NEW_PLAN, "code": "monthly"}), 409, "code_taken")
    assert_problem(send(web, headers, "/v1/panel/addons", {"code": "x", "name": "X", "prices": {"RUB": 1}}), 400,
                   "no_extra")  # fmt: skip
    assert_problem(send(web, headers, "/v1/panel/addons", {"code": "x", "name": "X", "extraDevices": 1}), 400,
                   "no_price")  # fmt: skip
    assert_problem(send(web, headers, "/v1/panel/plans/999999", {"active": False}), 404, "plan_not_found")
    assert_problem(send(web, {**headers, "X-Operator-Reason": ""}, "/v1/panel/plans", NEW_PLAN), 400, "reason_required")
    reader = {**api.session_of(web, "bob", ["payments.read"]), **REASON}
    assert_problem(send(web, reader, "/v1/panel/plans", NEW_PLAN), 403, "forbidden")
    assert_problem(send(web, reader, f"/v1/panel/plans/{existing.id}", {"active": False}), 403, "forbidden")
    assert catalogue_rows() == before
    page = requests.get(web + "/panel/plans", headers=reader, timeout=10)
    assert page.status_code == 200 and "Monthly" in page.text
    assert 'id="new-plan"' not in page.text  # no form for whoever cannot change the catalogue


def test_after_a_price_change_orders_keep_their_price_and_a_plan_off_sale_is_not_sold_but_its_holders_keep_access(
    web,
):
    headers = {**api.session_of(web), **REASON}
    plan = commerce.priced_plan("monthly", prices={"XTR": 250, "RUB": 19900})
    other = commerce.priced_plan("yearly", prices={"XTR": 2000})
    buyer = commerce.customer()
    paid = stars_checkout(web, buyer.id, plan.id, "paid-1").json()
    assert settle_stars_payment(paid["orderId"], "charge-1", 250).outcome == "settled"
    access = list(Entitlement.select().where(Entitlement.order == paid["orderId"]).dicts())
    assert access  # the period it bought
    pending = stars_checkout(web, buyer.id, plan.id, "pending-1").json()
    assert pending["invoice"]["amount"] == 250

    assert send(web, headers, f"/v1/panel/plans/{plan.id}", {"prices": {"XTR": 400, "RUB": 29900}}).status_code == 200

    assert Order.get_by_id(paid["orderId"]).amount_minor == 250
    assert Order.get_by_id(pending["orderId"]).amount_minor == 250
    again = stars_checkout(web, buyer.id, plan.id, "pending-1").json()  # the same checkout asked for again
    assert (again["orderId"], again["invoice"]["amount"]) == (pending["orderId"], 250)
    assert precheck_stars(pending["orderId"], 250).ok
    assert precheck_stars(pending["orderId"], 400).code == AMOUNT_MISMATCH
    assert settle_stars_payment(pending["orderId"], "charge-2", 250).outcome == "settled"
    assert stars_checkout(web, buyer.id, plan.id, "new-1").json()["invoice"]["amount"] == 400  # new orders: new price

    assert send(web, headers, f"/v1/panel/plans/{plan.id}", {"active": False}).status_code == 200
    orders = Order.select().count()
    assert offered_in_the_bot() == [other.id]  # read from the database on this update: no stale copy
    refused = stars_checkout(web, buyer.id, plan.id, "after")
    assert 400 <= refused.status_code < 500 and refused.json()["code"] == "plan_inactive"
    assert Order.select().count() == orders
    assert list(Entitlement.select().where(Entitlement.order == paid["orderId"]).dicts()) == access  # untouched
    assert send(web, headers, f"/v1/panel/plans/{plan.id}", {"active": True}).status_code == 200
    assert sorted(offered_in_the_bot()) == sorted([plan.id, other.id])
