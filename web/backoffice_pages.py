"""The shop's back office in a browser (SPEC 13.14): Home, Customers, and the pages
of a customer (with their support tickets, personal offers and ratings of the
shop), a subscription, an order and a payment, each linked to the
others and to the fulfillment operations they caused; Settings (the
operator's time zone).

Server-rendered like the System pages (web/pages.py: the same session,
permission, 403 and 503), from the same reads as the panel API
(web/backoffice.py). Refund, Pause and Resume call that API with the
operator's reason, so its rules, refusals and audit are the API's. Money is
shown in major units of its currency (amounts entered in a form too) and
kept in minor units everywhere else.
"""

import uuid

import bottle

from commerce import codes, phase
from commerce.catalogue import active_plans
from commerce.customer_search import INVALID_SEARCH
from commerce.refunds import REFUNDABLE_STATES, refundable, refunds_of
from integrations.payments.amounts import AmountError, exponent, to_decimal_text
from models.base import utcnow
from models.bot import ShopRating
from models.catalogue import AccessCode, GiftCard, PersonalOffer
from models.commerce import Plan
from models.support import SupportTicket
from ops import operators
from web import backoffice, references, wording
from web import home as home_page
from web.answers import bad_cursor
from web.backoffice_codes import MAX_BATCH
from web.pages import page, render
from web.problems import Problem
from web.timeline import TIMELINE_ROWS, timeline

GIB = 1 << 30
SECTION_ROWS = backoffice.DEFAULT_PAGE


def money(amount_minor, currency):
    """19900, RUB → "199.00 RUB"; a currency without a known minor unit shows its minor units."""
    try:
        text = to_decimal_text(abs(amount_minor), currency)
    except AmountError:
        return f"{amount_minor} minor units of {currency}"
    return f"{'-' if amount_minor < 0 else ''}{text} {currency}"


def money_words(amount_minor, currency):
    """money() with the currency as people name it: 250 Telegram Stars (Home; the code stays in a title)."""
    text, name = money(amount_minor, currency), wording.currency_name(currency)
    return text if name == currency else text.removesuffix(currency) + name


def places(currency):
    try:
        return exponent(currency)
    except AmountError:
        return 0


def traffic(limit_bytes):
    if not limit_bytes:
        return "unlimited"
    if limit_bytes % GIB == 0:
        return f"{limit_bytes // GIB} GiB"
    return f"{limit_bytes} bytes"


def devices(limit):
    return "unlimited" if not limit else str(limit)


def show(name, operator, **values):
    return render(
        name,
        operator=operator,
        money=money,
        traffic=traffic,
        devices=devices,
        customer_page=references.customer_page,
        subscription_page=references.subscription_page,
        order_page=references.order_page,
        payment_page=references.payment_page,
        operation_page=references.operation_page,
        subscription_action=references.subscription_action,
        campaign_page=references.campaign_page,
        ticket_page=references.ticket_page,
        words=wording,
        **values,
    )


def _can(operator, permission):
    return permission in operator.permission_set


def _paid_with(order, intents):
    """(provider, whether its payment can be refunded through its API) as commerce/refunds.py picks them:
    the first succeeded payment's provider, and whether that payment has the provider's id."""
    for intent in intents:
        if intent.status == "succeeded":
            return intent.provider, intent.provider_payment_id is not None
    return ("stars" if order.settled_by == "stars" else order.provider), False


def _codes_page(model, cursor):
    """(rows, next cursor): a page of gift cards or access codes, newest first, keyed by id."""
    rows = model.select()
    if cursor:
        if not cursor.isdigit() or int(cursor) > 2**63 - 1:
            raise bad_cursor()
        rows = rows.where(model.id < int(cursor))
    page = list(rows.order_by(model.id.desc()).limit(SECTION_ROWS + 1))
    return page[:SECTION_ROWS], str(page[SECTION_ROWS - 1].id) if len(page) > SECTION_ROWS else None


