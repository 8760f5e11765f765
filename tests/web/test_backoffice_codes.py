"""SPEC 13.11, 13.14: an operator issues gift cards and access codes from the panel API; the code is
in the answer once, never in the audit or the database, and it activates for a customer."""

import json

import requests

from commerce.activations import activate_access_code, activate_gift_card
from commerce.codes import code_hash
from models.catalogue import AccessCode, GiftCard
from models.ops import AuditEvent
from tests.support import commerce
from tests.web import test_panel_api as api
from tests.web.test_admin_api import assert_problem
from tests.web.test_openapi import check

REASON = {"X-Operator-Reason": "spring campaign"}


def issue(web, headers, what, body):
    return requests.post(f"{web}/v1/panel/{what}", headers=headers, json=body, timeout=10)


def described(answer, path):
    check(answer, path, "post")
    return answer


def test_a_gift_card_is_issued_once_shown_and_redeems_for_a_customer(web):
    headers = {**api.session_of(web), **REASON}
    plan = commerce.limited_plan()

    answer = described(issue(web, headers, "gift-cards", {"planId": plan.id, "validDays": 30}), "/v1/panel/gift-cards")

    assert answer.status_code == 201
    body = answer.json()
    code = body["code"]
    card = GiftCard.get_by_id(body["giftCard"]["id"])
    assert (card.code_hash, card.plan_id, card.status) == (code_hash(code), plan.id, "active")
    audit = AuditEvent.get(AuditEvent.action == "panel.gift_card.issued")
    assert (audit.actor, audit.reason, audit.subject_id) == ("operator:alice", "spring campaign", str(card.id))
    assert code not in audit.details and code.replace("-", "") not in audit.details
    activation = activate_gift_card(commerce.customer().id, code)
    assert GiftCard.get_by_id(card.id).redemption_order_id == activation.order_id


def test_an_access_code_may_be_chosen_once_and_activates_up_to_its_limit(web):
    headers = {**api.session_of(web), **REASON}
    plan = commerce.limited_plan()
    body = {"planId": plan.id, "maxActivations": 1, "validDays": 7, "code": "SPRING2027"}

    first = described(issue(web, headers, "access-codes", body), "/v1/panel/access-codes")
    assert first.status_code == 201
    assert first.json()["code"] == "SPRING2027"
    assert first.json()["accessCode"]["maxActivations"] == 1
    again = described(issue(web, headers, "access-codes", body), "/v1/panel/access-codes")
    assert_problem(again, 409, "code_taken")
    assert AccessCode.select().count() == 1
    details = json.loads(AuditEvent.get(AuditEvent.action == "panel.access_code.issued").details)
    assert details == {"planId": plan.id, "maxActivations": 1, "expiresAt": details["expiresAt"], "chosen": True}
    activate_access_code(commerce.customer().id, "spring2027")
    assert AccessCode.get(AccessCode.code_hash == code_hash("SPRING2027")).activation_count == 1


def test_bad_issues_are_4xx_with_their_code_and_write_nothing(web):
    cookie = api.session_of(web)
    headers = {**cookie, **REASON}
    plan = commerce.limited_plan()
    cases = [
        ("gift-cards", {"validDays": 30}, 400, "invalid_plan_id"),
        ("gift-cards", {"planId": plan.id}, 400, "invalid_validity"),
        ("gift-cards", {"planId": plan.id, "validDays": 0}, 400, "invalid_validity"),
        ("gift-cards", {"planId": 424242, "validDays": 30}, 404, "plan_not_found"),
        ("access-codes", {"planId": plan.id}, 400, "invalid_activation_limit"),
        ("access-codes", {"planId": plan.id, "maxActivations": True}, 400, "invalid_activation_limit"),
        ("access-codes", {"planId": plan.id, "maxActivations": 2, "code": "ab-c"}, 400, "invalid_code"),
        ("access-codes", {"planId": plan.id, "maxActivations": 2, "code": 12345678}, 400, "invalid_code"),
        ("access-codes", [], 400, "invalid_body"),
    ]
    for what, body, status, code in cases:
        assert_problem(described(issue(web, headers, what, body), f"/v1/panel/{what}"), status, code)
    assert_problem(issue(web, cookie, "gift-cards", {"planId": plan.id, "validDays": 1}), 400, "reason_required")
    issued = AuditEvent.select().where(AuditEvent.action.in_(["panel.gift_card.issued", "panel.access_code.issued"]))
    assert (GiftCard.select().count(), AccessCode.select().count(), issued.count()) == (0, 0, 0)
