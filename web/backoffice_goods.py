"""The back office's goods (SPEC 15.4): the catalogue and its providers, and the deliveries that need review.

GET  /v1/panel/goods                                 payments.read: goods with prices and status, providers
POST /v1/panel/goods                                 payments.write + reason: {code, name, providerId, sku, prices}
POST /v1/panel/goods/{goodsID}                       payments.write + reason: any of {name, providerId, sku,
                                                     prices, active}
POST /v1/panel/goods/providers                       payments.write + reason: {name, url, token}
GET  /panel/goods                                    the catalogue as a page, with its forms

GET  /v1/panel/goods/deliveries                      payments.read: deliveries needing review, oldest first
POST /v1/panel/goods/deliveries/{deliveryID}/resolve payments.write + reason: {"outcome": "delivered"|"refund"}
GET  /panel/goods/deliveries                         the same as a page, with the resolve actions

A row shows the order, its customer, the goods, the attempts, the failure
class and code — never what the provider sold (the payload reaches only the
customer, sealed in their notice). Resolution is goods/review.py: audited in
its transaction; a delivery not in review is a 409 and writes nothing.
"""

import bottle

from goods import manage, review
from models.goods import Goods
from ops import operators
from web import panel
from web.answers import id_param, iso, json_answer, json_body
from web.pages import page
from web.problems import Problem

INVALID_DELIVERY_ID = "invalid_delivery_id"
INVALID_GOODS_ID = "invalid_goods_id"
MANAGE_PROBLEMS = {
    manage.GOODS_NOT_FOUND: 404,
    manage.PROVIDER_NOT_FOUND: 404,
    manage.CODE_TAKEN: 409,
    manage.PROVIDER_NAME_TAKEN: 409,
    manage.NO_DATA_KEY: 503,
}
PROBLEMS = {
    review.DELIVERY_NOT_FOUND: 404,
    review.DELIVERY_NOT_IN_REVIEW: 409,
    review.INVALID_OUTCOME: 400,
    review.REFUND_REFUSED: 409,
}


def delivery_json(row, goods_names):
    return {
        "id": row.id,
        "orderId": row.order_id,
        "customerId": row.customer_id,
        "goodsId": row.goods_id,
        "goods": goods_names.get(row.goods_id),
        "status": row.status,
        "attempts": row.attempt_count,
        "failureClass": row.failure_class,
        "errorCode": row.last_error_code,
        "resolvedBy": row.resolved_by,
        "createdAt": iso(row.created_at),
        "updatedAt": iso(row.updated_at),
    }


def _names(rows):
    ids = {row.goods_id for row in rows}
    return {goods.id: goods.name for goods in Goods.select().where(Goods.id.in_(list(ids)))} if ids else {}


def build():
    app = bottle.Bottle()
    signed_in = panel.signed_in

    @app.get("/v1/panel/goods/deliveries")
    @signed_in(operators.PAYMENTS_READ)
    def deliveries(operator):
        rows = review.needing_review()
        names = _names(rows)
        return json_answer(200, {"deliveries": [delivery_json(row, names) for row in rows]})

    @app.post("/v1/panel/goods/deliveries/<delivery_id>/resolve")
    @signed_in(operators.PAYMENTS_WRITE)
    def resolve(operator, delivery_id):
        row_id = id_param(delivery_id, INVALID_DELIVERY_ID, "deliveryID")
        reason = panel.operator_reason()
        outcome = json_body().get("outcome")
        try:
            row = review.resolve(row_id, outcome, reason, f"operator:{operator.username}")
        except review.ReviewRejected as rejected:
            raise Problem(PROBLEMS.get(rejected.code, 409), rejected.code, str(rejected)) from None
        return json_answer(200, {"delivery": delivery_json(row, _names([row]))})

    @app.get("/v1/panel/goods")
    @signed_in(operators.PAYMENTS_READ)
    def goods_list(operator):
        goods, providers = manage.catalogue()
        return json_answer(200, {"goods": goods, "providers": providers})

    @app.post("/v1/panel/goods")
    @signed_in(operators.PAYMENTS_WRITE)
    def goods_add(operator):
        reason = panel.operator_reason()
        goods_id = _managed(manage.add_goods, json_body(), f"operator:{operator.username}", reason)
        return json_answer(201, {"goods": _one(goods_id)})

    @app.post("/v1/panel/goods/providers")
    @signed_in(operators.PAYMENTS_WRITE)
    def provider_add(operator):
        reason = panel.operator_reason()
        provider = _managed(manage.add_provider, json_body(), f"operator:{operator.username}", reason)
        return json_answer(201, {"provider": manage.provider_json(provider)})

    @app.post("/v1/panel/goods/<goods_id>")
    @signed_in(operators.PAYMENTS_WRITE)
    def goods_change(operator, goods_id):
        row_id = id_param(goods_id, INVALID_GOODS_ID, "goodsID")
        reason = panel.operator_reason()
        _managed(lambda *args: manage.change_goods(row_id, *args), json_body(), f"operator:{operator.username}", reason)
        return json_answer(200, {"goods": _one(row_id)})

    @app.get("/panel/goods")
    @page(operators.PAYMENTS_READ)
    def goods_page(operator):
        from web.backoffice_pages import show

        goods, providers = manage.catalogue()
        return show("goods", operator, goods=goods, providers=providers,
                    can_write=operators.PAYMENTS_WRITE in operator.permission_set)  # fmt: skip

    @app.get("/panel/goods/deliveries")
    @page(operators.PAYMENTS_READ)
    def deliveries_page(operator):
        from web.backoffice_pages import show

        rows = review.needing_review()
        return show("goods_deliveries", operator, rows=rows, names=_names(rows),
                    can_resolve=operators.PAYMENTS_WRITE in operator.permission_set)  # fmt: skip

    return app


def _managed(change, body, actor, reason):
    try:
        return change(body, actor, reason)
    except manage.ManageRejected as rejected:
        raise Problem(MANAGE_PROBLEMS.get(rejected.code, 400), rejected.code, str(rejected)) from None


def _one(goods_id):
    goods, _ = manage.catalogue()
    return next(row for row in goods if row["id"] == goods_id)
