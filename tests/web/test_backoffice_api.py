"""SPEC 13.14: the panel API of the shop's back office — customers found by what an
operator knows, their subscriptions with phase, orders, payments and wallet linked
to each other and to their operations, Home's figures in the operator's time zone,
and refund, pause and resume with a reason and an audit event."""

import base64
import datetime
import json
import zoneinfo

import pytest
import requests

from commerce import ledger
from commerce.orders import create_order
from fulfillment import repair
from models.base import db, utcnow
from models.commerce import Customer, Order
from models.fulfillment import Entitlement, FulfillmentOperation
from models.jobs import Job
from models.ledger import LedgerTransaction
from models.operators import Operator
from models.ops import AuditEvent, OutboxEvent
from models.payments import ProviderWebhookEvent
from tests.support import sales
from tests.web import test_panel_api as api
from tests.web.test_admin_api import assert_problem
from tests.web.test_openapi import check

pytestmark = pytest.mark.usefixtures("ledger_invariant")

REASON = api.REASON


def get(web, path, headers, **params):
    answer = requests.get(web + path, headers=headers, params=params, timeout=10)
    return answer


def described(answer, template, method="get"):
    """The answer, after checking it against the OpenAPI description."""
    check(answer, template, method)
    return answer


# -- customers ----------------------------------------------------------------------------------


def test_a_customer_is_found_by_id_telegram_id_telegram_username_and_panel_username(web, shop_world):
    headers = api.session_of(web)
    buyer = shop_world["customer"]
    sales.customer("Bob", "bob_other")
    for text in (buyer.id, str(buyer.telegram_id), "@alice_shop", "ALICE_SHOP", "omniflow_a1b2c3d4e5f60718"):
        answer = described(get(web, "/v1/panel/customers", headers, q=text), "/v1/panel/customers")
        assert answer.status_code == 200, text
        assert [c["id"] for c in answer.json()["customers"]] == [buyer.id], text
        assert answer.json()["nextCursor"] is None
    assert get(web, "/v1/panel/customers", headers, q="nobody_here").json()["customers"] == []


@pytest.mark.parametrize("text", ["x" * 65, "a\x00b", "a\tb", "\u200b"])
def test_search_input_that_can_name_no_customer_is_a_400_invalid_search(web, shop_world, text):
    answer = get(web, "/v1/panel/customers", api.session_of(web), q=text)
    assert_problem(described(answer, "/v1/panel/customers"), 400, "invalid_search")


def test_a_search_text_that_reads_as_sql_or_a_pattern_is_only_a_name_that_matches_nobody(web, shop_world):
    headers = api.session_of(web)
    for text in ("' OR 1=1 --", "%", "_", "a;b"):
        answer = described(get(web, "/v1/panel/customers", headers, q=text), "/v1/panel/customers")
        assert answer.status_code == 200 and answer.json()["customers"] == [], text


def test_without_a_search_customers_page_newest_first_through_every_one_once(web, database):
    headers = api.session_of(web)
    made = [sales.customer(f"c{n}", f"user_{n}") for n in range(5)]
    same_moment = utcnow()
    Customer.update(created_at=same_moment).where(Customer.id.in_([c.id for c in made[1:3]])).execute()
    seen, cursor = [], None
    while True:
        params = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        body = described(get(web, "/v1/panel/customers", headers, **params), "/v1/panel/customers").json()
        seen += [row["id"] for row in body["customers"]]
        cursor = body["nextCursor"]
        if cursor is None:
            break
    expected = sorted(Customer.select(), key=lambda c: (-c.created_at.timestamp(), c.id))
    assert seen == [c.id for c in expected] and len(seen) == 5
    for bad in ("nope", "YXQ6bm90LWEtdGltZXx4"):
        assert_problem(get(web, "/v1/panel/customers", headers, cursor=bad), 400, "invalid_cursor")


