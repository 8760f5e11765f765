"""The OpenAPI description is true (issue 4, item 7): it lists exactly the /v1/
routes the app serves, and real answers carry the documented status codes
and exactly the documented fields."""

import re

import requests

from config.settings import load_settings
from tests.web import test_panel_api as panel_tests
from tests.web.conftest import OPERATOR_TOKEN
from web.app import create_app

AUTH = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}


def normalized(path):
    return re.sub(r"\{[^}]+\}|<[^>]+>", "{}", path)


def test_every_v1_route_is_described_and_nothing_else(database):
    app = create_app(load_settings({"APP_OPERATOR_TOKEN": OPERATOR_TOKEN}))
    served = {(route.method.lower(), normalized(route.rule)) for route in app.routes if route.rule.startswith("/v1/")}
    from web.openapi import document

    described = {(method, normalized(path)) for path, item in document()["paths"].items() for method in item}
    assert served == described


def conforms(value, schema, where="$"):
    """A small validator for the subset of JSON Schema the description uses."""
    if "$ref" in schema:
        from web.openapi import document

        schema = document()["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    types = schema.get("type")
    types = [types] if isinstance(types, str) else types
    if types:
        kinds = {
            "string": str,
            "integer": int,
            "boolean": bool,
            "object": dict,
            "array": list,
            "null": type(None),
        }
        assert any(isinstance(value, kinds[t]) and not (t == "integer" and isinstance(value, bool)) for t in types), (
            f"{where}: {value!r} is not {types}"
        )
    if "enum" in schema:
        assert value in schema["enum"], f"{where}: {value!r} not in {schema['enum']}"
    if isinstance(value, dict) and "properties" in schema:
        assert set(schema.get("required", [])) <= set(value), f"{where}: missing {set(schema['required']) - set(value)}"
        if schema.get("additionalProperties") is False:
            assert set(value) <= set(schema["properties"]), (
                f"{where}: undocumented {set(value) - set(schema['properties'])}"
            )
        for key, item in value.items():
            conforms(item, schema["properties"][key], f"{where}.{key}")
    if isinstance(value, list) and "items" in schema:
        for index, item in enumerate(value):
            conforms(item, schema["items"], f"{where}[{index}]")


def check(answer, path, method):
    from web.openapi import document

    responses = document()["paths"][path][method]["responses"]
    status = str(answer.status_code)
    assert status in responses, f"{method.upper()} {path} answered an undocumented {status}"
    content = responses[status].get("content")
    if content:
        media = answer.headers["Content-Type"].split(";")[0]
        assert media in content, f"{method.upper()} {path} {status}: {media} not documented"
        conforms(answer.json(), content[media]["schema"])


def test_answers_match_the_description(web):
    cookie = panel_tests.session_of(web)
    failed = panel_tests.operation_in("failed")
    succeeded = panel_tests.operation_in("succeeded")
    reason = {**cookie, **panel_tests.REASON}
    calls = [
        ("get", "/v1/admin/jobs", "/v1/admin/jobs", AUTH, {}),
        ("get", "/v1/admin/jobs", "/v1/admin/jobs", AUTH, {"limit": "0"}),
        ("get", "/v1/admin/jobs", "/v1/admin/jobs", {}, {}),
        ("post", "/v1/admin/jobs/{jobID}/retry", "/v1/admin/jobs/999999/retry", AUTH, {}),
        ("post", "/v1/admin/jobs/{jobID}/cancel", "/v1/admin/jobs/x/cancel", AUTH, {}),
        ("get", "/v1/admin/outbox", "/v1/admin/outbox", AUTH, {}),
        ("get", "/v1/admin/maintenance", "/v1/admin/maintenance", AUTH, {}),
        ("get", "/v1/panel/session", "/v1/panel/session", cookie, {}),
        ("get", "/v1/panel/session", "/v1/panel/session", {}, {}),
        ("get", "/v1/panel/system/jobs", "/v1/panel/system/jobs", cookie, {}),
        ("get", "/v1/panel/system/jobs", "/v1/panel/system/jobs", cookie, {"status": "nope"}),
        ("get", "/v1/panel/system/jobs/{operationID}/history", f"/v1/panel/system/jobs/{failed}/history", cookie, {}),
        ("post", "/v1/panel/system/jobs/{operationID}/retry", f"/v1/panel/system/jobs/{succeeded}/retry", reason, {}),
        ("post", "/v1/panel/system/jobs/{operationID}/cancel", f"/v1/panel/system/jobs/{failed}/cancel", reason, {}),
        ("post", "/v1/panel/system/jobs/{operationID}/retry", f"/v1/panel/system/jobs/{failed}/retry", reason, {}),
        ("post", "/v1/panel/system/jobs/{operationID}/retry", f"/v1/panel/system/jobs/{failed}/retry", cookie, {}),
        ("get", "/v1/panel/orders", "/v1/panel/orders", cookie, {}),
        ("get", "/v1/panel/orders", "/v1/panel/orders", cookie, {"kind": "loan"}),
        ("get", "/v1/panel/payments", "/v1/panel/payments", cookie, {"q": "nobody"}),
        ("get", "/v1/openapi.json", "/v1/openapi.json", {}, {}),
        ("post", "/v1/checkout", "/v1/checkout", AUTH, {}),
        ("post", "/v1/checkout", "/v1/checkout", {}, {}),
        ("post", "/v1/webhooks/yookassa", "/v1/webhooks/yookassa", {}, {}),
        ("post", "/v1/webhooks/cryptobot", "/v1/webhooks/cryptobot", {}, {}),
    ]
    statuses = set()
    for method, template, path, headers, params in calls:
        answer = requests.request(method, web + path, headers=headers, params=params, timeout=10)
        check(answer, template, method)
        statuses.add(answer.status_code)
    assert {200, 400, 401, 404, 409} <= statuses
    answer = requests.post(
        web + "/v1/admin/maintenance", headers=AUTH, json={"active": False, "reason": "x"}, timeout=10
    )
    check(answer, "/v1/admin/maintenance", "post")
    answer = requests.post(web + "/v1/panel/session", json={"username": "alice", "password": "wrong"}, timeout=10)
    check(answer, "/v1/panel/session", "post")


def test_checkout_and_webhook_answers_match_the_description(shop):
    from fakes.cryptobot import sign
    from tests.support import commerce
    from tests.support.shop import CRYPTOBOT_TOKEN, rub_plan

    customer, plan = commerce.customer(), rub_plan()
    body = {"customerId": customer.id, "kind": "purchase", "currency": "RUB", "planId": plan.id}
    statuses = set()
    for extra in (
        {"provider": "yookassa", "requestId": "a"},
        {"provider": "stars", "currency": "XTR", "requestId": "b"},
        {"provider": "wallet", "requestId": "c"},
        {"provider": "yookassa", "requestId": "d", "planId": 999999},
        {"provider": "yookassa"},
    ):
        answer = requests.post(shop.web + "/v1/checkout", headers=AUTH, json={**body, **extra}, timeout=10)
        check(answer, "/v1/checkout", "post")
        statuses.add(answer.status_code)
    check(requests.post(shop.web + "/v1/checkout", json=body, timeout=10), "/v1/checkout", "post")
    assert statuses == {200, 400, 404, 422}
    update = b'{"update_id": 1, "update_type": "invoice_paid", "payload": {}}'
    for signature in (sign(CRYPTOBOT_TOKEN, update), "forged"):
        answer = requests.post(
            shop.web + "/v1/webhooks/cryptobot",
            data=update,
            headers={"crypto-pay-api-signature": signature},
            timeout=10,
        )
        check(answer, "/v1/webhooks/cryptobot", "post")
    for payload in (b"{}", b'{"type": "notification", "event": "refund.succeeded", "object": {}}', b"x" * 70000):
        check(
            requests.post(shop.web + "/v1/webhooks/yookassa", data=payload, timeout=10), "/v1/webhooks/yookassa", "post"
        )
