"""The back office's catalogue (SPEC 13.1, 13.14): plans and add-ons, created, edited, put on or off sale.

GET  /v1/panel/plans                  payments.read: every plan and add-on with its prices
POST /v1/panel/plans                  payments.write + reason: a new plan (201)
POST /v1/panel/plans/{planID}         payments.write + reason: the fields given replace the plan's
POST /v1/panel/addons                 payments.write + reason: a new add-on (201)
POST /v1/panel/addons/{addonID}       payments.write + reason: the fields given replace the add-on's
GET  /panel/plans                     the same as a page, with the forms for whoever may change them

Rules, refusals and audit are commerce/catalogue_changes.py's: a change that
would break a sale is a 400 with its code and words, and writes nothing. There
is no delete: a plan taken off sale (`"active": false`) is no longer offered or
sold, and whoever holds it keeps their period.
"""

import bottle

from commerce import catalogue_changes as changes
from integrations.payments.amounts import EXPONENTS, to_decimal_text
from ops import operators
from web import panel
from web.answers import id_param, json_answer, json_body
from web.pages import page
from web.problems import Problem

INVALID_PLAN_ID = "invalid_plan_id"
INVALID_ADDON_ID = "invalid_addon_id"
PROBLEMS = {changes.PLAN_NOT_FOUND: 404, changes.ADDON_NOT_FOUND: 404, changes.CODE_TAKEN: 409}
# The currencies a form offers a price in: those the shop sells in, then the usual ones.
USUAL_CURRENCIES = ("RUB", "USD", "XTR")


def _changed(change, *args):
    try:
        return change(*args)
    except changes.CatalogueChangeRejected as rejected:
        raise Problem(PROBLEMS.get(rejected.code, 400), rejected.code, str(rejected)) from None


def form_currencies(plans, addons):
    """The currencies a price can be typed in on the page, with their decimal places."""
    used = {currency for row in plans + addons for currency in row["prices"]}
    ordered = [c for c in USUAL_CURRENCIES if c in EXPONENTS] + sorted(used - set(USUAL_CURRENCIES))
    return {currency: EXPONENTS[currency] for currency in ordered if currency in EXPONENTS}


def build():
    app = bottle.Bottle()
    signed_in = panel.signed_in

    @app.get("/v1/panel/plans")
    @signed_in(operators.PAYMENTS_READ)
    def catalogue(operator):
        return json_answer(200, {"plans": changes.plans_with_prices(), "addons": changes.addons_with_prices()})

    @app.post("/v1/panel/plans")
    @signed_in(operators.PAYMENTS_WRITE)
    def create_plan(operator):
        reason = panel.operator_reason()
        plan = _changed(changes.create_plan, json_body(), reason, f"operator:{operator.username}")
        return json_answer(201, {"plan": plan})

    @app.post("/v1/panel/plans/<plan_id>")
    @signed_in(operators.PAYMENTS_WRITE)
    def change_plan(operator, plan_id):
        row_id = id_param(plan_id, INVALID_PLAN_ID, "planID")
        reason = panel.operator_reason()
        plan = _changed(changes.change_plan, row_id, json_body(), reason, f"operator:{operator.username}")
        return json_answer(200, {"plan": plan})

    @app.post("/v1/panel/addons")
    @signed_in(operators.PAYMENTS_WRITE)
    def create_addon(operator):
        reason = panel.operator_reason()
        addon = _changed(changes.create_addon, json_body(), reason, f"operator:{operator.username}")
        return json_answer(201, {"addon": addon})

    @app.post("/v1/panel/addons/<addon_id>")
    @signed_in(operators.PAYMENTS_WRITE)
    def change_addon(operator, addon_id):
        row_id = id_param(addon_id, INVALID_ADDON_ID, "addonID")
        reason = panel.operator_reason()
        addon = _changed(changes.change_addon, row_id, json_body(), reason, f"operator:{operator.username}")
        return json_answer(200, {"addon": addon})

    @app.get("/panel/plans")
    @page(operators.PAYMENTS_READ)
    def plans_page(operator):
        from web.backoffice_pages import show

        plans, addons = changes.plans_with_prices(), changes.addons_with_prices()
        return show("plans", operator, plans=plans, addons=addons, currencies=form_currencies(plans, addons),
                    can_change=operators.PAYMENTS_WRITE in operator.permission_set, major=to_decimal_text)  # fmt: skip

    return app
