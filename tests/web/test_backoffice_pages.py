"""SPEC 13.14 in the browser's HTML: the shop's pages (Home, Customers, a customer,
a subscription, an order, a payment, Settings), their permissions, their links to
each other and to the operations, error codes explained, and times in the
operator's time zone."""

import datetime
import re

import pytest
from bottle import html_escape

from fulfillment import repair
from models.base import db
from models.commerce import Customer
from models.fulfillment import Entitlement, FulfillmentOperation
from models.operators import Operator
from tests.web import test_panel_api as api
from tests.web.test_pages import page
from web.explanations import CATALOGUE

pytestmark = pytest.mark.usefixtures("ledger_invariant")


def shop_pages(shop_world):
    return {
        "/panel/customers": "subscriptions.read",
        f"/panel/customers/{shop_world['customer'].id}": "subscriptions.read",
        f"/panel/subscriptions/{shop_world['subscription'].id}": "subscriptions.read",
        f"/panel/orders/{shop_world['order'].id}": "payments.read",
        f"/panel/payments/{shop_world['intent'].id}": "payments.read",
        "/panel/orders": "payments.read",
        "/panel/payments": "payments.read",
        "/panel/codes": "payments.read",
    }


def test_without_a_session_every_shop_page_sends_the_browser_to_the_login_page(web, shop_world):
    for path in ["/panel", "/panel/settings", *shop_pages(shop_world)]:
        answer = page(web, path)
        assert answer.status_code == 303 and answer.headers["Location"].endswith("/panel/login"), path


def test_each_shop_page_needs_its_permission_and_home_and_settings_only_a_session(web, shop_world):
    headers = api.session_of(web, permissions=["system.read"])
    for path, permission in shop_pages(shop_world).items():
        answer = page(web, path, headers)
        assert answer.status_code == 403 and permission in answer.text, path
    for path in ("/panel", "/panel/settings"):
        assert page(web, path, headers).status_code == 200


def test_home_shows_revenue_per_currency_in_major_units_and_what_needs_a_permission(web, shop_world):
    everything = page(web, "/panel", api.session_of(web)).text
    assert "299.00 RUB" in everything
    assert 'id="active-subscriptions">1<' in everything
    reader = page(web, "/panel", api.session_of(web, "reader", ["subscriptions.read"])).text
    assert "299.00 RUB" not in reader and "Needs the payments.read permission" in reader


def test_the_customers_page_finds_a_customer_and_says_why_a_search_cannot_match(web, shop_world):
    headers = api.session_of(web)
    found = page(web, "/panel/customers", headers, q="@alice_shop")
    assert found.status_code == 200 and f'data-customer="{shop_world["customer"].id}"' in found.text
    refused = page(web, "/panel/customers", headers, q="x" * 65)
    assert refused.status_code == 400 and 'id="search-error"' in refused.text and "Telegram id" in refused.text
    assert page(web, "/panel/customers", headers).text.count("data-customer=") == 1


def test_the_customer_page_links_subscriptions_orders_payments_wallet_and_operations(web, shop_world):
    text = page(web, f"/panel/customers/{shop_world['customer'].id}", api.session_of(web)).text
    order, intent, settlement = shop_world["order"], shop_world["intent"], shop_world["settlement"]
    assert f'href="/panel/subscriptions/{shop_world["subscription"].id}"' in text
    assert 'class="phase-active">active<' in text and 'class="phase-provisioning">provisioning<' in text
    assert f'href="/panel/orders/{order.id}"' in text and f'href="/panel/payments/{intent.id}"' in text
    assert f'href="/panel/system/operations/{settlement.operation_id}"' in text
    assert "500.00 RUB" in text and "100 GiB" in text  # the wallet, the plan's traffic
    without_money = page(
        web, f"/panel/customers/{shop_world['customer'].id}", api.session_of(web, "r", ["subscriptions.read"])
    )
    assert 'id="orders"' not in without_money.text and "payments.read" in without_money.text