def test_a_cursor_naming_a_number_beyond_any_row_id_is_a_400_everywhere_cursors_are_read(web, shop_world):
    headers = api.session_of(web)
    buyer = shop_world["customer"]
    huge = base64.urlsafe_b64encode(b"id:999999999999999999999").decode().rstrip("=")
    for path in (
        "/v1/panel/system/jobs",
        f"/v1/panel/customers/{buyer.id}/orders",
        f"/v1/panel/customers/{buyer.id}/payments",
        f"/v1/panel/customers/{buyer.id}/wallet",
    ):
        assert_problem(get(web, path, headers, cursor=huge), 400, "invalid_cursor")
    for path, name in (
        ("/panel/system/operations", "cursor"),
        (f"/panel/customers/{buyer.id}", "ordersCursor"),
        (f"/panel/customers/{buyer.id}", "paymentsCursor"),
        (f"/panel/customers/{buyer.id}", "walletCursor"),
        ("/panel/campaigns", "cursor"),
    ):
        answer = requests.get(web + path, headers=headers, params={name: huge}, timeout=10)
        assert answer.status_code == 400, (path, name, answer.status_code)


def test_a_customer_answer_carries_each_subscription_with_its_phase_end_and_limits(web, shop_world):
    headers = api.session_of(web)
    buyer = shop_world["customer"]
    answer = described(get(web, f"/v1/panel/customers/{buyer.id}", headers), "/v1/panel/customers/{customerID}")
    body = answer.json()
    assert body["customer"]["telegramId"] == buyer.telegram_id
    assert body["customer"]["telegramUsername"] == "Alice_Shop"
    first, second = body["subscriptions"]
    entitlement = Entitlement.get_by_id(shop_world["settlement"].entitlement_id)
    assert (first["slot"], first["phase"], first["panelUsername"]) == (1, "active", "omniflow_a1b2c3d4e5f60718")
    assert first["endsAt"] == entitlement.ends_at.isoformat() + "Z"
    assert (first["trafficLimitBytes"], first["deviceLimit"]) == (100 << 30, 3)
    assert first["planName"] == shop_world["plan"].name
    assert (second["slot"], second["phase"]) == (2, "provisioning")


def test_unknown_and_malformed_ids_are_a_404_and_a_400(web, shop_world):
    headers = api.session_of(web)
    cases = [
        ("/v1/panel/customers/{}", "/v1/panel/customers/{customerID}", "customer"),
        ("/v1/panel/customers/{}/orders", "/v1/panel/customers/{customerID}/orders", "customer"),
        ("/v1/panel/customers/{}/payments", "/v1/panel/customers/{customerID}/payments", "customer"),
        ("/v1/panel/customers/{}/wallet", "/v1/panel/customers/{customerID}/wallet", "customer"),
        ("/v1/panel/subscriptions/{}", "/v1/panel/subscriptions/{subscriptionID}", "subscription"),
    ]
    for path, template, what in cases:
        assert_problem(described(get(web, path.format("nobody"), headers), template), 404, f"{what}_not_found")
        assert_problem(described(get(web, path.format("x" * 65), headers), template), 400, f"invalid_{what}_id")
    for path, template, what in (
        ("/v1/panel/orders/{}", "/v1/panel/orders/{orderID}", "order"),
        ("/v1/panel/payments/{}", "/v1/panel/payments/{paymentID}", "payment"),
    ):
        assert_problem(described(get(web, path.format(424242), headers), template), 404, f"{what}_not_found")
        for bad in ("abc", "0", "²"):
            assert_problem(described(get(web, path.format(bad), headers), template), 400, f"invalid_{what}_id")


# -- orders, payments, wallet -------------------------------------------------------------------


