"""SPEC 15.6, 2.19 through the panel API: preview, confirm, pause, resume, cancel and follow a bulk action, every
answer as the OpenAPI description says; bad input is a 4xx with its code and writes nothing; changing needs
subscriptions.write, reading subscriptions.read."""

import requests

from models.bulk import BulkAction, BulkActionItem
from models.ops import AuditEvent
from tests.support import commerce, subscribers
from tests.web.test_admin_api import assert_problem
from tests.web.test_openapi import check
from tests.web.test_panel_api import REASON, session_of

ROOT = "/v1/panel/bulk-actions"
ONE = ROOT + "/{bulkActionID}"


def call(web, method, path, template, headers, **kwargs):
    answer = requests.request(method, web + path, headers=headers, timeout=10, **kwargs)
    check(answer, template, method)
    return answer


def test_an_operator_previews_confirms_pauses_resumes_and_cancels_a_bulk_extend_and_follows_it(web):
    plan = commerce.limited_plan()
    chosen = subscribers.provisioned(None, plan, 3)
    cookie = session_of(web)
    changing = {**cookie, **REASON}

    answer = call(web, "post", ROOT, ROOT, cookie, json={"action": "extend", "planId": plan.id, "days": 3})
    assert answer.status_code == 201, answer.text
    previewed = answer.json()
    action = previewed["bulkAction"]
    assert (action["status"], action["itemCount"], action["days"], action["createdBy"]) == (
        "previewed", 3, 3, "operator:alice",
    )  # fmt: skip
    assert [item["subscriptionId"] for item in previewed["items"]] == chosen
    assert action["progress"]["items"]["pending"] == 3
    path = f"{ROOT}/{action['id']}"

    for verb, status in (("confirm", "running"), ("pause", "paused"), ("resume", "running"), ("cancel", "cancelled")):
        answer = call(web, "post", f"{path}/{verb}", f"{ONE}/{verb}", changing)
        assert (answer.status_code, answer.json()["bulkAction"]["status"]) == (200, status)
    shown = call(web, "get", path, ONE, cookie).json()["bulkAction"]
    assert (shown["confirmedBy"], shown["reason"]) == ("operator:alice", REASON["X-Operator-Reason"])
    assert shown["progress"]["items"] == {"pending": 0, "applied": 0, "skipped": 0, "cancelled": 3}
    page = call(web, "get", f"{path}/items", ONE + "/items", cookie, params={"limit": 2}).json()
    rest = call(web, "get", f"{path}/items", ONE + "/items", cookie, params={"cursor": page["nextCursor"]}).json()
    assert [i["position"] for i in page["items"] + rest["items"]] == [1, 2, 3] and rest["nextCursor"] is None
    listed = call(web, "get", ROOT, ROOT, cookie).json()
    assert [a["id"] for a in listed["bulkActions"]] == [action["id"]]
    audited = [a.action for a in AuditEvent.select().where(AuditEvent.subject_type == "bulk_action")]
    assert audited == [f"panel.bulk.{v}" for v in ("previewed", "confirmed", "paused", "resumed", "cancelled")]

    assert_problem(call(web, "post", f"{path}/confirm", f"{ONE}/confirm", changing), 409, "bulk_action_state")
    assert_problem(call(web, "post", f"{path}/pause", f"{ONE}/pause", cookie), 400, "reason_required")


def test_bad_bulk_requests_and_missing_permissions_are_4xx_with_their_code_and_write_nothing(web):
    plan = commerce.limited_plan()
    subscribers.provisioned(None, plan, 1)
    cookie = session_of(web)
    for body, status, code in [
        ({"action": "shrink", "days": 3}, 400, "invalid_bulk_action"),
        ({"action": "extend"}, 400, "invalid_days"),
        ({"action": "extend", "days": "3"}, 400, "invalid_days"),
        ({"action": "extend", "days": 3, "planId": 424242}, 400, "invalid_plan"),
        ({"action": "extend", "days": 3, "everyone": True}, 400, "invalid_body"),
        ({"action": "set_squads", "squadIds": []}, 400, "plan_required"),
        ({"action": "set_squads", "planId": plan.id, "squadIds": ["x"]}, 400, "invalid_squads"),
        ({"action": "pause", "subscriptionIds": ["nobody"]}, 400, "unknown_subscriptions"),
        ({"action": "resume", "subscriptionIds": "all"}, 400, "invalid_subscriptions"),
        ({"action": "extend", "days": 3, "planId": commerce.limited_plan("empty").id}, 422, "empty_selection"),
    ]:
        assert_problem(call(web, "post", ROOT, ROOT, cookie, json=body), status, code)
    assert_problem(call(web, "get", f"{ROOT}/77", ONE, cookie), 404, "bulk_action_not_found")
    assert_problem(call(web, "get", f"{ROOT}/x1", ONE, cookie), 400, "invalid_bulk_action_id")
    assert_problem(call(web, "post", f"{ROOT}/77/cancel", f"{ONE}/cancel", {**cookie, **REASON}), 404,
                   "bulk_action_not_found")  # fmt: skip
    reader = session_of(web, name="reader", permissions=["subscriptions.read"])
    assert_problem(call(web, "post", ROOT, ROOT, reader, json={"action": "extend", "days": 1}), 403, "forbidden")
    assert_problem(call(web, "get", ROOT, ROOT, {}), 401, "unauthorized")
    assert call(web, "get", ROOT, ROOT, reader).json()["bulkActions"] == []
    assert BulkAction.select().count() == 0 and BulkActionItem.select().count() == 0
    assert AuditEvent.select().where(AuditEvent.subject_type == "bulk_action").count() == 0