def test_subscription_order_and_payment_pages_link_to_each_other(web, shop_world):
    headers = api.session_of(web)
    order, subscription = shop_world["order"], shop_world["subscription"]
    sub = page(web, f"/panel/subscriptions/{subscription.id}", headers).text
    assert f'href="/panel/customers/{shop_world["customer"].id}"' in sub and f'href="/panel/orders/{order.id}"' in sub
    assert f'<a href="/panel/orders/{order.id}">order:{order.id}</a>' in sub  # the operation's correlation
    assert "/pause" in sub and "requestId" in sub
    order_page = page(web, f"/panel/orders/{order.id}", headers).text
    assert f'href="/panel/subscriptions/{subscription.id}"' in order_page
    assert f'href="/panel/payments/{shop_world["intent"].id}"' in order_page
    assert f"/v1/panel/orders/{order.id}/refund" in order_page and 'data-places="2"' in order_page
    # Where the refund goes: the API's default (back where it was paid) unless the wallet is chosen.
    assert re.search(r'<select name="to" data-field="to"[^>]*>\s*<option value="" selected>', order_page)
    assert '<option value="wallet">' in order_page
    assert "provider_clearing:yookassa" in order_page
    payment_page = page(web, f"/panel/payments/{shop_world['intent'].id}", headers).text
    assert f'href="/panel/orders/{order.id}"' in payment_page


def test_the_order_page_lists_its_refunds_with_where_they_went_and_their_state(web, shop_world):
    from commerce.refunds import refund_order

    order = shop_world["order"]
    refund_order(order.id, 900, to="wallet")
    refund_order(order.id, 1000)
    shown = page(web, f"/panel/orders/{order.id}", api.session_of(web)).text
    table = shown[shown.index('<table id="refunds">') :]
    table = table[: table.index("</table>")]
    assert table.count("<tr>") == 3  # the header and the two refunds
    # Plain words, the stored values kept in data- attributes for scripts.
    assert "to the customer&#039;s wallet (paid at YooKassa)" in table
    assert "back at YooKassa, through its refund API" in table
    assert 'data-destination="wallet" data-provider="yookassa"' in table
    assert 'data-destination="provider" data-provider="yookassa"' in table
    assert "status-succeeded" in table and "status-pending" in table
    assert ">done<" in table and ">waiting for the provider<" in table
    assert "(yookassa)<" not in table
    head = shown[: shown.index("<h2>")]
    assert 'data-status="partially_refunded"' in head and ">partially refunded<" in head


def refund_form_of(text):
    form = text[text.index('<form class="inline operator-change panel-box" id="refund"') :]
    return form[: form.index("</form>")]


def options_of(form):
    return re.findall(r'<option value="([^"]*)"[^>]*>([^<]*)</option>', form)


def test_the_order_and_customer_pages_say_kind_status_and_how_it_was_paid_in_plain_words(web, shop_world):
    headers = api.session_of(web)
    order_page = page(web, f"/panel/orders/{shop_world['order'].id}", headers).text
    assert "settled by" not in order_page and "provider_webhook<" not in order_page
    assert ">paid by provider webhook (YooKassa)<" in order_page and 'data-settled-by="provider_webhook"' in order_page
    assert 'data-kind="purchase"' in order_page and 'data-status="fulfilled"' in order_page
    topup_page = page(web, f"/panel/orders/{shop_world['topup'].id}", headers).text
    assert '<span id="order-kind" data-kind="topup" title="topup">wallet top-up</span>' in topup_page
    customer_page = page(web, f"/panel/customers/{shop_world['customer'].id}", headers).text
    orders = customer_page[customer_page.index('<table id="orders">') :]
    orders = orders[: orders.index("</table>")]
    assert '<td data-kind="topup" title="topup">wallet top-up</td>' in orders
    assert ">topup<" not in orders and ">yookassa<" not in orders and ">YooKassa<" in orders
    wallet = customer_page[customer_page.index('<table id="wallet">') :]
    assert '<td data-kind="topup" title="topup">wallet top-up</td>' in wallet[: wallet.index("</table>")]
    from commerce.refunds import refund_order

    refund_order(shop_world["order"].id, 100)
    orders = page(web, f"/panel/customers/{shop_world['customer'].id}", headers).text
    assert 'data-status="partially_refunded" title="partially_refunded">partially refunded<' in orders
    assert ">partially_refunded<" not in orders


