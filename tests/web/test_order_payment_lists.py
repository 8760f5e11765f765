"""Issue 21 item 1: every order and every payment in the back office — filtered, searched, keyset pages,
totals per currency of the filtered set, and a CSV of exactly that set, streamed, with no cell a
spreadsheet would run — behind payments.read, and writing nothing."""

import csv
import datetime
import io

import pytest
import requests

from models.commerce import Customer, Order, Plan
from models.ops import AuditEvent
from models.payments import PaymentIntent
from tests.support import commerce
from tests.web import test_panel_api as api
from tests.web.test_pages import page
from web import backoffice_orders

DAY = datetime.datetime(2026, 11, 20, 12, 0)
FORMULA_NAME = '=HYPERLINK("http://evil.example","x")'


def order(customer, status, amount, currency, provider, days, kind="purchase"):
    plan = Plan.get_or_none(Plan.code == "lists") or commerce.limited_plan("lists")
    return Order.create(
        customer=customer, plan=plan, status=status, amount_minor=amount, currency=currency, provider=provider,
        operation=kind, created_at=DAY + datetime.timedelta(days=days),
    )  # fmt: skip


def intent(of, status, provider_id, days):
    return PaymentIntent.create(
        order=of, provider=of.provider, provider_payment_id=provider_id, amount_minor=of.amount_minor,
        currency=of.currency, status=status, idempotence_key=f"k{of.id}-{provider_id}",
        created_at=DAY + datetime.timedelta(days=days),
    )  # fmt: skip


@pytest.fixture
def world(database):
    olga = Customer.create(display_name="Ольга Петрова", telegram_id=7001, telegram_username="Olga_P")
    bob = Customer.create(display_name="Bob Stone", telegram_id=7002, telegram_username="bob")
    evil = Customer.create(display_name=FORMULA_NAME, telegram_id=7003, telegram_username=None)
    orders = [
        order(olga, "fulfilled", 29900, "RUB", "yookassa", 0),
        order(olga, "refunded", 29900, "RUB", "yookassa", 1),
        order(bob, "fulfilled", 399, "USD", "cryptobot", 2),
        order(bob, "pending", 250, "XTR", "stars", 3),
        order(evil, "fulfilled", 59900, "RUB", "yookassa", 4, kind="topup"),
        order(olga, "paid", 19900, "RUB", "yookassa", 5, kind="renewal"),
    ]
    Order.update(refunded_amount_minor=29900).where(Order.id == orders[1].id).execute()
    intents = [
        intent(orders[0], "succeeded", "2f1a-yk-0001", 0),
        intent(orders[1], "succeeded", "2f1a-yk-0002", 1),
        intent(orders[2], "succeeded", "cb-77", 2),
        intent(orders[3], "pending", None, 3),
        intent(orders[4], "succeeded", "-2+3", 4),
        intent(orders[5], "canceled", "@sum", 5),
    ]
    return {"olga": olga, "bob": bob, "evil": evil, "orders": orders, "intents": intents}


REFUSED = [
    ({"status": "lost"}, "invalid_status"),
    ({"kind": "loan"}, "invalid_filter"),
    ({"provider": "paypal"}, "invalid_filter"),
    ({"currency": "RUBLE"}, "invalid_filter"),
    ({"from": "2026-13-01"}, "invalid_filter"),
    ({"from": "2026-11-22", "to": "2026-11-21"}, "invalid_filter"),
    ({"customer": "x" * 65}, "invalid_filter"),
    ({"q": "x" * 101}, "invalid_search"),
    ({"cursor": "not-a-cursor"}, "invalid_cursor"),
]


def listed(web, headers, name, **params):
    answer = api.get(web, f"/v1/panel/{name}", headers, **params)
    assert answer.status_code == 200, answer.text
    return answer.json()


def ids(body, name):
    return [row["id"] for row in body[name]]


def snapshot():
    """Every row the lists read, and the audit: what must not change."""
    return (
        list(Order.select().order_by(Order.id).tuples()),
        list(PaymentIntent.select().order_by(PaymentIntent.id).tuples()),
        list(Customer.select().order_by(Customer.id).tuples()),
        AuditEvent.select().count(),
    )


