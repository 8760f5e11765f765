"""SPEC 13.11, 13.14: gift cards and access codes issued in batches from the back office, each code in
the issuing answer only (the CSV is made from it in the page), listed with status and redemptions,
revoked with a reason (audited) so that they activate nothing; customers found by name in any
script and any case, in rows led by the name; a customer's timeline."""

import datetime
import re

import pytest
import requests

from commerce.activations import CODE_REVOKED, ActivationRejected, activate_access_code, activate_gift_card
from commerce.codes import code_hash
from commerce.customers import TelegramIdentity, customer_for_telegram
from models.base import utcnow
from models.catalogue import AccessCode, GiftCard
from models.commerce import Customer, Order
from models.ops import AuditEvent, CustomerNotice
from models.support import SupportMessage
from ops.support import customer_writes
from tests.support import sales
from tests.web import test_panel_api as api
from tests.web.test_admin_api import assert_problem
from tests.web.test_openapi import check
from tests.web.test_pages import page

pytestmark = pytest.mark.usefixtures("ledger_invariant")


def post(web, path, headers, body=None):
    return requests.post(web + path, headers=headers, json=body, timeout=10)


def described(answer, template):
    check(answer, template, "post")
    return answer


def test_a_batch_of_access_codes_is_answered_once_hashed_audited_and_listed_with_its_redemptions(web, database):
    plan = sales.plan()
    headers = {**api.session_of(web), **api.REASON}
    answer = described(
        post(web, "/v1/panel/access-codes", headers, {"planId": plan.id, "maxActivations": 2, "count": 10}),
        "/v1/panel/access-codes",
    )
    assert answer.status_code == 201
    issued = answer.json()["issued"]
    assert len(issued) == 10 and len({row["code"] for row in issued}) == 10
    stored = {row.id: row.code_hash for row in AccessCode.select()}
    assert stored == {row["id"]: code_hash(row["code"]) for row in issued}  # only the hashes are kept
    audited = AuditEvent.select().where(AuditEvent.action == "panel.access_code.issued")
    assert sorted(event.subject_id for event in audited) == sorted(str(row["id"]) for row in issued)
    assert not any(row["code"] in event.details for event in audited for row in issued)

    alice = sales.customer("Alice Shopper", "alice_shop")
    activate_access_code(alice.id, issued[0]["code"])
    listed = page(web, "/panel/codes", api.session_of(web, "reader", ["payments.read"]))
    assert listed.status_code == 200 and listed.text.count("data-access-code=") == 10
    assert "1 of 2" in listed.text and not any(row["code"] in listed.text for row in issued)
    assert 'id="codes-issue"' not in listed.text and "Revoke" not in listed.text  # a reader issues nothing


def test_the_codes_page_lists_newest_first_in_pages_and_builds_the_csv_from_the_answer(web, database):
    plan = sales.plan()
    headers = {**api.session_of(web), **api.REASON}
    post(web, "/v1/panel/gift-cards", headers, {"planId": plan.id, "validDays": 30, "count": 26})
    first = page(web, "/panel/codes", headers)
    ids = [int(key) for key in re.findall(r'data-gift-code="(\d+)"', first.text)]
    assert len(ids) == 25 and ids == sorted(ids, reverse=True)
    cursor = re.search(r"\?giftCursor=(\d+)", first.text).group(1)
    second = page(web, "/panel/codes", headers, giftCursor=cursor)
    rest = [int(key) for key in re.findall(r'data-gift-code="(\d+)"', second.text)]
    assert len(rest) == 1 and set(rest).isdisjoint(ids) and "giftCursor=" not in second.text
    assert page(web, "/panel/codes", headers, giftCursor="x").status_code == 400
    # The page keeps no code: its script makes the CSV from the issuing answer's `issued`, once.
    assert "new Blob([csv]" in first.text and "revokeObjectURL" in first.text and "issued" in first.text


