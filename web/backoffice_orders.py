"""Every order and every payment in the back office (SPEC 13.14, issue 21): lists, totals and CSV.

GET /v1/panel/orders?status=&kind=&provider=&currency=&from=&to=&customer=&q=&cursor=&limit=     (payments.read)
GET /v1/panel/payments?… the same filters                                                         (payments.read)
GET /panel/orders, /panel/payments          the pages, built on the same reads
GET /panel/orders.csv, /panel/payments.csv  exactly the filtered set, streamed (payments.read)

Newest first (by creation time, then id), in keyset pages; the
totals per currency (count, amount, refunded; integer minor units) are those
of the whole filtered set, not of the page. `from` and `to` are dates
(YYYY-MM-DD) in the operator's time zone, both included. `q` finds an order
or payment id, a provider's payment id (exactly), a customer id, Telegram id
or @username (exactly, any case), or a part of a customer's name. A filter
that cannot match anything sensible is a 400 (`invalid_status`,
`invalid_filter`, `invalid_search`, `invalid_cursor`) and reads nothing.

A CSV is written by a generator reading keyset batches of CSV_BATCH rows, so
a million rows never sit in memory; each text cell that a spreadsheet would
read as a formula (starting with =, +, -, @, a tab or a carriage return)
gets a leading apostrophe. Nothing here writes.
"""

import csv
import datetime
import io
import re
from urllib.parse import urlencode

import bottle
from peewee import Tuple, fn

from commerce.customers import shown_name
from commerce.providers import PAYMENT_METHODS
from config.database import is_postgres
from models.base import db, utcnow
from models.commerce import ORDER_OPERATIONS, ORDER_STATUSES, Customer, Order
from models.payments import INTENT_STATUSES, PaymentIntent
from ops import operators
from web import backoffice, backoffice_pages, local_time, panel, problems
from web.answers import bad_cursor, json_answer, limit_param, parsed_id
from web.pages import page
from web.problems import Problem

CSV_BATCH = 2000
SEARCH_MAX = 100
CURRENCY = re.compile(r"^[A-Z]{3}$")
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
FILTER_NAMES = ("status", "kind", "provider", "currency", "from", "to", "customer", "q")


class Filters:
    """What a list, its totals and its CSV are narrowed to; `given` keeps the query's own words for links."""

    def __init__(self, query, statuses, zone):
        self.given = {name: (query.getunicode(name) or "").strip() for name in FILTER_NAMES}
        given = self.given
        self.status = _one_of(given["status"], statuses, problems.INVALID_STATUS, "status")
        self.kind = _one_of(given["kind"], ORDER_OPERATIONS, problems.INVALID_FILTER, "kind")
        self.provider = _one_of(given["provider"], PAYMENT_METHODS, problems.INVALID_FILTER, "provider")
        self.currency = given["currency"].upper() or None
        if self.currency and not CURRENCY.match(self.currency):
            raise Problem(400, problems.INVALID_FILTER, "currency is a three-letter code such as RUB, USD or XTR")
        self.start = _day(given["from"], zone, "from")
        self.end = _day(given["to"], zone, "to")
        if self.end is not None:
            self.end += datetime.timedelta(days=1)  # `to` is included: up to the next local midnight
        if self.start and self.end and self.start >= self.end:
            raise Problem(400, problems.INVALID_FILTER, "from must be a day before or equal to to")
        self.customer = given["customer"] or None
        if self.customer and (len(self.customer) > backoffice.TEXT_ID_MAX or not self.customer.isprintable()):
            raise Problem(400, problems.INVALID_FILTER, "customer is a customer id (1 to 64 printable characters)")
        self.q = given["q"] or None
        if self.q and (len(self.q) > SEARCH_MAX or not self.q.isprintable()):
            raise Problem(400, problems.INVALID_SEARCH, f"the search is 1 to {SEARCH_MAX} printable characters")

    def query_string(self, **extra):
        """These filters (and `extra`) as a URL query, for the next page's and the CSV's links."""
        return urlencode({k: v for k, v in {**self.given, **extra}.items() if v})


