"""SPEC 15.4, 4.5: deliveries that need review are listed in the back office and resolved there — marked
delivered or refunded to the wallet — with a reason, audited, never sent to the provider again."""

import datetime

import requests

from goods import delivery
from models.base import utcnow
from models.commerce import Order
from models.goods import GoodsDelivery
from models.ops import AuditEvent
from ops import operators
from tests.goods.test_delivery import run
from tests.support.goods import paid_orders, product
from tests.web import test_panel_api as api
from tests.web.test_admin_api import assert_problem
from tests.web.test_openapi import check

REASON = {"X-Operator-Reason": "checked at the provider"}
RESOLVE = "/v1/panel/goods/deliveries/{deliveryID}/resolve"


def in_review(count):
    """`count` paid orders whose deliveries need review (their purchase was interrupted); their rows."""
    goods = product("http://127.0.0.1:9")  # never called: the claims below die before calling
    order_ids = paid_orders(goods, count)
    for order_id in order_ids:
        delivery.in_transaction(lambda order_id=order_id: delivery.claim(order_id))
    GoodsDelivery.update(next_attempt_at=utcnow() - datetime.timedelta(seconds=1)).execute()
    for order_id in order_ids:
        assert run(order_id) == "needs_review"
    return list(GoodsDelivery.select().order_by(GoodsDelivery.id))


def resolve(web, headers, row_id, outcome):
    answer = requests.post(f"{web}/v1/panel/goods/deliveries/{row_id}/resolve", headers=headers,
                           json={"outcome": outcome}, timeout=10)  # fmt: skip
    check(answer, RESOLVE, "post")
    return answer


def test_an_operator_resolves_deliveries_in_review_with_a_reason_audited_and_a_refusal_writes_nothing(web):
    first, second = in_review(2)
    reader = api.session_of(web, "reader", [operators.PAYMENTS_READ])
    headers = {**api.session_of(web), **REASON}

    listed = api.get(web, "/v1/panel/goods/deliveries", reader)
    check(listed, "/v1/panel/goods/deliveries", "get")
    assert [row["id"] for row in listed.json()["deliveries"]] == [first.id, second.id]
    page = requests.get(f"{web}/panel/goods/deliveries", headers=headers, timeout=10)
    assert page.status_code == 200 and f'data-delivery="{first.id}"' in page.text

    assert_problem(resolve(web, {**reader, **REASON}, first.id, "refund"), 403, "forbidden")
    assert_problem(resolve(web, {"Cookie": headers["Cookie"]}, first.id, "refund"), 400, "reason_required")
    assert_problem(resolve(web, headers, first.id, "resend"), 400, "invalid_outcome")
    assert_problem(resolve(web, headers, 999999, "refund"), 404, "delivery_not_found")
    assert GoodsDelivery.get_by_id(first.id).status == "needs_review"
    assert AuditEvent.select().where(AuditEvent.subject_type == "goods_delivery").count() == 0

    assert resolve(web, headers, first.id, "delivered").json()["delivery"]["status"] == "delivered"
    assert Order.get_by_id(first.order_id).status == "fulfilled"
    assert resolve(web, headers, second.id, "refund").json()["delivery"]["status"] == "refunded"
    assert Order.get_by_id(second.order_id).status == "refunded"
    audits = {a.action: a for a in AuditEvent.select().where(AuditEvent.subject_type == "goods_delivery")}
    assert set(audits) == {"panel.goods_delivery.delivered", "panel.goods_delivery.refunded"}
    assert {a.reason for a in audits.values()} == {"checked at the provider"}
    assert_problem(resolve(web, headers, first.id, "refund"), 409, "delivery_not_in_review")
    assert api.get(web, "/v1/panel/goods/deliveries", headers).json()["deliveries"] == []