def test_a_customers_orders_payments_and_wallet_link_to_each_other_and_to_the_operations(web, shop_world):
    headers = api.session_of(web)
    buyer, order, settlement = shop_world["customer"], shop_world["order"], shop_world["settlement"]
    orders = described(
        get(web, f"/v1/panel/customers/{buyer.id}/orders", headers), "/v1/panel/customers/{customerID}/orders"
    ).json()["orders"]
    assert [o["id"] for o in orders] == [shop_world["topup"].id, shop_world["waiting"].id, order.id]
    paid = orders[-1]
    assert (paid["kind"], paid["status"], paid["amountMinor"], paid["currency"]) == (
        "purchase",
        "fulfilled",
        29900,
        "RUB",
    )
    assert paid["operationIds"] == [settlement.operation_id]
    assert orders[0]["operationIds"] == []  # a top-up provisions nothing

    payments = described(
        get(web, f"/v1/panel/customers/{buyer.id}/payments", headers), "/v1/panel/customers/{customerID}/payments"
    ).json()["payments"]
    assert [(p["orderId"], p["provider"]) for p in payments] == [
        (shop_world["waiting"].id, "cryptobot"),
        (order.id, "yookassa"),
    ]

    wallet = described(
        get(web, f"/v1/panel/customers/{buyer.id}/wallet", headers), "/v1/panel/customers/{customerID}/wallet"
    ).json()
    assert wallet["balances"] == [{"currency": "RUB", "amountMinor": 50000}]
    assert [(h["kind"], h["amountMinor"], h["orderId"]) for h in wallet["history"]] == [
        ("topup", 50000, shop_world["topup"].id)
    ]


def test_an_order_answer_carries_its_payments_ledger_and_operations(web, shop_world):
    headers = api.session_of(web)
    order, settlement = shop_world["order"], shop_world["settlement"]
    body = described(get(web, f"/v1/panel/orders/{order.id}", headers), "/v1/panel/orders/{orderID}").json()
    assert body["order"]["subscriptionId"] == shop_world["subscription"].id
    assert [p["id"] for p in body["payments"]] == [shop_world["intent"].id]
    (sale,) = body["ledger"]
    assert sale["kind"] == "purchase"
    assert sorted((e["account"], e["amountMinor"]) for e in sale["entries"]) == [
        ("provider_clearing:yookassa", -29900),
        ("revenue", 29900),
    ]
    assert [(op["id"], op["correlationId"]) for op in body["operations"]] == [
        (settlement.operation_id, f"order:{order.id}")
    ]


def test_a_payment_answer_lists_its_deliveries_and_never_their_bodies(web, shop_world):
    headers = api.session_of(web)
    intent = shop_world["intent"]
    ProviderWebhookEvent.create(
        provider="yookassa",
        provider_event_id="evt-1",
        signature_ok=True,
        processed_at=utcnow(),
        outcome="settled",
        payment_intent=intent.id,
        retain_until=utcnow() + datetime.timedelta(days=30),
        body=b'{"card": "4111 1111 1111 1111"}',
    )
    answer = described(get(web, f"/v1/panel/payments/{intent.id}", headers), "/v1/panel/payments/{paymentID}")
    body = answer.json()
    assert body["payment"]["orderId"] == shop_world["order"].id
    assert [(d["providerEventId"], d["outcome"], d["signatureOk"]) for d in body["deliveries"]] == [
        ("evt-1", "settled", True)
    ]
    assert "4111" not in answer.text


def test_a_subscription_answer_carries_its_periods_and_operations_without_succeeded_reconciles(web, shop_world):
    headers = api.session_of(web)
    subscription, settlement = shop_world["subscription"], shop_world["settlement"]
    for status in ("succeeded", "retrying"):
        FulfillmentOperation.create(
            entitlement=settlement.entitlement_id,
            operation="reconcile",
            status=status,
            idempotency_key=f"reconcile:{settlement.entitlement_id}:{status}",
            desired_state="{}",
            correlation_id="scheduler:1",
        )
    answer = described(
        get(web, f"/v1/panel/subscriptions/{subscription.id}", headers), "/v1/panel/subscriptions/{subscriptionID}"
    )
    body = answer.json()
    assert body["subscription"]["phase"] == "active"
    assert [e["orderId"] for e in body["entitlements"]] == [shop_world["order"].id]
    assert [(op["operation"], op["status"]) for op in body["operations"]] == [
        ("reconcile", "retrying"),
        ("create", "succeeded"),
    ]