def test_the_order_and_payment_lists_filter_search_page_and_total_the_filtered_set(web, world, backend):
    headers = api.session_of(web, permissions=["payments.read"])
    o = [row.id for row in world["orders"]]
    assert ids(listed(web, headers, "orders"), "orders") == o[::-1]  # newest first
    assert ids(listed(web, headers, "orders", status="fulfilled"), "orders") == [o[4], o[2], o[0]]
    assert ids(listed(web, headers, "orders", kind="renewal"), "orders") == [o[5]]
    assert ids(listed(web, headers, "orders", provider="stars"), "orders") == [o[3]]
    assert ids(listed(web, headers, "orders", currency="usd"), "orders") == [o[2]]
    assert ids(listed(web, headers, "orders", customer=world["bob"].id), "orders") == [o[3], o[2]]
    # Days in the operator's zone, both included (UTC here): the 21st and the 22nd.
    assert ids(listed(web, headers, "orders", **{"from": "2026-11-21", "to": "2026-11-22"}), "orders") == [o[2], o[1]]
    search = {
        str(o[3]): [o[3]],  # an order id
        "2f1a-yk-0002": [o[1]],  # a provider's payment id
        "Ольга": [o[5], o[1], o[0]],  # a part of a name
        "STONE": [o[3], o[2]],  # in another case
        "@olga_p": [o[5], o[1], o[0]],  # a username, any case
        "7002": [o[3], o[2]],  # a Telegram id
        "nobody-at-all": [],
    }
    if backend == "postgres":  # PostgreSQL lowers every script, SQLite only ASCII
        search["ольга"] = [o[5], o[1], o[0]]
    for text, expected in search.items():
        assert ids(listed(web, headers, "orders", q=text), "orders") == expected, text
    # Totals are the whole filtered set's, whatever the page: integer minor units per currency.
    body = listed(web, headers, "orders", currency="RUB", limit=1)
    assert body["totals"] == [{"currency": "RUB", "count": 4, "amountMinor": 139600, "refundedAmountMinor": 29900}]
    assert len(body["orders"]) == 1 and body["nextCursor"]
    walked, cursor = [], None
    while True:
        body = listed(web, headers, "orders", limit=2, **({"cursor": cursor} if cursor else {}))
        walked += ids(body, "orders")
        cursor = body["nextCursor"]
        if not cursor:
            break
    assert walked == o[::-1]  # every order once, in order
    everything = {t["currency"]: t["amountMinor"] for t in listed(web, headers, "orders")["totals"]}
    assert everything == {"RUB": 139600, "USD": 399, "XTR": 250}
    row = listed(web, headers, "orders", q=str(o[0]))["orders"][0]
    assert row["customerName"] == "Ольга Петрова" and row["kind"] == "purchase" and row["amountMinor"] == 29900
    p = [row.id for row in world["intents"]]
    assert ids(listed(web, headers, "payments"), "payments") == p[::-1]
    assert ids(listed(web, headers, "payments", status="succeeded", provider="yookassa"), "payments") == [
        p[4], p[1], p[0]
    ]  # fmt: skip
    assert ids(listed(web, headers, "payments", kind="topup"), "payments") == [p[4]]
    assert ids(listed(web, headers, "payments", q="cb-77"), "payments") == [p[2]]
    assert ids(listed(web, headers, "payments", q="bob"), "payments") == [p[3], p[2]]
    body = listed(web, headers, "payments", status="succeeded")
    assert body["totals"] == [
        {"currency": "RUB", "count": 3, "amountMinor": 119700},
        {"currency": "USD", "count": 1, "amountMinor": 399},
    ]
    assert body["payments"][0]["customerName"] == FORMULA_NAME and body["payments"][0]["kind"] == "topup"


def csv_of(web, headers, name, **params):
    answer = requests.get(f"{web}/panel/{name}.csv", headers=headers, params=params, timeout=10)
    assert answer.status_code == 200, answer.text
    return answer, list(csv.reader(io.StringIO(answer.content.decode("utf-8-sig"))))


