"""SPEC 4.4: the pages an operator uses, with the API's permissions, and nothing on
them that must not be shown (rendered by the real server, read as HTML)."""

import json
import re
from pathlib import Path

import pytest
import requests

from jobs import JobInsert, insert_many
from models.base import utcnow
from models.fulfillment import EntitlementDrift, FulfillmentHistory, FulfillmentOperation
from models.jobs import Job
from ops import outbox
from ops.records import emit_event
from tests.web import test_panel_api as api
from web.pages import drift_value

ROOT = Path(__file__).resolve().parents[2]
SHOP_NAVIGATION = [
    "Home", "Customers", "Orders", "Payments", "Codes", "Goods", "Plans", "Campaigns", "Bulk actions", "Support",
]  # fmt: skip
NAVIGATION = ["Operations", "Drift", "Outbox", "Blocklists", "Queue", "Anomalies", "Operators"]
PAGES = [
    "/panel/system/operations",
    "/panel/system/drift",
    "/panel/system/outbox",
    "/panel/system/blocklists",
    "/panel/system/queue",
    "/panel/system/anomalies",
]
WEBHOOK_SECRET = "whsec_bGVha3ktd2ViaG9vay1zaWduaW5nLXNlY3JldC0wMDE="


def page(web, path, headers=None, **params):
    return requests.get(web + path, headers=headers or {}, params=params, timeout=10, allow_redirects=False)


def test_without_a_session_every_page_sends_the_browser_to_the_login_page(web):
    for path in PAGES + ["/panel/system/operations/1"]:
        answer = page(web, path)
        assert answer.status_code == 303 and answer.headers["Location"].endswith("/panel/login")
    login = page(web, "/panel/login")
    assert login.status_code == 200 and 'id="login"' in login.text


def test_the_navigation_is_shop_then_system_as_the_readme_names_them(web):
    headers = api.session_of(web)
    shop_pages = [
        "/panel", "/panel/customers", "/panel/orders", "/panel/payments", "/panel/codes", "/panel/goods",
        "/panel/plans", "/panel/campaigns", "/panel/bulk-actions", "/panel/support",
    ]  # fmt: skip
    for path, title in zip(shop_pages + PAGES + ["/panel/operators"], SHOP_NAVIGATION + NAVIGATION, strict=True):
        text = page(web, path, headers).text
        shop, system = re.findall(r"<nav[^>]*>(.*?)</nav>", text, re.DOTALL)
        assert ">Shop<" in shop and re.findall(r">([^<>]+)</a>", shop) == SHOP_NAVIGATION
        assert ">System<" in system and re.findall(r">([^<>]+)</a>", system) == NAVIGATION
        assert f"<title>{title} · Omniflow</title>" in text
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for section, navigation in (("System", NAVIGATION), ("Shop", SHOP_NAVIGATION)):
        named = re.findall(rf"{section} → \**(\w+)", readme)
        assert named and set(named) <= set(navigation), section


@pytest.mark.parametrize("permissions", [[], ["system.write"], ["subscriptions.read", "subscriptions.write"]])
def test_without_system_read_every_page_is_403(web, permissions):
    headers = api.session_of(web, permissions=permissions)
    for path in PAGES:
        answer = page(web, path, headers)
        assert answer.status_code == 403 and "system.read" in answer.text


def test_operations_page_lists_failed_operations_with_retry_and_cancel_for_writers_only(web):
    failed = api.operation_in("failed")
    api.operation_in("succeeded")
    writer = api.session_of(web, "writer", ["system.read", "system.write"])
    text = page(web, "/panel/system/operations", writer).text
    assert f'data-operation="{failed}"' in text and "remnawave_unavailable" in text
    assert f"/v1/panel/system/jobs/{failed}/retry" in text and f"/v1/panel/system/jobs/{failed}/cancel" in text
    reader = api.session_of(web, "reader", ["system.read"])
    text = page(web, "/panel/system/operations", reader).text
    assert f'data-operation="{failed}"' in text and "/retry" not in text
    assert page(web, "/panel/system/operations", reader, status="succeeded").text.count("data-operation=") == 1


def test_history_page_shows_every_attempt(web):
    op_id = api.operation_in("retrying")
    for attempt in (1, 2):
        FulfillmentHistory.create(
            operation=op_id, attempt=attempt, status="retrying", error_code="remnawave_unavailable", correlation_id="c"
        )
    text = page(web, f"/panel/system/operations/{op_id}", api.session_of(web)).text
    assert text.count("<tr><td>") == 2 and "remnawave_unavailable" in text