# -- Home ---------------------------------------------------------------------------------------

TOKYO = zoneinfo.ZoneInfo("Asia/Tokyo")  # UTC+9 all year: no daylight saving time to reason about


def posted_at(transaction, moment):
    LedgerTransaction.update(created_at=moment).where(LedgerTransaction.id == transaction.id).execute()


def test_home_revenue_is_net_per_currency_from_the_ledger_for_today_and_this_month_in_the_operators_zone(web, database):
    headers = api.session_of(web)
    assert requests.put(
        web + "/v1/panel/session/time-zone", headers=headers, json={"timeZone": "Asia/Tokyo"}, timeout=10
    ).ok
    buyer, plan = sales.customer(), sales.plan()
    local_midnight = datetime.datetime.now(TOKYO).replace(hour=0, minute=0, second=0, microsecond=0)
    midnight = local_midnight.astimezone(datetime.timezone.utc).replace(tzinfo=None)
    month_began = local_midnight.replace(day=1).astimezone(datetime.timezone.utc).replace(tzinfo=None)
    minute = datetime.timedelta(minutes=1)
    rub_today, _, _ = sales.paid_order(buyer, plan, "RUB")
    usd_today, _, _ = sales.paid_order(buyer, plan, "USD", provider="cryptobot")
    before_midnight, _, _ = sales.paid_order(buyer, plan, "RUB")  # 9 hours before UTC's midnight: yesterday in Tokyo
    last_month, _, _ = sales.paid_order(buyer, plan, "RUB")
    for order, moment in ((rub_today, midnight + minute), (before_midnight, midnight - minute)):
        posted_at(LedgerTransaction.get(LedgerTransaction.order == order.id), moment)
    posted_at(LedgerTransaction.get(LedgerTransaction.order == last_month.id), month_began - minute)
    with db.atomic():
        refund = ledger.reverse(LedgerTransaction.get(LedgerTransaction.order == usd_today.id), 99)
    sales.topped_up(buyer, 100000)  # money the shop owes the customer: no revenue until it is spent

    body = described(get(web, "/v1/panel/overview", headers), "/v1/panel/overview").json()
    assert body["timeZone"] == "Asia/Tokyo"
    assert body["date"] == local_midnight.date().isoformat()
    assert body["revenue"]["today"] == [
        {"currency": "RUB", "amountMinor": 29900},
        {"currency": "USD", "amountMinor": 399 - 99},
    ]
    month_rub = 29900 * (2 if midnight - minute >= month_began else 1)  # on the 1st, yesterday was last month
    assert body["revenue"]["month"] == [
        {"currency": "RUB", "amountMinor": month_rub},
        {"currency": "USD", "amountMinor": 300},
    ]
    assert refund.kind == "refund"


def test_home_counts_new_customers_active_subscriptions_failing_operations_and_queue_health(web, shop_world):
    headers = api.session_of(web)
    old = sales.customer("Old", "old_one")
    Customer.update(created_at=utcnow() - datetime.timedelta(days=40)).where(Customer.id == old.id).execute()
    failed = api.operation_in("failed")  # a create: its subscription is paid and without access
    api.operation_in("retrying")
    OutboxEvent.delete().execute()
    body = described(get(web, "/v1/panel/overview", headers), "/v1/panel/overview").json()
    new = Customer.select().where(Customer.created_at >= utcnow() - datetime.timedelta(minutes=5)).count()
    assert body["customers"]["newToday"] == new and body["customers"]["newThisMonth"] == new
    without_access = FulfillmentOperation.get_by_id(failed).entitlement.subscription_id
    assert body["subscriptions"] == {"active": 1, "withoutAccess": 1, "withoutAccessIds": [without_access]}
    assert body["operations"] == {"failed": 1, "retrying": 1}
    queue = body["queue"]
    assert queue["available"] == Job.select().where(Job.state == "available").count() > 0
    assert (queue["deadLetters"], queue["outboxPending"], queue["maintenance"]) == (0, 0, False)