def test_a_cryptobot_orders_refund_form_defaults_to_the_wallet_and_names_the_manual_refund(web, shop_world):
    from commerce.refunds import refund_order

    waiting, headers = shop_world["waiting"], api.session_of(web)
    form = refund_form_of(page(web, f"/panel/orders/{waiting.id}", headers).text)
    assert options_of(form) == [
        ("", "to the customer&#039;s wallet (CryptoBot has no refund API)"),
        ("provider", "manual: an operator pays it back at CryptoBot by hand"),
    ]
    assert "In full, the access is revoked." in form
    # The choice does what its label says: `provider` is recorded as a manual refund.
    refund_order(waiting.id, 100)
    refund_order(waiting.id, 100, to="provider")
    shown = page(web, f"/panel/orders/{waiting.id}", headers).text
    table = shown[shown.index('<table id="refunds">') :]
    table = table[: table.index("</table>")]
    assert ">to the customer&#039;s wallet (paid at CryptoBot)<" in table
    assert ">manual: an operator pays it back at CryptoBot by hand<" in table
    assert 'data-destination="manual" data-provider="cryptobot"' in table and ">to be paid back by hand<" in table
    assert "manual (cryptobot)" not in table.replace('title="manual (cryptobot)"', "")


def test_a_stars_orders_refund_form_says_telegram_refunds_it_whole(web, shop_world):
    from tests.support import sales

    stars, _, _ = sales.paid_order(shop_world["customer"], shop_world["plan"], currency="XTR", provider="stars")
    form = refund_form_of(page(web, f"/panel/orders/{stars.id}", api.session_of(web)).text)
    assert options_of(form) == [
        ("", "back at Telegram Stars, through its refund API"),
        ("wallet", "to the customer&#039;s wallet instead"),
    ]
    assert "Telegram refunds a Stars payment whole: a part can go to the customer&#039;s wallet only." in form
    assert "In full, the access is revoked." in form


def test_the_payment_page_says_what_each_webhook_delivery_did_in_words(web, shop_world):
    from models.base import utcnow
    from models.payments import ProviderWebhookEvent

    intent = shop_world["intent"]
    for event_id, outcome, verdict in (
        ("evt-1", "settled", "confirmed"),
        ("evt-2", "replayed", None),
        ("evt-3", "bad_signature", None),
        ("evt-4", "pending", "contradicted"),
        ("evt-5", "unconfirmed", "unknown"),
    ):
        ProviderWebhookEvent.create(
            provider="yookassa", provider_event_id=event_id, signature_ok=False, verdict=verdict, outcome=outcome,
            payment_intent=intent.id, retain_until=utcnow(), body=b"{}", processed_at=utcnow() if verdict else None,
        )  # fmt: skip
    shown = page(web, f"/panel/payments/{intent.id}", api.session_of(web)).text
    assert '<td data-outcome="settled" title="settled">settled the order</td>' in shown
    assert ">a repeat of a delivery already applied: nothing changed<" in shown
    assert html_escape(CATALOGUE["bad_signature"].meaning) in shown  # an error code keeps its explanation
    # What was checked, in words: YooKassa's notifications are what its API said of them, never "valid".
    verdicts = re.findall(r'data-verdict="([a-z_]*)">([^<]*)<', shown)
    assert verdicts == [
        ("confirmed", "confirmed by the API"), ("", "not checked"), ("", "not checked"),
        ("contradicted", "contradicted by the API"), ("unknown", "unknown to the API"),
    ]  # fmt: skip
    assert 'data-provider="yookassa">YooKassa<' in shown and 'data-status="succeeded" title="succeeded">paid<' in shown