def _one_of(raw, allowed, code, name):
    if raw and raw not in allowed:
        raise Problem(400, code, f"{name} must be one of {', '.join(allowed)}")
    return raw or None


def _day(raw, zone, name):
    """The local midnight starting day `raw` (YYYY-MM-DD) as naive UTC, None when absent, or a 400."""
    if not raw:
        return None
    try:
        day = datetime.date.fromisoformat(raw) if len(raw) == 10 else None
    except ValueError:
        day = None
    if day is None:
        raise Problem(400, problems.INVALID_FILTER, f"{name} is a day as YYYY-MM-DD")
    local = datetime.datetime.combine(day, datetime.time(), tzinfo=zone)
    return local.astimezone(datetime.timezone.utc).replace(tzinfo=None)


def _contains(field, text):
    """`text` anywhere in `field`, any case (PostgreSQL lowers every script, SQLite ASCII only), no wildcards."""
    position = fn.STRPOS if is_postgres() else fn.INSTR
    return position(fn.LOWER(field), fn.LOWER(text)) > 0


def _customers_named(text):
    """Ids of the customers `text` names: id, Telegram id, @username (exactly, any case) or a part of the name."""
    bare = text.removeprefix("@")
    named = (Customer.id == text) | (fn.LOWER(Customer.telegram_username) == bare.lower())
    named |= _contains(Customer.display_name, text)
    number = parsed_id(text)
    if number is not None:
        named |= Customer.telegram_id == number
    return Customer.select(Customer.id).where(named)


def _where(rows, conditions):
    for condition in conditions:
        rows = rows.where(condition)
    return rows


def order_conditions(filters):
    found = []
    for value, field in (
        (filters.status, Order.status),
        (filters.kind, Order.operation),
        (filters.provider, Order.provider),
        (filters.currency, Order.currency),
        (filters.customer, Order.customer),
    ):
        if value:
            found.append(field == value)
    if filters.start:
        found.append(Order.created_at >= filters.start)
    if filters.end:
        found.append(Order.created_at < filters.end)
    if filters.q:
        paid_as = PaymentIntent.select(PaymentIntent.order).where(PaymentIntent.provider_payment_id == filters.q)
        searched = Order.customer.in_(_customers_named(filters.q)) | Order.id.in_(paid_as)
        number = parsed_id(filters.q.removeprefix("#"))
        if number is not None:
            searched |= Order.id == number
        found.append(searched)
    return found


def payment_conditions(filters):
    found = []
    for value, field in (
        (filters.status, PaymentIntent.status),
        (filters.kind, Order.operation),
        (filters.provider, PaymentIntent.provider),
        (filters.currency, PaymentIntent.currency),
        (filters.customer, Order.customer),
    ):
        if value:
            found.append(field == value)
    if filters.start:
        found.append(PaymentIntent.created_at >= filters.start)
    if filters.end:
        found.append(PaymentIntent.created_at < filters.end)
    if filters.q:
        searched = (PaymentIntent.provider_payment_id == filters.q) | Order.customer.in_(_customers_named(filters.q))
        number = parsed_id(filters.q.removeprefix("#"))
        if number is not None:
            searched |= (PaymentIntent.id == number) | (PaymentIntent.order == number)
        found.append(searched)
    return found


def _orders(filters):
    return _where(Order.select(Order, Customer).join(Customer), order_conditions(filters))


def _payments(filters):
    rows = PaymentIntent.select(PaymentIntent, Order, Customer).join(Order).join(Customer)
    return _where(rows, payment_conditions(filters))


def _newest(rows, model, before, limit):
    """`rows` newest first from after `before` ((created_at, id) of the last row shown, or None): one
    row-value comparison, which the (created_at, id) index starts its backward scan at."""
    if before is not None:
        rows = rows.where(Tuple(model.created_at, model.id) < Tuple(*before))
    return list(rows.order_by(model.created_at.desc(), model.id.desc()).limit(limit))


def _position(cursor):
    """(created_at, id) a cursor this API returned names, or a 400 invalid_cursor."""
    if not cursor:
        return None
    created_at, key = backoffice.decode_position(cursor)
    row_id = parsed_id(key)
    if row_id is None:
        raise bad_cursor()
    return created_at, row_id


