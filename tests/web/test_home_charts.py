"""SPEC 13.14, issue 21 item 5: Home's charts are the database's numbers per day of the
operator's time zone (every day of 30 there, 0 when nothing happened, one series per
currency), its "needs you" list counts what waits and links to the page listing it, and
both follow the operator's permissions."""

import datetime
import uuid
import zoneinfo
from html.parser import HTMLParser

import requests

from commerce import ledger
from commerce.ledger import REVENUE
from models.base import db, utcnow
from models.commerce import Customer
from models.fulfillment import Entitlement, FulfillmentOperation
from models.goods import GoodsDelivery
from models.ledger import LedgerAccount, LedgerEntry, LedgerTransaction
from models.ops import OperatorNotice
from models.payments import PaymentIntent
from models.support import SupportTicket
from tests.support import sales
from tests.support.goods import paid_orders, product
from tests.web import test_panel_api as api
from tests.web.test_pages import page
from web import home, local_time

TOKYO = zoneinfo.ZoneInfo("Asia/Tokyo")  # UTC+9 all year
HOUR = datetime.timedelta(hours=1)


class Charts(HTMLParser):
    """Every chart's points (its rects' data- attributes) and the needs-you items, read from a page."""

    def __init__(self, text):
        super().__init__()
        self.charts, self.needs, self.labelled, self._chart = {}, {}, {}, None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "svg" and "data-chart" in attrs:
            self._chart = attrs["id"].removeprefix("chart-")
            self.charts[self._chart] = []
            self.labelled[self._chart] = (attrs.get("role"), attrs.get("aria-labelledby"), attrs.get("viewbox"))
        elif tag == "rect" and self._chart:
            point = {k.removeprefix("data-"): v for k, v in attrs.items() if k.startswith("data-")}
            self.charts[self._chart].append(point)
        elif tag == "li" and "data-need" in attrs:
            self.needs[attrs["data-need"]] = int(attrs["data-count"])

    def handle_endtag(self, tag):
        if tag == "svg":
            self._chart = None


def tokyo_operator(web, name="alice", permissions=api.EVERYTHING):
    headers = api.session_of(web, name, permissions)
    assert requests.put(
        web + "/v1/panel/session/time-zone", headers=headers, json={"timeZone": "Asia/Tokyo"}, timeout=10
    ).ok
    return headers


def local_days():
    dates, midnights, _ = local_time.last_days(utcnow(), TOKYO, home.DAYS)
    return dates, midnights


def local_date(stored, zone=TOKYO):
    return stored.replace(tzinfo=datetime.timezone.utc).astimezone(zone).date()


def values(points, key="value"):
    return {point["day"]: int(point[key]) for point in points}


def revenue_in_the_ledger(dates, zone=TOKYO):
    """{currency: {day: net minor units}} summed here, row by row, from the ledger's revenue entries."""
    totals = {}
    rows = (
        LedgerEntry.select(LedgerEntry, LedgerTransaction)
        .join(LedgerTransaction)
        .switch(LedgerEntry)
        .join(LedgerAccount)
        .where(LedgerAccount.kind == REVENUE)
    )
    for entry in rows:
        day = local_date(entry.transaction.created_at, zone)
        if day in dates:
            series = totals.setdefault(entry.currency, {date.isoformat(): 0 for date in dates})
            series[day.isoformat()] += entry.amount_minor
    return totals


def posted_at(order, moment):
    LedgerTransaction.update(created_at=moment).where(LedgerTransaction.order == order.id).execute()


