"""Home's charts and its "needs you" list (SPEC 13.14): the shop's last 30 days per day of the
operator's time zone, drawn on the server as inline SVG, and what waits for an operator.

Every chart point is a count or a sum read from the database for one day, kept
on the page in `data-` attributes beside a <title> that says it in words, so
a test (or a script) reads the same numbers the owner sees. Each series is one
aggregate query over the 30 days' window (models/days.py numbers the days, the
same SQL on both databases), its window found through an index on the time it
groups by (revenue then reads the revenue account's entries: docs/back-office.md):

- revenue: the ledger's revenue account per day and currency (commerce/revenue.py);
- new customers: customers by creation time;
- active subscriptions: at the end of each day (today: now), the subscriptions with a provisioned,
  unpaused period covering that moment, through entitlements_period_end (periods ending after the window
  began); the one join over the days' ends that is not a GROUP BY on a time column;
- payments: those created that day that ended (succeeded, canceled, failed, expired), and how many
  succeeded, as the anomaly rule payment_success_rate counts them (payment_intents_status);
- failing operations: fulfillment operations failed or retrying now, by the day they were queued
  (fulfillment_operations_status).

A section follows the permission its page needs, as Home's figures do.
"""

import datetime

from peewee import SQL, fn

from commerce.revenue import revenue_by_day
from models import days
from models.base import utcnow
from models.commerce import Customer
from models.fulfillment import FulfillmentOperation
from models.goods import GoodsDelivery
from models.ops import OperatorNotice
from models.payments import PaymentIntent
from models.support import SupportTicket
from models.transactions import fetch_all
from ops import anomalies, operators
from web import local_time

DAYS = 30
ANOMALY_WINDOW = datetime.timedelta(hours=24)
ENDED_PAYMENTS = ("succeeded", "canceled", "failed", "expired")
FAILING_OPERATIONS = ("failed", "retrying")
# A period the panel holds or held: one still pending or failed never gave access, and a superseded
# one did until its successor's create (distinct subscriptions count an overlap once).
HELD_STATUSES = ("active", "limited", "superseded", "expired")
CHART_WIDTH, CHART_HEIGHT = 600, 120
STEP = CHART_WIDTH / DAYS


def _per_day(column, *conditions, starts, end):
    """[count of rows per day] of the model `column` belongs to."""
    rows = (
        column.model.select(days.day_index(column, starts).alias("day_number"), fn.COUNT(SQL("*")))
        .where(days.within(column, starts, end), *conditions)
        .group_by(SQL("day_number"))
        .tuples()
    )
    counts = [0] * len(starts)
    for day, count in rows:
        counts[int(day)] = count
    return counts


def new_customers(starts, end):
    return _per_day(Customer.created_at, starts=starts, end=end)


def failing_operations(starts, end):
    return _per_day(
        FulfillmentOperation.created_at, FulfillmentOperation.status.in_(FAILING_OPERATIONS), starts=starts, end=end
    )


def payments(starts, end):
    """([ended payments per day], [succeeded ones per day])."""
    rows = (
        PaymentIntent.select(
            days.day_index(PaymentIntent.created_at, starts).alias("day_number"),
            PaymentIntent.status == "succeeded",
            fn.COUNT(PaymentIntent.id),
        )
        .where(PaymentIntent.status.in_(ENDED_PAYMENTS), days.within(PaymentIntent.created_at, starts, end))
        .group_by(SQL("day_number"), PaymentIntent.status == "succeeded")
        .tuples()
    )
    ended, succeeded = [0] * len(starts), [0] * len(starts)
    for day, success, count in rows:
        ended[int(day)] += count
        if success:
            succeeded[int(day)] += count
    return ended, succeeded


_ACTIVE_AT = """
SELECT moments.column1, COUNT(DISTINCT e.subscription_id)
FROM (VALUES {moments}) AS moments
JOIN entitlements e ON e.starts_at <= moments.column2 AND e.ends_at > moments.column2
WHERE e.ends_at > %s AND e.status IN ({statuses})
  AND (e.paused_at IS NULL OR e.paused_at > moments.column2)
GROUP BY moments.column1
"""


def active_subscriptions(moments):
    """[subscriptions with a held, unpaused period covering each moment]."""
    sql = _ACTIVE_AT.format(
        moments=", ".join(["(%s, %s)"] * len(moments)), statuses=", ".join(["%s"] * len(HELD_STATUSES))
    )
    params = [value for index, moment in enumerate(moments) for value in (index, moment)]
    counts = [0] * len(moments)
    for index, count in fetch_all(sql, (*params, min(moments), *HELD_STATUSES)):
        counts[int(index)] = count
    return counts


# -- the charts ---------------------------------------------------------------------------------