def test_a_refunds_last_error_is_explained_in_plain_words(web, shop_world):
    from commerce.refunds import refund_order
    from models.payments import Refund

    refund_order(shop_world["order"].id, 100)
    Refund.update(status="failed", last_error_code="refund_canceled").execute()
    shown = page(web, f"/panel/orders/{shop_world['order'].id}", api.session_of(web)).text
    table = shown[shown.index('<table id="refunds">') :]
    assert '<span class="code">refund_canceled</span>' in table
    assert CATALOGUE["refund_canceled"].meaning in table and "What to do:" in table


def test_a_top_ups_refund_form_says_the_money_leaves_the_wallet_and_offers_no_wallet(web, shop_world):
    from models.payments import PaymentIntent
    from tests.support import sales

    topup, headers = shop_world["topup"], api.session_of(web)
    PaymentIntent.create(
        order=topup, provider="yookassa", provider_payment_id="yk-topup", amount_minor=topup.amount_minor,
        currency="RUB", status="succeeded", idempotence_key="topup-intent",
    )  # fmt: skip
    form = refund_form_of(page(web, f"/panel/orders/{topup.id}", headers).text)
    assert options_of(form) == [("", "back at YooKassa, through its refund API, from the wallet it filled")]
    assert "access is revoked" not in form and "The money leaves the wallet this top-up filled" in form
    crypto = sales.topped_up(shop_world["customer"], 1000, currency="USD", provider="cryptobot")
    form = refund_form_of(page(web, f"/panel/orders/{crypto.id}", headers).text)
    assert options_of(form) == [
        (
            "",
            "manual: an operator pays it back at CryptoBot by hand (CryptoBot has no refund API),"
            " from the wallet it filled",
        )
    ]
    # What the labels say is what happens: the CryptoBot top-up is recorded as manual.
    from commerce.refunds import refund_order

    refund_order(crypto.id)
    refunds = page(web, f"/panel/orders/{crypto.id}", headers).text
    assert ">manual: an operator pays it back at CryptoBot by hand<" in refunds


def test_a_bought_gift_cards_and_an_addons_refund_forms_say_what_a_full_refund_does(web, shop_world, data_key):
    from commerce.orders import create_order
    from commerce.settlement import settle_order
    from tests.support.shop import addon

    buyer, headers = shop_world["customer"], api.session_of(web)
    gift = create_order(buyer.id, "gift", "RUB", plan_id=shop_world["plan"].id)
    settle_order(gift.id, "wallet")
    shown = page(web, f"/panel/orders/{gift.id}", headers).text
    form = refund_form_of(shown)
    assert "access is revoked" not in form and "the gift card expires if it has not been redeemed yet" in form
    assert options_of(form) == [("", "back to the customer&#039;s wallet (it was paid from there)")]
    assert ">gift card<" in shown and ">paid from the customer&#039;s wallet<" in shown
    extra = create_order(
        buyer.id, "addon", "RUB", addon_id=addon().id, subscription_id=shop_world["subscription"].id,
        provider="yookassa",
    )  # fmt: skip
    settle_order(extra.id, "provider_webhook")
    shown = page(web, f"/panel/orders/{extra.id}", headers).text
    form = refund_form_of(shown)
    assert "access is revoked" not in form and "extra traffic and devices stay until the period ends" in form
    assert ">add-on<" in shown


def test_refund_and_pause_are_offered_only_to_operators_who_may_use_them(web, shop_world):
    readers = api.session_of(web, "reader", ["subscriptions.read", "payments.read"])
    assert "/refund" not in page(web, f"/panel/orders/{shop_world['order'].id}", readers).text
    assert "/pause" not in page(web, f"/panel/subscriptions/{shop_world['subscription'].id}", readers).text