def test_drift_outbox_and_queue_pages_show_their_rows(web):
    op_id = api.operation_in("failed")
    entitlement_id = FulfillmentOperation.get_by_id(op_id).entitlement_id
    EntitlementDrift.create(
        entitlement=entitlement_id,
        kind="device_limit",
        expected=json.dumps({"value": 3}),
        observed=json.dumps({"value": 5}),
    )
    emit_event("order.paid", {"orderId": 7, "email": "customer@example.com"})
    insert_many([JobInsert("t_record", {"n": n}) for n in range(3)])
    first = Job.select().order_by(Job.id).first()
    Job.update(state="discarded", finalized_at=utcnow()).where(Job.id == first.id).execute()
    Job.update(state="completed", finalized_at=utcnow()).where(Job.id != first.id).execute()
    headers = api.session_of(web)
    drift = page(web, "/panel/system/drift", headers).text
    assert "device_limit" in drift and ">3<" in drift and ">5<" in drift
    outbox = page(web, "/panel/system/outbox", headers).text
    assert "order.paid" in outbox and "customer@example.com" not in outbox and "orderId" not in outbox
    queue = page(web, "/panel/system/queue", headers).text
    assert 'id="dead-letters"' in queue and f"<td>{first.id}</td>" in queue
    completed = Job.select().where(Job.state == "completed").count()
    assert f"{completed} completed</title>" in queue and "1 failed</title>" in queue  # this minute's bars


def test_no_page_shows_a_subscription_link_squad_ids_a_token_or_a_summary(web):
    op_id = api.with_secrets(api.operation_in("failed"))
    op = FulfillmentOperation.get_by_id(op_id)
    EntitlementDrift.create(
        entitlement=op.entitlement_id,
        kind="squads",
        expected=json.dumps({"value": [api.SQUAD_UUID]}),
        observed=json.dumps({"value": []}),
    )
    emit_event("order.paid", {"subscriptionUrl": api.SUBSCRIPTION_URL})
    outbox.add_destination("https://hooks.example.net/in/leaky-path-token", "*", WEBHOOK_SECRET, "test", "leak check")
    job_id = insert_many([JobInsert("t_record", {"n": 1, "link": api.SUBSCRIPTION_URL})])[0].job_id
    Job.update(
        state="discarded",
        finalized_at=utcnow(),
        attempt=1,
        errors=json.dumps(
            [{"attempt": 1, "at": utcnow().isoformat(), "error": f"boom {api.SUBSCRIPTION_URL} {api.BEARER}"}]
        ),
    ).where(Job.id == job_id).execute()
    headers = api.session_of(web)
    answers = [page(web, path, headers) for path in PAGES + [f"/panel/system/operations/{op_id}", "/panel/login"]]
    assert "1 squads" in answers[1].text
    for answer in answers:
        assert answer.status_code == 200
        for secret in (
            api.SUBSCRIPTION_URL,
            api.SQUAD_UUID,
            api.BEARER,
            "leaky-token-value",
            WEBHOOK_SECRET,
            WEBHOOK_SECRET[len("whsec_") :],
            "leaky-path-token",
        ):
            assert secret not in answer.text, (answer.url, secret)


def test_a_device_limit_drift_tells_the_panels_null_from_its_zero():
    assert drift_value("device_limit", json.dumps({"value": 0})) == "unlimited"
    assert drift_value("device_limit", json.dumps({"value": None})) == "panel fallback"
    assert drift_value("device_limit", json.dumps({"value": 3})) == "3"
    assert drift_value("traffic", json.dumps({"value": None})) == "unlimited"


PROVIDER_SECRET = "live_sk_9f8e7d6c5b4a39281706f5e4d3c2b1a0"
CARD_NUMBERS = ("4111 1111 1111 1111", "4111111111111111")