@pytest.mark.parametrize(
    "permissions, shown",
    [
        ([], set()),
        (["payments.read"], {"revenue"}),
        (["subscriptions.read"], {"customers", "subscriptions"}),
        (["system.read"], {"operations", "queue"}),
    ],
)
def test_home_shows_each_section_only_with_its_permission(web, database, permissions, shown):
    body = get(web, "/v1/panel/overview", api.session_of(web, permissions=permissions)).json()
    sections = {"revenue", "customers", "subscriptions", "operations", "queue"}
    assert {name for name in sections if body[name] is not None} == shown


# -- time zone ----------------------------------------------------------------------------------


def test_an_operator_sets_their_own_time_zone_audited_and_a_wrong_one_is_a_400(web, database):
    headers = api.session_of(web)
    url = web + "/v1/panel/session/time-zone"
    assert described(requests.get(url, headers=headers, timeout=10), "/v1/panel/session/time-zone").json() == {
        "timeZone": "UTC"
    }
    answer = requests.put(url, headers=headers, json={"timeZone": "Europe/Moscow"}, timeout=10)
    assert described(answer, "/v1/panel/session/time-zone", "put").json() == {"timeZone": "Europe/Moscow"}
    assert Operator.get(Operator.username == "alice").time_zone == "Europe/Moscow"
    audit = AuditEvent.get(AuditEvent.action == "operator.time_zone_changed")
    assert (audit.actor, json.loads(audit.details)) == ("operator:alice", {"timeZone": "Europe/Moscow"})
    for bad in ({"timeZone": "Mars/Olympus"}, {"timeZone": "../../etc/passwd"}, {"timeZone": 3}, {}):
        answer = requests.put(url, headers=headers, json=bad, timeout=10)
        assert_problem(described(answer, "/v1/panel/session/time-zone", "put"), 400, "invalid_time_zone")
    assert Operator.get(Operator.username == "alice").time_zone == "Europe/Moscow"
    assert AuditEvent.select().where(AuditEvent.action == "operator.time_zone_changed").count() == 1


# -- refunds ------------------------------------------------------------------------------------


def refund(web, headers, order_id, body):
    return requests.post(f"{web}/v1/panel/orders/{order_id}/refund", headers=headers, json=body, timeout=10)


def test_a_full_refund_revokes_access_and_is_audited_with_the_reason(web, shop_world):
    headers = {**api.session_of(web), **REASON}
    order = shop_world["order"]
    answer = described(refund(web, headers, order.id, {}), "/v1/panel/orders/{orderID}/refund", "post")
    assert answer.status_code == 200
    body = answer.json()["order"]
    assert (body["status"], body["refundedAmountMinor"]) == ("refunded", 29900)
    disable = FulfillmentOperation.get(FulfillmentOperation.idempotency_key == f"refund:{order.id}:disable")
    assert disable.id in body["operationIds"]
    audit = AuditEvent.get(AuditEvent.action == "panel.order.refunded")
    assert (audit.category, audit.actor, audit.reason, audit.subject_id) == (
        "payments",
        "operator:alice",
        REASON["X-Operator-Reason"],
        str(order.id),
    )
    (made,) = answer.json()["refunds"]
    assert (made["amountMinor"], made["destination"], made["status"]) == (29900, "provider", "pending")
    assert json.loads(audit.details) == {
        "amountMinor": 29900,
        "currency": "RUB",
        "full": True,
        "refundId": made["id"],
        "destination": "provider",
    }
    shown = requests.get(f"{web}/v1/panel/orders/{order.id}", headers=headers, timeout=10).json()
    assert [r["id"] for r in shown["refunds"]] == [made["id"]]