def test_home_charts_are_the_ledgers_customers_subscriptions_payments_and_operations_per_local_day(web, database):
    headers = tokyo_operator(web)
    dates, midnights = local_days()
    day = {offset: midnights[home.DAYS - 1 + offset] for offset in range(-(home.DAYS - 1), 1)}  # 0: today
    buyer, plan = sales.customer(), sales.plan()
    today_rub, today_settled, _ = sales.paid_order(buyer, plan, "RUB")
    first_day, _, _ = sales.paid_order(buyer, plan, "RUB")
    before_window, before_settled, _ = sales.paid_order(buyer, plan, "RUB")
    usd, usd_settled, _ = sales.paid_order(buyer, plan, "USD", provider="cryptobot")
    posted_at(today_rub, day[0] + datetime.timedelta(minutes=1))
    posted_at(first_day, midnights[0])  # the window's first moment counts on its first day
    posted_at(before_window, midnights[0] - datetime.timedelta(seconds=1))
    posted_at(usd, day[-3] + HOUR)
    with db.atomic():
        refund = ledger.reverse(LedgerTransaction.get(LedgerTransaction.order == usd.id), 99)
    LedgerTransaction.update(created_at=day[-2] + HOUR).where(LedgerTransaction.id == refund.id).execute()

    earlier = sales.customer("Earlier", "earlier")
    Customer.update(created_at=day[-5] + HOUR).where(Customer.id == earlier.id).execute()
    long_ago = sales.customer("Long ago", "long_ago")
    Customer.update(created_at=midnights[0] - HOUR).where(Customer.id == long_ago.id).execute()

    sales.provision(today_settled)  # active from now
    sales.provision(usd_settled)  # a period from 10 days ago that ended 4 days ago
    Entitlement.update(starts_at=day[-10] + HOUR, ends_at=day[-4] + HOUR).where(
        Entitlement.id == usd_settled.entitlement_id
    ).execute()
    sales.provision(before_settled)  # paused 7 days ago: not active since
    Entitlement.update(starts_at=day[-20], ends_at=day[0] + 30 * 24 * HOUR, paused_at=day[-7] + HOUR).where(
        Entitlement.id == before_settled.entitlement_id
    ).execute()

    for status, moment in (("failed", day[-1] + HOUR), ("canceled", day[0] + HOUR), ("pending", day[0] + HOUR)):
        PaymentIntent.create(order=first_day, provider="yookassa", amount_minor=1, currency="RUB", status=status,
                             idempotence_key=str(uuid.uuid4()), created_at=moment)  # fmt: skip
    failed = api.operation_in("failed")  # queued now
    retrying = FulfillmentOperation.get(FulfillmentOperation.correlation_id == f"order:{first_day.id}")
    FulfillmentOperation.update(status="retrying", created_at=day[-7] + HOUR).where(
        FulfillmentOperation.id == retrying.id
    ).execute()

    text = page(web, "/panel", headers).text
    shown = Charts(text)
    every_day = [date.isoformat() for date in dates]
    for name, points in shown.charts.items():
        assert [point["day"] for point in points] == every_day, name  # 30 local days, none left out
        role, labelled_by, view_box = shown.labelled[name]
        assert role == "img" and labelled_by == f"chart-{name}-title chart-{name}-desc" and view_box
        assert f'<title id="chart-{name}-title">' in text and f'<desc id="chart-{name}-desc">' in text

    in_ledger = revenue_in_the_ledger(dates)
    assert set(in_ledger) == {"RUB", "USD"}
    for currency, series in in_ledger.items():
        assert values(shown.charts[f"revenue-{currency}"]) == series, currency
    usd_days = values(shown.charts["revenue-USD"])
    assert (usd_days[dates[-4].isoformat()], usd_days[dates[-3].isoformat()]) == (399, -99)
    assert list(usd_days.values())[:-4] == [0] * (home.DAYS - 4) and usd_days[dates[-2].isoformat()] == 0
    rub_days = values(shown.charts["revenue-RUB"])
    assert rub_days[dates[0].isoformat()] == 29900  # the window's first moment; a second before it is not
    assert f'data-total="{sum(usd_days.values())}">' in text

    new = values(shown.charts["new-customers"])
    assert new == {date.isoformat(): 0 for date in dates} | {
        date.isoformat(): count
        for date, count in _count_by_day((c.created_at for c in Customer.select()), dates).items()
    }
    assert new[dates[-6].isoformat()] == 1 and new[dates[-1].isoformat()] >= 2

    active = values(shown.charts["active-subscriptions"])
    expected = {date.isoformat(): 0 for date in dates}
    for offset in range(-21, -7):  # the paused period, from the day ending at its start to before its pause
        expected[dates[offset - 1].isoformat()] += 1
    for offset in range(-10, -4):  # the ended one, to the day before it ended
        expected[dates[offset - 1].isoformat()] += 1
    expected[dates[-1].isoformat()] += 1  # the one provisioned now
    assert active == expected

    payments = shown.charts["payment-success"]
    assert values(payments, "ended") == {d: 0 for d in every_day} | {every_day[-2]: 1, every_day[-1]: 5}
    assert values(payments, "succeeded") == {d: 0 for d in every_day} | {every_day[-1]: 4}
    assert values(payments)[every_day[-1]] == 80

    failing = values(shown.charts["failing-operations"])
    assert failing == {d: 0 for d in every_day} | {every_day[-8]: 1, every_day[-1]: 1}
    assert FulfillmentOperation.get_by_id(failed).status == "failed"