def test_a_revoked_code_or_card_activates_nothing_and_the_revocation_is_audited_once(web, database):
    plan = sales.plan()
    headers = {**api.session_of(web), **api.REASON}
    code = post(web, "/v1/panel/access-codes", headers, {"planId": plan.id, "maxActivations": 5}).json()
    card = post(web, "/v1/panel/gift-cards", headers, {"planId": plan.id, "validDays": 30}).json()
    code_id, card_id = code["accessCode"]["id"], card["giftCard"]["id"]

    revoked = post(web, f"/v1/panel/access-codes/{code_id}/revoke", headers)
    assert described(revoked, "/v1/panel/access-codes/{accessCodeID}/revoke").status_code == 200
    assert revoked.json()["accessCode"]["revokedAt"] and revoked.json()["accessCode"]["active"] is False
    assert post(web, f"/v1/panel/gift-cards/{card_id}/revoke", headers).status_code == 200
    again = post(web, f"/v1/panel/access-codes/{code_id}/revoke", headers)
    assert_problem(described(again, "/v1/panel/access-codes/{accessCodeID}/revoke"), 409, "already_revoked")
    assert_problem(post(web, "/v1/panel/gift-cards/999999/revoke", headers), 404, "gift_card_not_found")

    alice = sales.customer("Alice Shopper", "alice_shop")
    for activate, text in ((activate_access_code, code["code"]), (activate_gift_card, card["code"])):
        with pytest.raises(ActivationRejected) as refused:
            activate(alice.id, text)
        assert refused.value.code == CODE_REVOKED
    assert AccessCode.get_by_id(code_id).activation_count == 0 and GiftCard.get_by_id(card_id).status == "active"
    events = AuditEvent.select().where(AuditEvent.action.endswith(".revoked"))
    assert sorted((e.action, e.reason) for e in events) == [
        ("panel.access_code.revoked", api.REASON["X-Operator-Reason"]),
        ("panel.gift_card.revoked", api.REASON["X-Operator-Reason"]),
    ]
    listed = page(web, "/panel/codes", headers).text
    assert listed.count('data-status="revoked"') == 2


def test_refused_issues_and_revocations_write_nothing(web, database):
    plan = sales.plan()
    headers = {**api.session_of(web), **api.REASON}
    bad = [
        ("/v1/panel/access-codes", {"planId": plan.id, "maxActivations": 1, "count": 0}, "invalid_count"),
        ("/v1/panel/access-codes", {"planId": plan.id, "maxActivations": 1, "count": 1001}, "invalid_count"),
        ("/v1/panel/access-codes", {"planId": plan.id, "maxActivations": 1, "count": "2"}, "invalid_count"),
        (
            "/v1/panel/access-codes",
            {"planId": plan.id, "maxActivations": 1, "count": 2, "code": "SPRING2027"},
            "invalid_count",
        ),  # fmt: skip
        ("/v1/panel/gift-cards", {"planId": plan.id, "validDays": 30, "count": True}, "invalid_count"),
    ]
    for path, body, code in bad:
        assert_problem(post(web, path, headers, body), 400, code)
    row = post(web, "/v1/panel/access-codes", headers, {"planId": plan.id, "maxActivations": 1}).json()
    unreasoned = {key: value for key, value in headers.items() if key != "X-Operator-Reason"}
    assert_problem(post(web, f"/v1/panel/access-codes/{row['accessCode']['id']}/revoke", unreasoned), 400,
                   "reason_required")  # fmt: skip
    reader = {**api.session_of(web, "reader", ["payments.read"]), **api.REASON}
    assert_problem(post(web, f"/v1/panel/access-codes/{row['accessCode']['id']}/revoke", reader), 403, "forbidden")
    assert_problem(post(web, "/v1/panel/access-codes", reader, {"planId": plan.id, "maxActivations": 1}), 403,
                   "forbidden")  # fmt: skip
    assert_problem(post(web, "/v1/panel/access-codes/nope/revoke", headers), 404, "access_code_not_found")
    assert (AccessCode.select().count(), GiftCard.select().count()) == (1, 0)
    assert AccessCode.get().revoked_at is None
    assert AuditEvent.select().where(AuditEvent.action.endswith(".revoked")).count() == 0