def test_no_shop_page_or_answer_shows_a_link_a_provider_secret_a_card_number_squad_ids_or_a_desired_state(web):
    from models.commerce import Subscription
    from models.fulfillment import Entitlement
    from models.payments import PaymentIntent, ProviderWebhookEvent
    from tests.support import commerce, sales

    buyer, plan = sales.customer(), sales.plan()
    order, settlement, intent = sales.paid_order(buyer, plan)
    subscription = sales.provision(settlement)
    sales.topped_up(buyer, 1000)
    observed = json.dumps({"subscriptionUrl": api.SUBSCRIPTION_URL, "squads": [api.SQUAD_UUID], "status": "ACTIVE"})
    Subscription.update(observed_state=observed).where(Subscription.id == subscription.id).execute()
    Entitlement.update(observed_state=observed).where(Entitlement.id == settlement.entitlement_id).execute()
    api.with_secrets(settlement.operation_id)
    PaymentIntent.update(confirmation_url=f"https://pay.example/confirm?token={PROVIDER_SECRET}").where(
        PaymentIntent.id == intent.id
    ).execute()
    ProviderWebhookEvent.create(
        provider="yookassa",
        provider_event_id="evt-leak",
        signature_ok=False,
        outcome="bad_signature",
        payment_intent=intent.id,
        retain_until=utcnow(),
        body=json.dumps({"card": CARD_NUMBERS[0], "secret": PROVIDER_SECRET, "url": api.SUBSCRIPTION_URL}).encode(),
    )
    emit_event("order.paid", {"subscriptionUrl": api.SUBSCRIPTION_URL, "card": CARD_NUMBERS[1]})
    # A campaign that reached the buyer and a ticket of theirs: their pages name the customer, never what the
    # customer's records hold.
    from ops.campaigns import create_campaign
    from ops.support import customer_writes

    campaign = create_campaign("announcement", "Maintenance tonight.", "operator:alice", "leak check")
    ticket = customer_writes(buyer.id, buyer.telegram_id, "Is my access still fine?")[0]
    headers = {**api.session_of(web), **api.REASON}
    pages = [
        "/panel",
        "/panel/customers",
        f"/panel/customers/{buyer.id}",
        f"/panel/subscriptions/{subscription.id}",
        f"/panel/orders/{order.id}",
        f"/panel/payments/{intent.id}",
        "/panel/settings",
        *PAGES,
        f"/panel/system/operations/{settlement.operation_id}",
        "/panel/campaigns",
        f"/panel/campaigns/{campaign.id}",
        "/panel/support",
        f"/panel/support/tickets/{ticket.id}",
    ]
    answers = [page(web, path, headers) for path in pages]
    answers.append(page(web, "/panel/customers", headers, q=subscription.remote_username))
    for path in (
        "/v1/panel/overview",
        f"/v1/panel/customers?q={buyer.telegram_id}",
        f"/v1/panel/customers/{buyer.id}",
        f"/v1/panel/customers/{buyer.id}/orders",
        f"/v1/panel/customers/{buyer.id}/payments",
        f"/v1/panel/customers/{buyer.id}/wallet",
        f"/v1/panel/subscriptions/{subscription.id}",
        f"/v1/panel/orders/{order.id}",
        f"/v1/panel/payments/{intent.id}",
    ):
        answers.append(requests.get(web + path, headers=headers, timeout=10))
    base = f"{web}/v1/panel/customers/{buyer.id}/subscriptions/{subscription.id}"
    answers.append(requests.post(f"{base}/pause", headers=headers, json={"requestId": "leak-1"}, timeout=10))
    answers.append(requests.post(f"{web}/v1/panel/orders/{order.id}/refund", headers=headers, json={}, timeout=10))
    secrets = (api.SUBSCRIPTION_URL, api.BEARER, "leaky-token-value", PROVIDER_SECRET, *CARD_NUMBERS)
    squads = (api.SQUAD_UUID, commerce.SQUAD_A, commerce.SQUAD_B)
    for answer in answers:
        assert answer.status_code in (200, 202), answer.url
        for secret in secrets + squads + ("squadIds", "desiredState", "confirmation"):
            assert secret not in answer.text, (answer.url, secret)


def test_an_unknown_operation_or_a_bad_filter_gets_an_html_page_that_says_why(web):
    cookie = api.session_of(web)
    for path, params, status, said in (
        ("/panel/system/operations/99999", {}, 404, "operation 99999 does not exist"),
        ("/panel/system/operations/abc", {}, 404, "operation abc does not exist"),
        ("/panel/system/operations", {"status": "bogus"}, 400, "a status is one of"),
        ("/panel/system/operations", {"operation": "bogus"}, 400, "an operation is one of"),
    ):
        answer = requests.get(web + path, headers=cookie, params=params, timeout=10)
        assert answer.status_code == status, path
        assert answer.headers["Content-Type"].startswith("text/html") and said in answer.text