def test_a_refund_to_the_wallet_credits_it_and_says_so(web, shop_world):
    headers = {**api.session_of(web), **REASON}
    order = shop_world["order"]
    before = ledger.balance(order.customer_id, "RUB")
    answer = described(refund(web, headers, order.id, {"amountMinor": 900, "to": "wallet"}),
                       "/v1/panel/orders/{orderID}/refund", "post")  # fmt: skip
    (made,) = answer.json()["refunds"]
    assert (made["destination"], made["status"]) == ("wallet", "succeeded")
    assert ledger.balance(order.customer_id, "RUB") == before + 900


def test_a_partial_refund_keeps_access_and_refunds_the_rest_in_full_later(web, shop_world):
    headers = {**api.session_of(web), **REASON}
    order = shop_world["order"]
    first = refund(web, headers, order.id, {"amountMinor": 9900}).json()["order"]
    assert (first["status"], first["refundedAmountMinor"]) == ("partially_refunded", 9900)
    assert not FulfillmentOperation.select().where(FulfillmentOperation.operation == "disable").exists()
    assert_problem(refund(web, headers, order.id, {"amountMinor": 20001}), 400, "invalid_refund_amount")
    rest = refund(web, headers, order.id, {"amountMinor": 20000}).json()["order"]
    assert (rest["status"], rest["refundedAmountMinor"]) == ("refunded", 29900)
    assert FulfillmentOperation.select().where(FulfillmentOperation.operation == "disable").count() == 1
    details = [json.loads(a.details) for a in AuditEvent.select().where(AuditEvent.action == "panel.order.refunded")]
    assert [(d["amountMinor"], d["full"]) for d in details] == [(9900, False), (20000, True)]


@pytest.mark.parametrize(
    "body, code",
    [
        ({"amountMinor": 0}, "invalid_refund_amount"),
        ({"amountMinor": -5}, "invalid_refund_amount"),
        ({"amountMinor": 29901}, "invalid_refund_amount"),
        ({"amountMinor": "100"}, "invalid_refund_amount"),
        ({"amountMinor": 1.5}, "invalid_refund_amount"),
        ({"amountMinor": True}, "invalid_refund_amount"),
        ({"to": "bank"}, "invalid_refund_destination"),
        ({"to": ["wallet"]}, "invalid_refund_destination"),
        ([], "invalid_body"),
    ],
)
def test_a_bad_refund_amount_is_a_400_and_changes_nothing(web, shop_world, body, code):
    headers = {**api.session_of(web), **REASON}
    answer = described(refund(web, headers, shop_world["order"].id, body), "/v1/panel/orders/{orderID}/refund", "post")
    assert_problem(answer, 400, code)
    assert Order.get_by_id(shop_world["order"].id).status == "fulfilled"
    assert AuditEvent.select().where(AuditEvent.action == "panel.order.refunded").count() == 0


def test_a_refund_needs_a_reason_and_a_paid_order(web, shop_world):
    cookie = api.session_of(web)
    assert_problem(refund(web, cookie, shop_world["order"].id, {}), 400, "reason_required")
    pending = create_order(shop_world["customer"].id, "purchase", "RUB", plan_id=shop_world["plan"].id)
    answer = refund(web, {**cookie, **REASON}, pending.id, {})
    assert_problem(described(answer, "/v1/panel/orders/{orderID}/refund", "post"), 409, "order_not_refundable")
    assert_problem(refund(web, {**cookie, **REASON}, 424242, {}), 404, "order_not_found")
    assert {o.status for o in Order.select()} == {"fulfilled", "paid", "pending"}
    assert AuditEvent.select().where(AuditEvent.action == "panel.order.refunded").count() == 0


# -- pause and resume ---------------------------------------------------------------------------