def _count_by_day(moments, dates):
    counts = {}
    for moment in moments:
        day = local_date(moment)
        if day in dates:
            counts[day] = counts.get(day, 0) + 1
    return counts


def test_needs_you_counts_what_waits_links_to_where_it_is_listed_and_follows_permissions(web, database):
    headers = tokyo_operator(web)
    api.operation_in("failed")  # a failed create: also a subscription paid without access
    goods = product("http://127.0.0.1:9")
    first, _ = paid_orders(goods, 2)
    GoodsDelivery.update(status="needs_review").where(GoodsDelivery.order == first).execute()
    buyer = sales.customer()
    for status in ("open", "open", "closed"):
        SupportTicket.create(customer=buyer, chat_id=buyer.telegram_id, status=status)
    OperatorNotice.create(kind="anomaly", dedupe_key="recent")
    OperatorNotice.create(kind="anomaly", dedupe_key="old", created_at=utcnow() - datetime.timedelta(days=2))
    OperatorNotice.create(kind="operation_failed", dedupe_key="other")

    text = page(web, "/panel", headers).text
    assert Charts(text).needs == {
        "without-access": 1,
        "failed-operations": 1,
        "goods-review": 1,
        "open-tickets": 2,
        "anomalies": 1,
    }
    for link in ("#without-access", "/panel/system/operations?status=failed", "/panel/goods/deliveries",
                 "/panel/support?status=open", "/panel/system/anomalies"):  # fmt: skip
        assert f'href="{link}"' in text  # the pages that list them (each tested with its own page)
    assert 'id="without-access"' in text
    main = text[text.index("<main>") : text.index("</main>")].lower()  # Home's own words, not the navigation's
    assert not [word for word in ("dead letter", "drift", "entitlement", "xtr", "outbox") if word in main]

    reader = tokyo_operator(web, "reader", ["subscriptions.read", "support.read"])
    shown = Charts(page(web, "/panel", reader).text)
    assert shown.needs == {"without-access": 1, "open-tickets": 2}  # no money, no system without their permissions
    assert set(shown.charts) == {"new-customers", "active-subscriptions"}


def test_a_local_day_with_a_clock_change_is_as_long_as_the_operator_lived_it():
    berlin = zoneinfo.ZoneInfo("Europe/Berlin")
    dates, midnights, tomorrow = local_time.last_days(datetime.datetime(2026, 3, 30, 12), berlin, 3)
    assert [d.isoformat() for d in dates] == ["2026-03-28", "2026-03-29", "2026-03-30"]
    ends = [*midnights[1:], tomorrow]
    assert [int((end - start).total_seconds() // 3600) for start, end in zip(midnights, ends, strict=True)] == [
        24,
        23,  # clocks went forward on the 29th
        24,
    ]
    assert midnights[0] == datetime.datetime(2026, 3, 27, 23)  # CET midnight as the stored UTC