def bars(values, dates, titles, data=None):
    """A bar per day scaled to the largest magnitude; bars below zero hang from the zero line. A day of 0
    keeps a one-unit mark so that the day is still there to point at."""
    high, low = max([0, *values]), min([0, *values])
    span = (high - low) or 1
    zero = CHART_HEIGHT * high / span
    points = []
    for index, value in enumerate(values):
        height = CHART_HEIGHT * abs(value) / span
        points.append(
            {
                "x": round(index * STEP + 1, 1),
                "y": round(zero - height if value > 0 else zero if value < 0 else min(zero, CHART_HEIGHT - 1), 1),
                "w": round(STEP - 2, 1),
                "h": round(max(height, 1), 1),
                "day": dates[index].isoformat(),
                "value": value,
                "zero": value == 0,
                "negative": value < 0,
                "title": f"{_day(dates[index])}: {titles[index]}",
                "data": {key: series[index] for key, series in (data or {}).items()},
            }
        )
    return {"points": points, "width": CHART_WIDTH, "height": CHART_HEIGHT, "first": _day(dates[0]),
            "last": _day(dates[-1])}  # fmt: skip


def _day(date):
    return f"{date.day} {date.strftime('%b')}"


def percent(part, whole):
    return None if not whole else part * 100 // whole


def charts(operator, money, now=None):
    """Each chart's series, its numbers and its bars; a chart is None without the permission it needs."""
    now = now or utcnow()
    zone = local_time.zone_of(operator)
    dates, starts, end = local_time.last_days(now, zone, DAYS)
    allowed = operator.permission_set
    shown = {"revenue": None, "customers": None, "subscriptions": None, "payments": None, "operations": None}
    if operators.PAYMENTS_READ in allowed:
        shown["revenue"] = [
            {
                "currency": currency,
                "total": sum(series),
                "today": series[-1],
                "chart": bars(series, dates, [money(value, currency) for value in series]),
            }
            for currency, series in revenue_by_day(starts, end).items()
        ]
        ended, succeeded = payments(starts, end)
        shown["payments"] = {
            "succeeded": sum(succeeded),
            "ended": sum(ended),
            "rate": percent(sum(succeeded), sum(ended)),
            "chart": bars(
                [percent(s, e) or 0 for s, e in zip(succeeded, ended, strict=True)],
                dates,
                [f"{s} of {e} payments succeeded" if e else "no payments ended" for s, e in zip(succeeded, ended,
                                                                                               strict=True)],
                {"succeeded": succeeded, "ended": ended},
            ),
        }  # fmt: skip
    if operators.SUBSCRIPTIONS_READ in allowed:
        new = new_customers(starts, end)
        shown["customers"] = {"total": sum(new), "today": new[-1],
                              "chart": bars(new, dates, [f"{n} new customers" for n in new])}  # fmt: skip
        active = active_subscriptions([*starts[1:], now])
        shown["subscriptions"] = {
            "latest": active[-1],
            "chart": bars(active, dates, [f"{n} active subscriptions" for n in active]),
        }
    if operators.SYSTEM_READ in allowed:
        failing = failing_operations(starts, end)
        shown["operations"] = {
            "total": sum(failing),
            "chart": bars(failing, dates, [f"{n} operations queued that day are failing" for n in failing]),
        }
    return shown


# -- needs you ----------------------------------------------------------------------------------


def needs_you(operator, figures, now=None):
    """[{key, label, count, href}] of what waits for an operator, each only with the permission of the page
    that lists it; paid-without-access and failed operations are Home's figures (web/backoffice.py)."""
    now = now or utcnow()
    allowed = operator.permission_set
    items = []
    if figures["subscriptions"] is not None:
        items.append(("without-access", "paid, without access", figures["subscriptions"]["withoutAccess"],
                      "#without-access"))  # fmt: skip
    if figures["operations"] is not None:
        items.append(("failed-operations", "failed operations", figures["operations"]["failed"],
                      "/panel/system/operations?status=failed"))  # fmt: skip
    if operators.PAYMENTS_READ in allowed:
        review = GoodsDelivery.select().where(GoodsDelivery.status == "needs_review").count()
        items.append(("goods-review", "goods deliveries to review", review, "/panel/goods/deliveries"))
    if operators.SUPPORT_READ in allowed:
        tickets = SupportTicket.select().where(SupportTicket.status == "open").count()
        items.append(("open-tickets", "open support tickets", tickets, "/panel/support?status=open"))
    if operators.SYSTEM_READ in allowed:
        recent = (
            OperatorNotice.select()
            .where(OperatorNotice.kind == anomalies.NOTICE_KIND, OperatorNotice.created_at >= now - ANOMALY_WINDOW)
            .count()
        )
        items.append(("anomalies", "anomalies in the last 24 hours", recent, "/panel/system/anomalies"))
    return [{"key": key, "label": label, "count": count, "href": href} for key, label, count, href in items]