def pause_or_resume(web, headers, shop_world, action, request_id="form-1"):
    url = f"{web}/v1/panel/customers/{shop_world['customer'].id}/subscriptions/{shop_world['subscription'].id}/{action}"
    return requests.post(url, headers=headers, json={"requestId": request_id}, timeout=10)


def test_pause_and_resume_queue_disable_and_enable_audited_and_a_double_submit_queues_once(web, shop_world):
    headers = {**api.session_of(web), **REASON}
    template = "/v1/panel/customers/{customerID}/subscriptions/{subscriptionID}/"
    paused = described(pause_or_resume(web, headers, shop_world, "pause"), template + "pause", "post")
    assert paused.status_code == 202 and paused.json()["operation"] == "disable"
    again = pause_or_resume(web, headers, shop_world, "pause")
    assert (again.status_code, again.json()["operationId"]) == (202, paused.json()["operationId"])
    assert_problem(pause_or_resume(web, headers, shop_world, "pause", "form-2"), 409, "already_paused")
    subscription_id = shop_world["subscription"].id
    body = get(web, f"/v1/panel/customers/{shop_world['customer'].id}", headers).json()
    assert body["subscriptions"][0]["phase"] == "paused"

    resumed = described(pause_or_resume(web, headers, shop_world, "resume"), template + "resume", "post")
    assert resumed.status_code == 202 and resumed.json()["operation"] == "enable"
    panel_audits = AuditEvent.select().where(AuditEvent.action.startswith("panel.")).order_by(AuditEvent.id)
    assert [(a.action, a.actor, a.reason, a.subject_id) for a in panel_audits] == [
        ("panel.subscription.paused", "operator:alice", REASON["X-Operator-Reason"], subscription_id),
        ("panel.subscription.resumed", "operator:alice", REASON["X-Operator-Reason"], subscription_id),
    ]


def test_pause_and_resume_need_a_reason_a_request_id_and_a_provisioned_subscription(web, shop_world):
    cookie = api.session_of(web)
    assert_problem(pause_or_resume(web, cookie, shop_world, "pause"), 400, "reason_required")
    url = f"{web}/v1/panel/customers/{shop_world['customer'].id}/subscriptions/{shop_world['subscription'].id}/pause"
    assert_problem(requests.post(url, headers={**cookie, **REASON}, json={}, timeout=10), 400, "request_id_required")
    assert_problem(pause_or_resume(web, {**cookie, **REASON}, shop_world, "resume"), 409, "not_paused")
    other = sales.customer("Mallory", "mallory")
    url = f"{web}/v1/panel/customers/{other.id}/subscriptions/{shop_world['subscription'].id}/pause"
    answer = requests.post(url, headers={**cookie, **REASON}, json={"requestId": "x"}, timeout=10)
    assert_problem(answer, 404, "subscription_not_found")
    waiting = Entitlement.get_by_id(shop_world["waiting_settlement"].entitlement_id).subscription_id
    url = f"{web}/v1/panel/customers/{shop_world['customer'].id}/subscriptions/{waiting}/pause"
    answer = requests.post(url, headers={**cookie, **REASON}, json={"requestId": "x"}, timeout=10)
    assert_problem(answer, 409, "not_provisioned")
    assert not FulfillmentOperation.select().where(FulfillmentOperation.operation.in_(("disable", "enable"))).exists()
    assert AuditEvent.select().where(AuditEvent.action.startswith("panel.")).count() == 0


# -- re-provision -------------------------------------------------------------------------------


def reprovision(web, headers, customer_id, subscription_id, request_id="form-1"):
    url = f"{web}/v1/panel/customers/{customer_id}/subscriptions/{subscription_id}/reprovision"
    return requests.post(url, headers=headers, json={"requestId": request_id}, timeout=10)