def _page(rows, model, cursor, limit):
    found = _newest(rows, model, _position(cursor), limit + 1)
    last = found[limit - 1] if len(found) > limit else None
    return found[:limit], backoffice.encode_position(last.created_at, last.id) if last else None


def orders_page(filters, cursor, limit):
    """(orders newest first, the next page's cursor or None)."""
    return _page(_orders(filters), Order, cursor, limit)


def payments_page(filters, cursor, limit):
    return _page(_payments(filters), PaymentIntent, cursor, limit)


def order_totals(filters):
    """[{currency, count, amountMinor, refundedAmountMinor}] of the whole filtered set, by currency."""
    rows = _where(
        Order.select(
            Order.currency, fn.COUNT(Order.id), fn.SUM(Order.amount_minor), fn.SUM(Order.refunded_amount_minor)
        ).join(Customer),
        order_conditions(filters),
    )
    return [
        {"currency": c, "count": n, "amountMinor": int(amount or 0), "refundedAmountMinor": int(refunded or 0)}
        for c, n, amount, refunded in rows.group_by(Order.currency).order_by(Order.currency).tuples()
    ]


def payment_totals(filters):
    """[{currency, count, amountMinor}] of the whole filtered set, by currency."""
    rows = _where(
        PaymentIntent.select(
            PaymentIntent.currency, fn.COUNT(PaymentIntent.id), fn.SUM(PaymentIntent.amount_minor)
        ).join(Order),
        payment_conditions(filters),
    )
    return [
        {"currency": c, "count": n, "amountMinor": int(amount or 0)}
        for c, n, amount in rows.group_by(PaymentIntent.currency).order_by(PaymentIntent.currency).tuples()
    ]


# -- JSON -----------------------------------------------------------------------------------------


def listed_order_json(order):
    return {
        **backoffice.order_json(order, []),
        "customerName": shown_name(order.customer.display_name),
    }


def listed_payment_json(intent):
    order = intent.order
    return {
        **backoffice.payment_json(intent),
        "kind": order.operation,
        "customerId": order.customer_id,
        "customerName": shown_name(order.customer.display_name),
    }


# -- CSV ------------------------------------------------------------------------------------------

ORDER_COLUMNS = (
    "order id", "created", "customer id", "customer name", "Telegram id", "kind", "status", "amount minor",
    "refunded minor", "currency", "amount", "provider", "settled by", "paid", "page",
)  # fmt: skip
PAYMENT_COLUMNS = (
    "payment id", "created", "order id", "kind", "customer id", "customer name", "provider", "provider payment id",
    "status", "amount minor", "currency", "amount", "page",
)  # fmt: skip


def neutralised(value):
    """A cell as text a spreadsheet shows rather than runs: a formula's first character gets a leading '."""
    text = "" if value is None else str(value)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def order_row(order, zone):
    customer = order.customer
    return (
        order.id, local_time.local_iso(order.created_at, zone), customer.id, shown_name(customer.display_name),
        customer.telegram_id, order.operation, order.status, order.amount_minor, order.refunded_amount_minor,
        order.currency, backoffice_pages.money(order.amount_minor, order.currency), order.provider,
        order.settled_by, local_time.local_iso(order.paid_at, zone), f"/panel/orders/{order.id}",
    )  # fmt: skip


def payment_row(intent, zone):
    order = intent.order
    return (
        intent.id, local_time.local_iso(intent.created_at, zone), order.id, order.operation, order.customer.id,
        shown_name(order.customer.display_name), intent.provider, intent.provider_payment_id, intent.status,
        intent.amount_minor, intent.currency, backoffice_pages.money(intent.amount_minor, intent.currency),
        f"/panel/payments/{intent.id}",
    )  # fmt: skip