def build():
    app = bottle.Bottle()

    @app.get("/panel")
    @app.get("/panel/")
    @page()
    def home(operator):
        figures = backoffice.overview(operator)
        return show(
            "home",
            operator,
            figures=figures,
            charts=home_page.charts(operator, money_words),
            needs=home_page.needs_you(operator, figures),
            money_words=money_words,
        )

    @app.get("/panel/settings")
    @page()
    def settings(operator):
        return show("settings", operator, zones=operators.time_zones(), current=operator.time_zone)

    @app.get("/panel/customers")
    @page(operators.SUBSCRIPTIONS_READ)
    def customers(operator):
        query = bottle.request.query
        error, text = None, ""
        try:
            text = backoffice.search_param(query.get("q")).strip()
            rows, next_cursor = backoffice.customers_page(text, query.get("cursor"), backoffice.DEFAULT_PAGE)
        except Problem as refused:
            if refused.code != INVALID_SEARCH:
                raise
            bottle.response.status = 400
            rows, next_cursor, error = [], None, refused.detail
        summary = backoffice.customer_rows(rows)
        return show("customers", operator, text=text, rows=rows, summary=summary, next_cursor=next_cursor, error=error)

    @app.get("/panel/customers/<customer_id>")
    @page(operators.SUBSCRIPTIONS_READ)
    def customer(operator, customer_id):
        found = backoffice.customer_or_404(customer_id)
        subscriptions, plans = backoffice.subscriptions_of(found)
        sections = None
        if _can(operator, operators.PAYMENTS_READ):
            query = bottle.request.query
            orders, orders_next = backoffice.orders_page(found, query.get("ordersCursor"), SECTION_ROWS)
            payments, payments_next = backoffice.payments_page(found, query.get("paymentsCursor"), SECTION_ROWS)
            wallet, wallet_next = backoffice.wallet_page(found, query.get("walletCursor"), SECTION_ROWS)
            sections = {
                "orders": orders,
                "orders_next": orders_next,
                "order_operations": backoffice.order_operations([o.id for o in orders]),
                "payments": payments,
                "payments_next": payments_next,
                "balances": backoffice.wallet_balances(found),
                "wallet": wallet,
                "wallet_next": wallet_next,
                "offers": list(
                    PersonalOffer.select()
                    .where(PersonalOffer.customer == found.id)
                    .order_by(PersonalOffer.id.desc())
                    .limit(SECTION_ROWS)
                ),
                "ratings": list(
                    ShopRating.select()
                    .where(ShopRating.customer == found.id)
                    .order_by(ShopRating.created_at.desc())
                    .limit(SECTION_ROWS)
                ),
                "can_offer": _can(operator, operators.PAYMENTS_WRITE),
                "offer_plans": active_plans() if _can(operator, operators.PAYMENTS_WRITE) else [],
            }
        tickets = None
        if _can(operator, operators.SUPPORT_READ):  # newest first, by the support_tickets_customer index
            tickets = list(
                SupportTicket.select()
                .where(SupportTicket.customer == found.id)
                .order_by(SupportTicket.id.desc())
                .limit(SECTION_ROWS)
            )
        entries = timeline(
            found.id, money, _can(operator, operators.PAYMENTS_READ), _can(operator, operators.SUPPORT_READ)
        )
        return show(
            "customer", operator, customer=found, subscriptions=subscriptions, plans=plans, sections=sections,
            tickets=tickets, timeline=entries, timeline_rows=TIMELINE_ROWS,
        )  # fmt: skip

    @app.get("/panel/subscriptions/<subscription_id>")
    @page(operators.SUBSCRIPTIONS_READ)
    def subscription(operator, subscription_id):
        found = backoffice.subscription_or_404(subscription_id)
        standing, plans, entitlements, operations = backoffice.subscription_detail(found)
        return show(
            "subscription",
            operator,
            subscription=found,
            standing=standing,
            plans=plans,
            entitlements=entitlements,
            operations=operations,
            grace_end=backoffice.grace_end,
            can_change=_can(operator, operators.SUBSCRIPTIONS_WRITE) and found.remote_user_id is not None,
            can_reprovision=_can(operator, operators.SUBSCRIPTIONS_WRITE) and standing.phase == phase.FAILED,
            request_id=str(uuid.uuid4()),  # one per page view: a double submit queues one change
        )

    @app.get("/panel/orders/<order_id>")
    @page(operators.PAYMENTS_READ)
    def order(operator, order_id):
        found = backoffice.order_or_404(order_id)
        intents, transactions, operations = backoffice.order_detail(found)
        choices, effect = wording.refund_form(found, *_paid_with(found, intents))
        return show(
            "order",
            operator,
            order=found,
            intents=intents,
            transactions=transactions,
            operations=operations,
            refunds=refunds_of([found.id])[found.id],
            left=refundable(found),
            places=places(found.currency),
            can_refund=_can(operator, operators.PAYMENTS_WRITE) and found.status in REFUNDABLE_STATES,
            refund_choices=choices,
            refund_effect=effect,
        )

    @app.get("/panel/codes")
    @page(operators.PAYMENTS_READ)
    def codes_page(operator):
        query = bottle.request.query
        access_codes, access_next = _codes_page(AccessCode, query.get("accessCursor"))
        gift_cards, gift_next = _codes_page(GiftCard, query.get("giftCursor"))
        can_issue = _can(operator, operators.PAYMENTS_WRITE)
        shown = {row.plan_id for row in access_codes + gift_cards}
        plans = active_plans() if can_issue else []
        plan_names = {plan.id: plan.name for plan in Plan.select().where(Plan.id.in_(list(shown)))} if shown else {}
        return show(
            "codes", operator, can_issue=can_issue, plans=plans, plan_names=plan_names, max_batch=MAX_BATCH,
            access_codes=access_codes, access_next=access_next, gift_cards=gift_cards, gift_next=gift_next,
            status_of=codes.status_of, now=utcnow(),
        )  # fmt: skip

    @app.get("/panel/payments/<payment_id>")
    @page(operators.PAYMENTS_READ)
    def payment(operator, payment_id):
        intent = backoffice.payment_or_404(payment_id)
        return show("payment", operator, intent=intent, deliveries=backoffice.deliveries_of(intent))

    return app
