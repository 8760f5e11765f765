"""SPEC 15.4, 12.3, 4.5: an operator manages goods and their providers in the back office — each change with a
reason, audited; a provider's token sealed and never shown back; bad input refused, writing nothing."""

import requests

from models.base import db
from models.goods import Goods, GoodsPrice, GoodsProvider
from models.ops import AuditEvent
from ops import operators
from tests.web import test_panel_api as api
from tests.web.test_admin_api import assert_problem
from tests.web.test_openapi import check

REASON = {"X-Operator-Reason": "new voucher line"}
TOKEN = "provider-secret-token-0123456789"


def post(web, path, headers, body, template=None):
    answer = requests.post(web + path, headers=headers, json=body, timeout=10)
    check(answer, template or path, "post")
    return answer


def written():
    return (Goods.select().count(), GoodsPrice.select().count(), GoodsProvider.select().count(),
            AuditEvent.select().count())  # fmt: skip


def test_an_operator_adds_a_provider_and_goods_changes_and_deactivates_them_audited_and_the_token_never_shown(web):
    headers = {**api.session_of(web), **REASON}
    reader = api.session_of(web, "reader", [operators.PAYMENTS_READ])
    provider_body = {"name": "Vouchers Inc", "url": "https://goods.example/api/v1", "token": TOKEN}
    assert_problem(post(web, "/v1/panel/goods/providers", {**reader, **REASON}, provider_body), 403, "forbidden")
    added = post(web, "/v1/panel/goods/providers", headers, provider_body)
    assert added.status_code == 201, added.text
    provider = added.json()["provider"]
    assert provider["tokenUsable"] is True and provider["url"] == "https://goods.example/…"
    assert GoodsProvider.get().api_token == TOKEN  # sealed at rest, opens with the key
    assert TOKEN not in db.execute_sql("SELECT api_token FROM goods_providers").fetchone()[0]

    goods_body = {"code": "steam-10", "name": "Steam 10", "providerId": provider["id"], "sku": "steam-10-eu",
                  "prices": {"RUB": 99000, "XTR": 500}}  # fmt: skip
    created = post(web, "/v1/panel/goods", headers, goods_body)
    assert created.status_code == 201, created.text
    goods = created.json()["goods"]
    assert (goods["prices"], goods["active"], goods["provider"]) == ({"RUB": 99000, "XTR": 500}, True, "Vouchers Inc")
    template = "/v1/panel/goods/{goodsID}"
    changed = post(web, f"/v1/panel/goods/{goods['id']}", headers, {"prices": {"USD": 1100}, "name": "Steam $11"},
                   template)  # fmt: skip
    assert changed.json()["goods"]["prices"] == {"USD": 1100} and changed.json()["goods"]["name"] == "Steam $11"
    off = post(web, f"/v1/panel/goods/{goods['id']}", headers, {"active": False}, template)
    assert off.json()["goods"]["active"] is False

    listed = api.get(web, "/v1/panel/goods", reader)
    check(listed, "/v1/panel/goods", "get")
    assert [row["code"] for row in listed.json()["goods"]] == ["steam-10"]
    page = requests.get(f"{web}/panel/goods", headers=headers, timeout=10)
    assert page.status_code == 200 and "Steam $11" in page.text and "off sale" in page.text
    for answer in (added, created, changed, off, listed, page):
        assert TOKEN not in answer.text
    audits = list(AuditEvent.select().where(AuditEvent.action.startswith("panel.goods")).order_by(AuditEvent.id))
    assert [audit.action for audit in audits] == [
        "panel.goods_provider.added", "panel.goods.added", "panel.goods.changed", "panel.goods.deactivated",
    ]  # fmt: skip
    assert {audit.reason for audit in audits} == {"new voucher line"}
    assert all(TOKEN not in (audit.details or "") for audit in audits)


def test_bad_goods_and_provider_input_is_refused_with_a_code_and_writes_nothing(web):
    headers = {**api.session_of(web), **REASON}
    provider = post(
        web, "/v1/panel/goods/providers", headers, {"name": "P", "url": "https://p.example", "token": TOKEN}
    )
    provider_id = provider.json()["provider"]["id"]
    good = {"code": "g", "name": "G", "providerId": provider_id, "sku": "g-1", "prices": {"RUB": 100}}
    goods_id = post(web, "/v1/panel/goods", headers, good).json()["goods"]["id"]
    before = written()
    refusals = [
        ("/v1/panel/goods", {**good, "code": "h", "prices": {"rub": 100}}, 400, "invalid_prices"),
        ("/v1/panel/goods", {**good, "code": "h", "prices": {"RUB": -1}}, 400, "invalid_prices"),
        ("/v1/panel/goods", {**good, "code": "h", "prices": {}}, 400, "invalid_prices"),
        ("/v1/panel/goods", {**good, "code": "h", "name": ""}, 400, "invalid_goods_field"),
        ("/v1/panel/goods", {**good, "code": "h", "providerId": 999999}, 404, "provider_not_found"),
        ("/v1/panel/goods", good, 409, "goods_code_taken"),
        (f"/v1/panel/goods/{goods_id}", {"active": "no"}, 400, "invalid_goods_field"),
        (f"/v1/panel/goods/{goods_id}", {"code": "renamed"}, 400, "invalid_goods_field"),
        ("/v1/panel/goods/999999", {"active": True}, 404, "goods_not_found"),
        ("/v1/panel/goods/providers", {"name": "Q", "url": "ftp://q.example", "token": TOKEN}, 400, "invalid_url"),
        ("/v1/panel/goods/providers", {"name": "Q", "url": "https://q.example", "token": ""}, 400, "invalid_token"),
        ("/v1/panel/goods/providers", {"name": "P", "url": "https://q.example", "token": TOKEN}, 409,
         "provider_name_taken"),
    ]  # fmt: skip
    for path, body, status, code in refusals:
        assert_problem(requests.post(web + path, headers=headers, json=body, timeout=10), status, code)
    unreasoned = requests.post(web + "/v1/panel/goods", headers={"Cookie": headers["Cookie"]}, json=good, timeout=10)
    assert_problem(unreasoned, 400, "reason_required")
    assert written() == before