def test_a_subscription_paid_without_access_is_linked_from_home_and_its_page_offers_reprovision_to_writers(
    web, shop_world
):
    waiting = shop_world["waiting_settlement"]
    with db.atomic():
        repair.cancel_operation(waiting.operation_id, "operator:alice", "the advice says so")
    subscription_id = Entitlement.get_by_id(waiting.entitlement_id).subscription_id
    headers = api.session_of(web)
    home = page(web, "/panel", headers).text
    assert re.search(r'id="without-access".*?>1</span>', home, re.DOTALL)
    assert f'href="/panel/subscriptions/{subscription_id}"' in home
    text = page(web, f"/panel/subscriptions/{subscription_id}", headers).text
    assert 'id="phase">failed<' in text and "the customer has no access" in text
    action = f"/v1/panel/customers/{shop_world['customer'].id}/subscriptions/{subscription_id}/reprovision"
    assert re.search(
        rf'<form class="inline operator-change[^"]*" id="reprovision">.*?data-action="{action}"', text, re.DOTALL
    )
    assert 'name="reason"' in text and "requestId" in text
    reader = api.session_of(web, "reader", ["subscriptions.read"])
    assert "/reprovision" not in page(web, f"/panel/subscriptions/{subscription_id}", reader).text
    assert "/reprovision" not in page(web, f"/panel/subscriptions/{shop_world['subscription'].id}", headers).text


def test_operation_pages_link_the_order_their_keys_name_and_explain_their_error_code(web, shop_world):
    op_id = api.operation_in("failed", error_code="remnawave_unavailable")
    op = FulfillmentOperation.get_by_id(op_id)
    order_id = op.correlation_id.split(":")[1]
    headers = api.session_of(web)
    listing = page(web, "/panel/system/operations", headers).text
    assert f'<a href="/panel/orders/{order_id}">order:{order_id}</a>' in listing
    assert CATALOGUE["remnawave_unavailable"].meaning.split(" (")[0] in listing and "What to do:" in listing
    history = page(web, f"/panel/system/operations/{op_id}", headers).text
    assert f'<a href="/panel/orders/{order_id}">order:{order_id}</a>:fulfill' in history


def test_every_page_shows_times_in_the_operators_time_zone_with_its_offset(web, shop_world):
    headers = api.session_of(web)
    Operator.update(time_zone="Asia/Tokyo").where(Operator.username == "alice").execute()
    Customer.update(created_at=datetime.datetime(2026, 12, 1, 20, 30, 0)).where(
        Customer.id == shop_world["customer"].id
    ).execute()
    text = page(web, f"/panel/customers/{shop_world['customer'].id}", headers).text
    assert "since 2026-12-02T05:30:00+09:00" in text  # 20:30 UTC is 05:30 the next day in Tokyo
    for path in ["/panel/system/operations", "/panel/system/queue", *shop_pages(shop_world)]:
        shown = page(web, path, headers, status="succeeded").text
        times = re.findall(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d([+-]\d\d:\d\d|Z)", shown)
        assert set(times) <= {"+09:00"}, (path, set(times))
    assert 'id="time-zone"' in text and "Asia/Tokyo" in text


def test_the_settings_page_offers_every_time_zone_with_the_operators_own_selected(web, database):
    headers = api.session_of(web)
    text = page(web, "/panel/settings", headers).text
    assert '<option value="UTC" selected>' in text and '<option value="Europe/Moscow" >' in text
    assert "/v1/panel/session/time-zone" in text


def test_a_customers_name_is_shown_without_bidirectional_controls_on_pages_and_in_the_panel_api(web, shop_world):
    from tests.bot.test_updates import BIDI_CONTROLS

    customer = shop_world["customer"]
    Customer.update(display_name="\u202eAlice" + BIDI_CONTROLS + " Shopper").where(Customer.id == customer.id).execute()
    headers = api.session_of(web)
    shown = [page(web, "/panel/customers", headers).text, page(web, f"/panel/customers/{customer.id}", headers).text]
    assert all("Alice Shopper" in text for text in shown)
    assert not set("".join(shown)) & set(BIDI_CONTROLS)
    (found,) = api.get(web, "/v1/panel/customers", headers, q="@alice_shop").json()["customers"]
    assert found["displayName"] == "Alice Shopper"
