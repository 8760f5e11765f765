"""SPEC 13.14 in the browser's HTML: the shop's pages (Home, Customers, a customer,
a subscription, an order, a payment, Settings), their permissions, their links to
each other and to the operations, error codes explained, and times in the
operator's time zone."""

import datetime
import re

import pytest

from models.commerce import Customer
from models.fulfillment import FulfillmentOperation
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
    refused = page(web, "/panel/customers", headers, q="alice shop")
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
    assert "wallet (yookassa)" in table and "provider (yookassa)" in table
    assert "status-succeeded" in table and "status-pending" in table


def test_refund_and_pause_are_offered_only_to_operators_who_may_use_them(web, shop_world):
    readers = api.session_of(web, "reader", ["subscriptions.read", "payments.read"])
    assert "/refund" not in page(web, f"/panel/orders/{shop_world['order'].id}", readers).text
    assert "/pause" not in page(web, f"/panel/subscriptions/{shop_world['subscription'].id}", readers).text


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
