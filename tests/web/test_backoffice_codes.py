"""SPEC 13.11, 13.14: an operator issues gift cards and access codes from the panel API; the code is
in the answer once, never in the audit or the database, and it activates for a customer. An operator
makes a personal offer for a customer, shown on the customer's page with their ratings of the shop."""

import datetime
import json

import requests

from commerce.activations import activate_access_code, activate_gift_card
from commerce.codes import code_hash
from models.base import utcnow
from models.bot import ShopRating
from models.catalogue import AccessCode, GiftCard, PersonalOffer
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


def test_an_operator_makes_a_personal_offer_from_the_customer_page_audited_and_bad_ones_are_refused(web):
    headers = {**api.session_of(web), **REASON}
    buyer, plan = commerce.customer(), commerce.priced_plan(prices={"RUB": 19900})
    path = f"/v1/panel/customers/{buyer.id}/offers"
    described_path = "/v1/panel/customers/{customerID}/offers"
    for body, code in (
        ({"discountPercent": 150, "validDays": 7}, "invalid_discount"),
        ({"discountMinor": 500, "validDays": 7}, "invalid_discount"),
        ({"discountPercent": 20, "validDays": 0}, "invalid_validity"),
        ({"discountPercent": 20}, "invalid_validity"),
        ({"discountPercent": 20, "validDays": 7, "planId": "x"}, "invalid_plan_id"),
    ):
        assert_problem(described(requests.post(web + path, headers=headers, json=body, timeout=10), described_path),
                       400, code)  # fmt: skip
    unknown = requests.post(web + "/v1/panel/customers/nobody/offers", headers=headers, json={}, timeout=10)
    assert_problem(unknown, 404, "customer_not_found")
    assert (PersonalOffer.select().count(), AuditEvent.select().where(AuditEvent.category == "payments").count()) == (
        0, 0,
    )  # fmt: skip

    body = {"discountMinor": 5000, "currency": "RUB", "planId": plan.id, "validDays": 7}
    answer = described(requests.post(web + path, headers=headers, json=body, timeout=10), described_path)
    assert answer.status_code == 201
    made = answer.json()["offer"]
    offer = PersonalOffer.get_by_id(made["id"])
    assert (offer.customer_id, offer.plan_id, offer.discount_minor, offer.currency, offer.status) == (
        buyer.id, plan.id, 5000, "RUB", "active",
    )  # fmt: skip
    assert datetime.timedelta(days=6, hours=23) < offer.expires_at - utcnow() <= datetime.timedelta(days=7)
    audit = AuditEvent.get(AuditEvent.action == "panel.personal_offer.created")
    assert (audit.actor, audit.reason, audit.subject_id) == ("operator:alice", "spring campaign", str(offer.id))

    order = commerce.order(buyer, plan)
    ShopRating.create(order=order.id, customer=buyer.id, rating=4)
    text = requests.get(f"{web}/panel/customers/{buyer.id}", headers=headers, timeout=10).text
    assert f'data-offer="{offer.id}"' in text and "50.00 RUB" in text and 'id="offer-create"' in text
    assert f'data-rating-order="{order.id}"' in text and 'data-rating="4"' in text