def test_customers_are_found_by_a_name_in_any_script_and_any_case_in_rows_led_by_the_name(web, shop_world):
    dev = sales.customer("Dev User", "dev_user")
    ivan = sales.customer("Иван Петров", None)
    straße = sales.customer("Straße Ölmann", None)
    sales.customer("Bob", "bob_other")
    headers = api.session_of(web)
    expected = {
        "Dev User": [dev.id], "dev user": [dev.id], "DEV": [dev.id], "dev  user": [dev.id],
        "Иван": [ivan.id], "ИВАН": [ivan.id], "иван петров": [ivan.id],
        "STRASSE": [straße.id], "straße ö": [straße.id], "Петров": [], "Devx": [],
    }  # fmt: skip
    for text, ids in expected.items():
        answer = requests.get(web + "/v1/panel/customers", headers=headers, params={"q": text}, timeout=10)
        assert answer.status_code == 200 and [c["id"] for c in answer.json()["customers"]] == ids, text
    found = page(web, "/panel/customers", headers, q="ИВАН")
    assert found.status_code == 200 and f'data-customer="{ivan.id}"' in found.text
    buyer = shop_world["customer"]
    row = page(web, "/panel/customers", headers, q="alice SHOPPER").text
    cells = re.search(rf'<tr data-customer="{buyer.id}">(.*?)</tr>', row, re.DOTALL).group(1)
    assert re.search(r"<td><a [^>]*>Alice Shopper</a>", cells)  # the row leads with the name
    assert 'data-phase="active"' in cells and "Monthly" in cells and "500.00 RUB" in cells


def test_a_renamed_telegram_customer_is_found_by_the_new_name_only(database):
    customer, _ = customer_for_telegram(TelegramIdentity(777, "Old", "Name", "ren"), "en")
    assert Customer.get_by_id(customer.id).search_name == "old name"
    customer_for_telegram(TelegramIdentity(777, "ÉLODIE", "Новая", "ren"), "en")
    assert Customer.get_by_id(customer.id).search_name == "élodie новая"


def test_the_customer_timeline_lists_orders_payments_operations_notices_and_support_newest_first(web, shop_world):
    buyer = shop_world["customer"]
    later = utcnow() + datetime.timedelta(minutes=1)
    CustomerNotice.create(customer=buyer.id, kind="dunning", dedupe_key="d1", created_at=later)
    customer_writes(buyer.id, buyer.telegram_id, "My VPN is slow")
    SupportMessage.update(created_at=later + datetime.timedelta(minutes=1)).execute()
    text = page(web, f"/panel/customers/{buyer.id}", api.session_of(web)).text
    table = re.search(r'<table id="timeline">(.*?)</table>', text, re.DOTALL).group(1)
    kinds = re.findall(r'data-timeline="(\w+)"', table)
    assert kinds[:2] == ["support", "notice"] and {"order", "payment", "operation"} <= set(kinds)
    assert kinds.count("order") == Order.select().where(Order.customer == buyer.id).count()
    times = re.findall(r'<td class="muted">([^<]+)</td>', table)
    assert len(times) == len(kinds) and times == sorted(times, reverse=True)
    assert f'href="/panel/orders/{shop_world["order"].id}"' in table and "customer: My VPN is slow" in table
    reader = page(web, f"/panel/customers/{buyer.id}", api.session_of(web, "r", ["subscriptions.read"])).text
    shown = re.findall(r'data-timeline="(\w+)"', re.search(r'<table id="timeline">(.*?)</table>', reader,
                                                            re.DOTALL).group(1))  # fmt: skip
    assert "order" not in shown and "support" not in shown and "notice" in shown