def test_a_paid_subscription_whose_create_was_cancelled_stays_on_home_until_a_reprovision_queues_a_new_create(
    web, shop_world
):
    cookie = api.session_of(web)
    headers = {**cookie, **REASON}
    customer_id, waiting = shop_world["customer"].id, shop_world["waiting_settlement"]
    subscription_id = Entitlement.get_by_id(waiting.entitlement_id).subscription_id
    with db.atomic():
        repair.cancel_operation(waiting.operation_id, "operator:alice", "the advice says so")
    home = described(get(web, "/v1/panel/overview", headers), "/v1/panel/overview").json()
    assert home["operations"]["failed"] == 0  # cancelled: no failing operation is left to show it
    assert (home["subscriptions"]["withoutAccess"], home["subscriptions"]["withoutAccessIds"]) == (1, [subscription_id])

    template = "/v1/panel/customers/{customerID}/subscriptions/{subscriptionID}/reprovision"
    queued = described(reprovision(web, headers, customer_id, subscription_id), template, "post")
    assert queued.status_code == 202 and (queued.json()["operation"], queued.json()["status"]) == ("create", "pending")
    again = reprovision(web, headers, customer_id, subscription_id)
    assert (again.status_code, again.json()["operationId"]) == (202, queued.json()["operationId"])
    operation = FulfillmentOperation.get_by_id(queued.json()["operationId"])
    assert operation.entitlement_id == waiting.entitlement_id and operation.id != waiting.operation_id
    assert operation.id in [job.args_dict["operationId"] for job in Job.select().where(Job.kind == "fulfillment")]
    [audit] = AuditEvent.select().where(AuditEvent.action == "panel.subscription.reprovisioned")
    assert (audit.actor, audit.reason, audit.subject_id) == (
        "operator:alice",
        REASON["X-Operator-Reason"],
        subscription_id,
    )
    home = get(web, "/v1/panel/overview", headers).json()
    assert home["subscriptions"]["withoutAccess"] == 0  # provisioning again

    assert_problem(reprovision(web, headers, customer_id, subscription_id, "form-2"), 409, "not_failed")
    assert_problem(reprovision(web, headers, customer_id, shop_world["subscription"].id), 409, "not_failed")
    assert_problem(reprovision(web, cookie, customer_id, subscription_id, "form-3"), 400, "reason_required")
    other = sales.customer("Mallory", "mallory")
    assert_problem(reprovision(web, headers, other.id, subscription_id, "form-4"), 404, "subscription_not_found")
    assert FulfillmentOperation.select().where(FulfillmentOperation.entitlement == waiting.entitlement_id).count() == 2


def test_a_bought_gift_is_shown_to_operators_as_a_fulfilled_order_and_its_code_nowhere(web, database, data_key):
    from commerce import codes
    from models.ops import CustomerNotice
    from tests.web.test_pages import page

    buyer = sales.customer("Gift Buyer", "gift_buyer")
    order, _, intent = sales.paid_order(buyer, sales.plan(), kind="gift")
    code = CustomerNotice.get().secret
    headers = api.session_of(web)
    answers = [
        described(get(web, f"/v1/panel/orders/{order.id}", headers), "/v1/panel/orders/{orderID}"),
        described(get(web, f"/v1/panel/customers/{buyer.id}", headers), "/v1/panel/customers/{customerID}"),
        get(web, f"/v1/panel/customers/{buyer.id}/orders", headers),
        get(web, f"/v1/panel/customers/{buyer.id}/payments", headers),
        get(web, f"/v1/panel/payments/{intent.id}", headers),
        page(web, f"/panel/customers/{buyer.id}", headers),
        page(web, f"/panel/orders/{order.id}", headers),
        page(web, f"/panel/payments/{intent.id}", headers),
    ]
    for answer in answers:
        assert answer.status_code == 200, answer.url
        for form in (code, codes.normalise(code)):
            assert form not in answer.text, answer.url
    shown = answers[0].json()["order"]
    assert (shown["kind"], shown["status"], answers[0].json()["operations"]) == ("gift", "fulfilled", [])