def test_the_csv_is_exactly_the_filtered_set_streamed_in_batches_with_formula_cells_neutralised_and_the_pages_link_it(
    web, world, monkeypatch
):
    monkeypatch.setattr(backoffice_orders, "CSV_BATCH", 2)  # three batches for six rows
    headers = api.session_of(web, permissions=["payments.read"])
    for name, params in (
        ("orders", {}),
        ("orders", {"currency": "RUB", "status": "fulfilled"}),
        ("orders", {"q": "Ольга"}),
        ("payments", {}),
        ("payments", {"status": "succeeded", "kind": "topup"}),
    ):
        answer, rows = csv_of(web, headers, name, **params)
        assert answer.headers["Content-Type"] == "text/csv; charset=utf-8"
        assert answer.headers["Content-Disposition"].startswith(f'attachment; filename="{name}-')
        assert rows[0][0] == ("order id" if name == "orders" else "payment id")
        expected = listed(web, headers, name, limit=200, **params)[name]
        assert [int(row[0]) for row in rows[1:]] == [row["id"] for row in expected], (name, params)
        assert all(row[-1] == f"/panel/{name}/{row[0]}" for row in rows[1:])
    _, orders = csv_of(web, headers, "orders", q=world["evil"].id)
    assert orders[1][3] == "'" + FORMULA_NAME  # the customer's name, shown, never run
    _, payments = csv_of(web, headers, "payments")
    provider_ids = {int(row[0]): row[7] for row in payments[1:]}
    assert provider_ids[world["intents"][4].id] == "'-2+3" and provider_ids[world["intents"][5].id] == "'@sum"
    assert provider_ids[world["intents"][0].id] == "2f1a-yk-0001"
    assert backoffice_orders.neutralised("\tx") == "'\tx" and backoffice_orders.neutralised("\rx") == "'\rx"
    assert backoffice_orders.neutralised("+1") == "'+1" and backoffice_orders.neutralised(5) == "5"
    # The pages: the same filtered rows, linked, with the totals, the next page and the CSV's link.
    o, p = world["orders"], world["intents"]
    shown = page(web, "/panel/orders", headers, currency="RUB")
    assert shown.status_code == 200
    assert f'href="/panel/orders/{o[0].id}"' in shown.text and f'href="/panel/orders/{o[2].id}"' not in shown.text
    assert 'data-currency="RUB" data-amount-minor="139600" data-count="4"' in shown.text
    assert "1396.00 RUB" in shown.text and 'href="/panel/orders.csv?currency=RUB"' in shown.text
    assert 'href="/panel/orders"' in shown.text and 'href="/panel/payments"' in shown.text  # the Shop navigation
    payments = page(web, "/panel/payments", headers, q="cb-77").text
    assert f'href="/panel/payments/{p[2].id}"' in payments and f'href="/panel/orders/{o[2].id}"' in payments
    assert payments.count("data-payment=") == 1
    many = [order(world["bob"], "fulfilled", 100, "USD", "cryptobot", 10) for _ in range(25)]
    first = page(web, "/panel/orders", headers, provider="cryptobot").text
    assert first.count("data-order=") == 25 and 'id="older"' in first
    older = first[first.index('<a href="?', first.index('id="older"') - 200) :]
    link = older[older.index("?") : older.index('"', older.index("?"))].replace("&amp;", "&")
    rest = requests.get(f"{web}/panel/orders{link}", headers=headers, timeout=10).text
    assert "provider=cryptobot" in link and rest.count("data-order=") == 1 and f'data-order="{o[2].id}"' in rest
    assert f'data-order="{many[0].id}"' in first


def test_the_lists_and_csvs_need_payments_read_and_a_session_and_write_nothing(web, world):
    without = api.session_of(web, "support", ["subscriptions.read", "support.read"])
    reader = api.session_of(web, "reader", ["payments.read"])
    before = snapshot()  # signing in is audited; reading is not
    pages, exports = ("/panel/orders", "/panel/payments"), ("/panel/orders.csv", "/panel/payments.csv")
    routes = ("/v1/panel/orders", "/v1/panel/payments")
    for path in pages:
        answer = page(web, path)
        assert answer.status_code == 303 and answer.headers["Location"].endswith("/panel/login")
    for path in exports + routes:
        answer = requests.get(web + path, timeout=10)
        assert answer.status_code == 401 and answer.json()["code"] == "unauthorized", path
    for path in pages:
        answer = page(web, path, without)
        assert answer.status_code == 403 and "payments.read" in answer.text
    for path in exports + routes:
        answer = requests.get(web + path, headers=without, timeout=10)
        assert answer.status_code == 403 and answer.json()["code"] == "forbidden", path
        assert "Ольга" not in answer.text
    for path in pages + exports + routes:
        assert requests.get(web + path, headers=reader, timeout=10).status_code == 200
    for params, code in REFUSED:  # a filter that cannot match is a 400 with its code
        for path in routes:
            answer = api.get(web, path, reader, **params)
            assert answer.status_code == 400 and answer.json()["code"] == code, (path, params)
    params = REFUSED[1][0]  # the CSV and the page refuse like the API
    assert api.get(web, "/panel/payments.csv", reader, **params).json()["code"] == "invalid_filter"
    shown = page(web, "/panel/orders", reader, **params)
    assert shown.status_code == 400 and 'id="filter-error"' in shown.text
    assert snapshot() == before