def csv_stream(rows, model, columns, to_row, batch=None):
    """The CSV of `rows` (a filtered select), newest first, as UTF-8 chunks of one keyset batch each.
    Each batch starts after the last row written, so a row is written once; one created meanwhile is newer
    than the first batch and not reached."""
    batch = batch or CSV_BATCH
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")

    def taken():
        text = buffer.getvalue()
        buffer.seek(0)
        buffer.truncate()
        return text.encode()

    buffer.write("\ufeff")  # a byte order mark, so a spreadsheet reads the names as UTF-8
    writer.writerow(columns)
    yield taken()
    before = None
    try:
        while True:
            found = _newest(rows, model, before, batch)
            writer.writerows([neutralised(cell) for cell in to_row(row)] for row in found)
            if found:
                yield taken()
            if len(found) < batch:
                return
            before = (found[-1].created_at, found[-1].id)
    finally:
        if not db.is_closed() and not db.in_transaction():
            db.close()


def csv_answer(name, chunks):
    bottle.response.content_type = "text/csv; charset=utf-8"
    stamp = utcnow().strftime("%Y%m%d-%H%M%S")
    bottle.response.set_header("Content-Disposition", f'attachment; filename="{name}-{stamp}.csv"')
    bottle.response.set_header("Cache-Control", "no-store")
    bottle.response.set_header(problems.REQUEST_ID_HEADER, problems.request_id())
    return chunks


# -- routes ---------------------------------------------------------------------------------------

LISTS = {
    "orders": (ORDER_STATUSES, orders_page, order_totals, listed_order_json),
    "payments": (INTENT_STATUSES, payments_page, payment_totals, listed_payment_json),
}


def _filters(operator, statuses):
    return Filters(bottle.request.query, statuses, local_time.zone_of(operator))


def build():
    app = bottle.Bottle()
    problems.install(app)
    signed_in = panel.signed_in

    def api(name):
        statuses, paged, totalled, as_json = LISTS[name]

        def route(operator):
            query = bottle.request.query
            filters = _filters(operator, statuses)
            limit = limit_param(query.get("limit"), backoffice.DEFAULT_PAGE, backoffice.MAX_PAGE)
            rows, next_cursor = paged(filters, query.get("cursor"), limit)
            return json_answer(
                200, {name: [as_json(row) for row in rows], "totals": totalled(filters), "nextCursor": next_cursor}
            )

        return route

    def listing(name):
        statuses, paged, totalled, _ = LISTS[name]

        def view(operator):
            error = None
            try:
                filters = _filters(operator, statuses)
                rows, next_cursor = paged(filters, bottle.request.query.get("cursor"), backoffice.DEFAULT_PAGE)
                totals = totalled(filters)
            except Problem as refused:
                if refused.status != 400:
                    raise
                bottle.response.status = 400
                filters, rows, next_cursor, totals, error = None, [], None, [], refused.detail
            given = filters.given if filters else {k: bottle.request.query.getunicode(k) or "" for k in FILTER_NAMES}
            return backoffice_pages.show(
                name,
                operator,
                given=given,
                statuses=statuses,
                kinds=ORDER_OPERATIONS,
                providers=PAYMENT_METHODS,
                rows=rows,
                totals=totals,
                next_link=f"?{filters.query_string(cursor=next_cursor)}" if next_cursor else None,
                csv_link=f"/panel/{name}.csv?{filters.query_string()}" if filters else None,
                error=error,
            )

        return view

    def export(name, rows_of, model, columns, to_row):
        statuses = LISTS[name][0]

        def route(operator):
            filters = _filters(operator, statuses)
            zone = local_time.zone_of(operator)
            chunks = csv_stream(rows_of(filters), model, columns, lambda row: to_row(row, zone))
            return csv_answer(name, chunks)

        return route

    for name in LISTS:
        app.get(f"/v1/panel/{name}")(signed_in(operators.PAYMENTS_READ)(api(name)))
        app.get(f"/panel/{name}")(page(operators.PAYMENTS_READ)(listing(name)))
    app.get("/panel/orders.csv")(
        signed_in(operators.PAYMENTS_READ)(export("orders", _orders, Order, ORDER_COLUMNS, order_row))
    )
    app.get("/panel/payments.csv")(
        signed_in(operators.PAYMENTS_READ)(export("payments", _payments, PaymentIntent, PAYMENT_COLUMNS, payment_row))
    )
    return app
