"""The panel API of the shop's back office (SPEC 13.14): what an operator reads
about customers, subscriptions, orders, payments and wallets, and the refund,
pause and resume they act with.

GET  /v1/panel/overview                                       Home: revenue, new customers, active subscriptions,
                                                              failing operations, queue health (per permission)
GET  /v1/panel/session/time-zone, PUT {timeZone}              the signed-in operator's own time zone
GET  /v1/panel/customers?q=&cursor=&limit=                    search, or the newest first (subscriptions.read)
GET  /v1/panel/customers/{c}                                  a customer and their subscriptions with phase
GET  /v1/panel/customers/{c}/orders|payments|wallet           (payments.read), keyset pages
GET  /v1/panel/subscriptions/{s}                              periods and operations (subscriptions.read)
POST /v1/panel/customers/{c}/subscriptions/{s}/pause|resume   (subscriptions.write, X-Operator-Reason)
POST /v1/panel/customers/{c}/subscriptions/{s}/reprovision    a failed one provisioned again (the same)
GET  /v1/panel/orders/{o}, /v1/panel/payments/{p}             (payments.read)
POST /v1/panel/orders/{o}/refund {amountMinor?, to?}          in full or in part, back where it was paid or to
                                                              the wallet (payments.write, X-Operator-Reason)

The same rules as the rest of the panel API (web/panel.py): a session, the
permission, `X-Operator-Reason` on refund, pause and resume with the audit
event in the change's transaction. One's own time zone needs the session
only (audited, no reason): it is a PUT, which no cross-site form can send,
and it changes nothing but how pages show times. Times are UTC here; pages
show them in the operator's zone. Nothing here carries a subscription link,
squad ids, a desired state, a summary, a provider body or a payer's
confirmation URL.
"""

import base64
import datetime

import bottle
from peewee import fn

from commerce import ledger, phase
from commerce.customer_search import INVALID_SEARCH, SearchRejected, find_customers
from commerce.customers import shown_name
from commerce.ledger import history
from commerce.refunds import DESTINATIONS as REFUND_DESTINATIONS
from commerce.refunds import refund_order, refunds_of
from commerce.revenue import revenue
from commerce.settlement import SettlementRejected
from fulfillment import changes
from fulfillment.enqueue import FulfillmentRequestRejected
from jobs import client
from jobs.engine.states import DEAD_LETTER_STATES
from models.base import db, utcnow
from models.commerce import Customer, Order, Plan, Subscription
from models.fulfillment import Entitlement, FulfillmentOperation
from models.ledger import LedgerAccount, LedgerEntry, LedgerTransaction
from models.ops import MaintenanceState, OutboxEvent
from models.payments import PaymentIntent, ProviderWebhookEvent
from models.transactions import locked
from ops import maintenance, operators
from ops.records import record_audit
from web import local_time, panel, problems
from web.answers import bad_cursor, cursor_text, id_param, iso, json_answer, json_body, limit_param
from web.problems import Problem

DEFAULT_PAGE = 25
MAX_PAGE = 200
SUBSCRIPTION_OPERATIONS = 100
WITHOUT_ACCESS_LISTED = 20  # Home links this many of the paid subscriptions without access
TEXT_ID_MAX = 64
# What a refund's audit event is filed under.
PAYMENTS_CATEGORY = "payments"
REFUNDED = "panel.order.refunded"
# The keys an order's own operations carry (SPEC 2.24, fulfillment/revocation.py).
ORDER_KEYS = ("order:{}:fulfill", "order:{}:addon", "gift:{}:fulfill", "code:{}:fulfill", "refund:{}:disable")
SETTLEMENT_PROBLEMS = {
    problems.ORDER_NOT_FOUND: 404,
    problems.ORDER_NOT_REFUNDABLE: 409,
    problems.INVALID_REFUND_AMOUNT: 400,
    problems.INVALID_REFUND_DESTINATION: 400,
    problems.PARTIAL_REFUND_UNSUPPORTED: 409,
    problems.REFUND_EXCEEDS_WALLET: 409,
}


# -- JSON ---------------------------------------------------------------------------------------


def money_json(amounts):
    return [{"currency": currency, "amountMinor": amount} for currency, amount in sorted(amounts.items())]


def customer_json(customer):
    return {
        "id": customer.id,
        "displayName": shown_name(customer.display_name),
        "telegramId": customer.telegram_id,
        "telegramUsername": customer.telegram_username,
        "languageCode": customer.language_code,
        "blocked": bool(customer.blocked),
        "blockedReason": customer.blocked_reason,
        "createdAt": iso(customer.created_at),
    }


def subscription_json(subscription, standing, plans):
    entitlement = standing.entitlement
    plan = plans.get(entitlement.plan_id) if entitlement else None
    return {
        "id": subscription.id,
        "customerId": subscription.customer_id,
        "slot": subscription.slot,
        "panelUsername": subscription.remote_username,
        "phase": standing.phase,
        "autoRenew": bool(subscription.auto_renew),
        "createdAt": iso(subscription.created_at),
        "entitlementId": entitlement.id if entitlement else None,
        "planId": plan.id if plan else None,
        "planName": plan.name if plan else None,
        "startsAt": iso(entitlement.starts_at) if entitlement else None,
        "endsAt": iso(entitlement.ends_at) if entitlement else None,
        "graceEndsAt": iso(grace_end(entitlement)) if entitlement else None,
        "trafficLimitBytes": entitlement.traffic_allowance_bytes if entitlement else None,
        "deviceLimit": entitlement.device_limit if entitlement else None,
        "pausedAt": iso(entitlement.paused_at) if entitlement else None,
    }


def entitlement_json(entitlement):
    return {
        "id": entitlement.id,
        "orderId": entitlement.order_id,
        "planId": entitlement.plan_id,
        "status": entitlement.status,
        "startsAt": iso(entitlement.starts_at),
        "endsAt": iso(entitlement.ends_at),
        "trafficLimitBytes": entitlement.traffic_allowance_bytes,
        "deviceLimit": entitlement.device_limit,
        "pausedAt": iso(entitlement.paused_at),
        "createdAt": iso(entitlement.created_at),
    }


def order_json(order, operation_ids):
    return {
        "id": order.id,
        "customerId": order.customer_id,
        "subscriptionId": order.subscription_id,
        "kind": order.operation,
        "status": order.status,
        "amountMinor": order.amount_minor,
        "refundedAmountMinor": order.refunded_amount_minor,
        "currency": order.currency,
        "planId": order.plan_id,
        "provider": order.provider,
        "settledBy": order.settled_by,
        "createdAt": iso(order.created_at),
        "paidAt": iso(order.paid_at),
        "fulfilledAt": iso(order.fulfilled_at),
        "refundedAt": iso(order.refunded_at),
        "operationIds": operation_ids,
    }


def refund_json(refund):
    """A refund and its provider's state; the provider's ids, never its answer."""
    return {
        "id": refund.id,
        "orderId": refund.order_id,
        "amountMinor": refund.amount_minor,
        "currency": refund.currency,
        "destination": refund.destination,
        "status": refund.status,
        "provider": refund.provider,
        "providerRefundId": refund.provider_refund_id,
        "lastErrorCode": refund.last_error_code,
        "createdAt": iso(refund.created_at),
        "completedAt": iso(refund.completed_at),
    }


def payment_json(intent):
    return {
        "id": intent.id,
        "orderId": intent.order_id,
        "provider": intent.provider,
        "providerPaymentId": intent.provider_payment_id,
        "amountMinor": intent.amount_minor,
        "currency": intent.currency,
        "status": intent.status,
        "createdAt": iso(intent.created_at),
        "updatedAt": iso(intent.updated_at),
        "lastPolledAt": iso(intent.last_polled_at),
    }


def delivery_json(event):
    return {
        "id": event.id,
        "providerEventId": event.provider_event_id,
        "receivedAt": iso(event.received_at),
        "signatureOk": bool(event.signature_ok),
        "verdict": event.verdict,
        "processedAt": iso(event.processed_at),
        "outcome": event.outcome,
    }


def wallet_entry_json(item):
    return {
        "entryId": item.entry_id,
        "transactionId": item.transaction_id,
        "kind": item.kind,
        "orderId": item.order_id,
        "amountMinor": item.amount_minor,
        "currency": item.currency,
        "expiresAt": iso(item.expires_at),
        "createdAt": iso(item.created_at),
    }


def transaction_json(transaction, entries):
    return {
        "id": transaction.id,
        "kind": transaction.kind,
        "reversesId": transaction.reverses_id,
        "createdAt": iso(transaction.created_at),
        "entries": [
            {"account": entry.account.name, "amountMinor": entry.amount_minor, "currency": entry.currency}
            for entry in entries
        ],
    }


# -- reading ------------------------------------------------------------------------------------


def grace_end(entitlement):
    return entitlement.ends_at + datetime.timedelta(hours=entitlement.grace_period_hours)


def overview(operator, now=None):
    """The Home page's figures; a section is None without the permission it needs."""
    now = now or utcnow()
    zone = local_time.zone_of(operator)
    today, month = local_time.day_start(now, zone), local_time.month_start(now, zone)
    allowed = operator.permission_set
    body = {
        "timeZone": zone.key,
        "date": local_time.local_date(now, zone).isoformat(),
        "revenue": None,
        "customers": None,
        "subscriptions": None,
        "operations": None,
        "queue": None,
    }
    if operators.PAYMENTS_READ in allowed:
        body["revenue"] = {"today": money_json(revenue(today)), "month": money_json(revenue(month))}
    if operators.SUBSCRIPTIONS_READ in allowed:
        new = Customer.select()
        body["customers"] = {
            "newToday": new.where(Customer.created_at >= today).count(),
            "newThisMonth": new.where(Customer.created_at >= month).count(),
        }
        without_access = paid_without_access(now)
        body["subscriptions"] = {
            "active": active_subscriptions(now),
            "withoutAccess": len(without_access),
            "withoutAccessIds": without_access[:WITHOUT_ACCESS_LISTED],
        }
    if operators.SYSTEM_READ in allowed:
        body["operations"] = failing_operations()
        body["queue"] = queue_health()
    return body


def active_subscriptions(now):
    """Subscriptions with a provisioned, unpaused period that has not ended (phase active or expiring).
    Counted over entitlements without an index: the worker writes their status on every record, and an
    index on it would cost each of those updates its in-place (HOT) write (migration 0007)."""
    return (
        Entitlement.select(fn.COUNT(fn.DISTINCT(Entitlement.subscription)))
        .where(
            Entitlement.status.in_(("active", "limited")),
            Entitlement.paused_at.is_null(),
            Entitlement.ends_at > now,
        )
        .scalar()
    )


def paid_without_access(now):
    """Ids of the subscriptions in phase `failed`: paid for, and no access until an operator acts. Cancelling
    the failed operation leaves them here; a re-provision (then they are provisioning) or a refund takes
    them off.
    The candidates are few — periods never provisioned whose create ended, and periods the panel reported
    in a status Omniflow does not know — and their phase decides."""
    never_provisioned = FulfillmentOperation.select(FulfillmentOperation.entitlement).where(
        FulfillmentOperation.operation == "create", FulfillmentOperation.status.in_(phase.ENDED_WITHOUT_PROVISIONING)
    )
    candidates = [
        row.subscription_id
        for row in Entitlement.select(Entitlement.subscription)
        .where(
            ((Entitlement.status == "pending") & Entitlement.id.in_(never_provisioned))
            | (Entitlement.status == "failed")
        )
        .distinct()
    ]
    standings = phase.standings(candidates, now)
    return sorted(s for s, standing in standings.items() if standing.phase == phase.FAILED)


def failing_operations():
    """{failed, retrying} operations. Read without an index for the same reason (migration 0003)."""
    counts = dict(
        FulfillmentOperation.select(FulfillmentOperation.status, fn.COUNT(FulfillmentOperation.id))
        .where(FulfillmentOperation.status.in_(("failed", "retrying")))
        .group_by(FulfillmentOperation.status)
        .tuples()
    )
    return {"failed": counts.get("failed", 0), "retrying": counts.get("retrying", 0)}


def queue_health():
    by_state = {}
    for (_, state), count in client.counts().items():
        by_state[state] = by_state.get(state, 0) + count
    return {
        "available": by_state.get("available", 0),
        "running": by_state.get("running", 0),
        "retryable": by_state.get("retryable", 0),
        "scheduled": by_state.get("scheduled", 0),
        "deadLetters": sum(by_state.get(state, 0) for state in DEAD_LETTER_STATES),
        "outboxPending": OutboxEvent.select().where(OutboxEvent.published_at.is_null()).count(),
        "maintenance": bool(MaintenanceState.get_by_id(maintenance.MAINTENANCE_ROW).active),
    }


def text_id(raw, code, what):
    """A customer's or subscription's id from the path (text, a UUID when Omniflow made it), else a 400."""
    if not raw or len(raw) > TEXT_ID_MAX or not raw.isprintable():
        raise Problem(400, code, f"{what} is 1 to {TEXT_ID_MAX} printable characters")
    return raw


def customer_or_404(raw):
    customer_id = text_id(raw, problems.INVALID_CUSTOMER_ID, "a customer id")
    customer = Customer.get_or_none(Customer.id == customer_id)
    if customer is None:
        raise Problem(404, problems.CUSTOMER_NOT_FOUND, "no such customer")
    return customer


def subscription_or_404(raw):
    subscription_id = text_id(raw, problems.INVALID_SUBSCRIPTION_ID, "a subscription id")
    subscription = Subscription.get_or_none(Subscription.id == subscription_id)
    if subscription is None:
        raise Problem(404, problems.SUBSCRIPTION_NOT_FOUND, "no such subscription")
    return subscription


def order_or_404(raw):
    order_id = id_param(raw, problems.INVALID_ORDER_ID, "an order id")
    order = Order.get_or_none(Order.id == order_id)
    if order is None:
        raise Problem(404, problems.ORDER_NOT_FOUND, f"order {order_id} does not exist")
    return order


def payment_or_404(raw):
    payment_id = id_param(raw, problems.INVALID_PAYMENT_ID, "a payment id")
    intent = PaymentIntent.get_or_none(PaymentIntent.id == payment_id)
    if intent is None:
        raise Problem(404, problems.PAYMENT_NOT_FOUND, f"payment {payment_id} does not exist")
    return intent


def encode_position(created_at, key):
    return base64.urlsafe_b64encode(f"at:{created_at.isoformat()}|{key}".encode()).decode().rstrip("=")


def decode_position(raw):
    """(created_at, id) of a newest-first page's last row, from a cursor this API returned."""
    at, _, key = cursor_text(raw).partition("|")
    try:
        created_at = datetime.datetime.fromisoformat(at.removeprefix("at:")) if at.startswith("at:") else None
    except ValueError:
        created_at = None
    if created_at is None or created_at.tzinfo is not None or not key or len(key) > TEXT_ID_MAX:
        raise bad_cursor()
    return created_at, key


def search_param(raw):
    """The search text of a query string as the operator typed it: WSGI hands it over as Latin-1, and names are
    in any script. Bytes that are not UTF-8 are a 400 `invalid_search`."""
    try:
        return (raw or "").encode("latin-1").decode("utf-8")
    except UnicodeError:
        raise Problem(400, INVALID_SEARCH, "the search text is not UTF-8") from None


def customers_page(text, cursor, limit):
    """(customers, next cursor): those `text` names (no further page), or every customer newest first."""
    if text:
        try:
            return find_customers(text), None
        except SearchRejected as rejected:
            raise Problem(400, rejected.code, str(rejected)) from None
    rows = Customer.select()
    if cursor:
        created_at, key = decode_position(cursor)
        rows = rows.where(
            (Customer.created_at < created_at) | ((Customer.created_at == created_at) & (Customer.id > key))
        )
    page = list(rows.order_by(Customer.created_at.desc(), Customer.id).limit(limit + 1))
    last = page[limit - 1] if len(page) > limit else None
    return page[:limit], encode_position(last.created_at, last.id) if last else None


def customer_rows(customers, now=None):
    """{customer id: (phase, plan name, ends_at, {currency: wallet balance})} for a page of customers, in four
    queries whatever their number (no query per row): their first subscription's standing, its plan, and the
    sums of their wallet accounts."""
    ids = [c.id for c in customers]
    if not ids:
        return {}
    first = {}
    for subscription in Subscription.select().where(Subscription.customer.in_(ids)).order_by(Subscription.slot):
        first.setdefault(subscription.customer_id, subscription.id)
    standings = phase.standings(list(first.values()), now)
    plans = plans_of(standings.values())
    names = {ledger.wallet(key): key for key in ids}
    balances = {key: {} for key in ids}
    sums = (
        LedgerAccount.select(
            LedgerAccount.name, LedgerAccount.currency, fn.COALESCE(fn.SUM(LedgerEntry.amount_minor), 0)
        )
        .join(LedgerEntry, on=(LedgerEntry.account == LedgerAccount.id))
        .where(LedgerAccount.name.in_(list(names)))
        .group_by(LedgerAccount.name, LedgerAccount.currency)
        .order_by(LedgerAccount.currency)
        .tuples()
    )
    for name, currency, total in sums:
        balances[names[name]][currency] = int(total)
    rows = {}
    for key in ids:
        standing = standings.get(first.get(key))
        entitlement = standing.entitlement if standing else None
        plan = plans.get(entitlement.plan_id) if entitlement else None
        rows[key] = (
            standing.phase if standing else None,
            plan.name if plan else None,
            entitlement.ends_at if entitlement else None,
            balances[key],
        )
    return rows


def subscriptions_of(customer, now=None):
    """[(subscription, standing)] of a customer by slot, and {plan id: plan} of their periods."""
    subscriptions = list(Subscription.select().where(Subscription.customer == customer.id).order_by(Subscription.slot))
    standings = phase.standings([s.id for s in subscriptions], now)
    return [(s, standings[s.id]) for s in subscriptions], plans_of(standing for standing in standings.values())


def plans_of(standings):
    ids = {s.entitlement.plan_id for s in standings if s.entitlement is not None}
    return {plan.id: plan for plan in Plan.select().where(Plan.id.in_(list(ids)))} if ids else {}


def subscription_detail(subscription, now=None):
    """(standing, plans, entitlements newest first, operations newest first) of one subscription;
    scheduled reconciles that succeeded are left out (one every 15 minutes would bury the rest)."""
    standing = phase.standings([subscription.id], now)[subscription.id]
    entitlements = list(
        Entitlement.select().where(Entitlement.subscription == subscription.id).order_by(Entitlement.id.desc())
    )
    operations = list(
        FulfillmentOperation.select()
        .where(
            FulfillmentOperation.entitlement.in_([e.id for e in entitlements]),
            (FulfillmentOperation.operation != "reconcile") | (FulfillmentOperation.status != "succeeded"),
        )
        .order_by(FulfillmentOperation.id.desc())
        .limit(SUBSCRIPTION_OPERATIONS)
    )
    return standing, plans_of([standing]), entitlements, operations


def order_operations(order_ids):
    """{order id: [ids of the operations its keys name]} (looked up on the unique key index)."""
    keys = {template.format(order_id): order_id for order_id in order_ids for template in ORDER_KEYS}
    found = {order_id: [] for order_id in order_ids}
    if keys:
        rows = (
            FulfillmentOperation.select(FulfillmentOperation.id, FulfillmentOperation.idempotency_key)
            .where(FulfillmentOperation.idempotency_key.in_(list(keys)))
            .order_by(FulfillmentOperation.id)
        )
        for row in rows:
            found[keys[row.idempotency_key]].append(row.id)
    return found


def orders_page(customer, cursor, limit):
    rows = Order.select().where(Order.customer == customer.id)
    if cursor:
        rows = rows.where(Order.id < panel.decode_cursor(cursor))
    page = list(rows.order_by(Order.id.desc()).limit(limit + 1))
    return page[:limit], panel.encode_cursor(page[limit - 1].id) if len(page) > limit else None


def payments_page(customer, cursor, limit):
    rows = PaymentIntent.select().join(Order).where(Order.customer == customer.id)
    if cursor:
        rows = rows.where(PaymentIntent.id < panel.decode_cursor(cursor))
    page = list(rows.order_by(PaymentIntent.id.desc()).limit(limit + 1))
    return page[:limit], panel.encode_cursor(page[limit - 1].id) if len(page) > limit else None


def wallet_balances(customer):
    """{currency: balance} of every wallet account the customer has."""
    return ledger.balances(customer.id)


def wallet_page(customer, cursor, limit):
    before = panel.decode_cursor(cursor) if cursor else None
    items = history(customer.id, limit=limit + 1, before=before)
    return items[:limit], panel.encode_cursor(items[limit - 1].entry_id) if len(items) > limit else None


def order_detail(order):
    """(payments, [(ledger transaction, its entries)], operations) of one order, oldest first."""
    intents = list(PaymentIntent.select().where(PaymentIntent.order == order.id).order_by(PaymentIntent.id))
    transactions = list(
        LedgerTransaction.select().where(LedgerTransaction.order == order.id).order_by(LedgerTransaction.id)
    )
    entries = {}
    if transactions:
        rows = (
            LedgerEntry.select(LedgerEntry, LedgerAccount)
            .join(LedgerAccount)
            .where(LedgerEntry.transaction.in_([t.id for t in transactions]))
            .order_by(LedgerEntry.id)
        )
        for entry in rows:
            entries.setdefault(entry.transaction_id, []).append(entry)
    entitlement = Entitlement.get_or_none(Entitlement.order == order.id)
    named = order_operations([order.id])[order.id]
    condition = FulfillmentOperation.id.in_(named) if named else None
    if entitlement is not None:
        own = (FulfillmentOperation.entitlement == entitlement.id) & (FulfillmentOperation.operation != "reconcile")
        condition = own if condition is None else condition | own
    operations = (
        list(FulfillmentOperation.select().where(condition).order_by(FulfillmentOperation.id))
        if condition is not None
        else []
    )
    return intents, [(t, entries.get(t.id, [])) for t in transactions], operations


def deliveries_of(intent):
    return list(
        ProviderWebhookEvent.select(
            ProviderWebhookEvent.id,
            ProviderWebhookEvent.provider_event_id,
            ProviderWebhookEvent.received_at,
            ProviderWebhookEvent.signature_ok,
            ProviderWebhookEvent.verdict,
            ProviderWebhookEvent.processed_at,
            ProviderWebhookEvent.outcome,
        )
        .where(ProviderWebhookEvent.payment_intent == intent.id)
        .order_by(ProviderWebhookEvent.id)
    )


# -- acting -------------------------------------------------------------------------------------


def refund(operator, order, amount_minor, reason, to=None):
    """Refund through commerce, and audit it in the same transaction."""
    try:
        with db.atomic():
            before = locked(Order.select().where(Order.id == order.id)).get()  # refund_order takes this lock too
            refunded = refund_order(order.id, amount_minor, to)
            made = refunds_of([order.id])[order.id][-1:] if refunded.amount_minor else []
            record_audit(
                PAYMENTS_CATEGORY,
                REFUNDED,
                f"operator:{operator.username}",
                reason,
                "order",
                order.id,
                details={
                    "amountMinor": refunded.refunded_amount_minor - before.refunded_amount_minor,
                    "currency": order.currency,
                    "full": refunded.status == "refunded",
                    "refundId": made[0].id if made else None,
                    "destination": made[0].destination if made else None,
                },
            )
    except SettlementRejected as rejected:
        raise Problem(SETTLEMENT_PROBLEMS.get(rejected.code, 409), rejected.code, str(rejected)) from None
    return refunded


def build():
    app = bottle.Bottle()
    problems.install(app)
    signed_in = panel.signed_in

    @app.get("/v1/panel/overview")
    @signed_in()
    def home(operator):
        return json_answer(200, overview(operator))

    @app.get("/v1/panel/session/time-zone")
    @signed_in()
    def time_zone(operator):
        return json_answer(200, {"timeZone": local_time.zone_of(operator).key})

    @app.put("/v1/panel/session/time-zone")
    @signed_in()
    def set_time_zone(operator):
        name = json_body().get("timeZone")
        try:
            operators.set_time_zone(operator, name)
        except operators.OperatorError as refused:
            raise Problem(400, problems.INVALID_TIME_ZONE, str(refused)) from None
        return json_answer(200, {"timeZone": name})

    @app.get("/v1/panel/customers")
    @signed_in(operators.SUBSCRIPTIONS_READ)
    def customers(operator):
        query = bottle.request.query
        limit = limit_param(query.get("limit"), DEFAULT_PAGE, MAX_PAGE)
        text = search_param(query.get("q"))
        rows, next_cursor = customers_page(text, query.get("cursor"), limit)
        return json_answer(
            200, {"query": text or None, "customers": [customer_json(c) for c in rows], "nextCursor": next_cursor}
        )

    @app.get("/v1/panel/customers/<customer_id>")
    @signed_in(operators.SUBSCRIPTIONS_READ)
    def customer(operator, customer_id):
        found = customer_or_404(customer_id)
        subscriptions, plans = subscriptions_of(found)
        return json_answer(
            200,
            {
                "customer": customer_json(found),
                "subscriptions": [subscription_json(s, standing, plans) for s, standing in subscriptions],
            },
        )

    @app.get("/v1/panel/customers/<customer_id>/orders")
    @signed_in(operators.PAYMENTS_READ)
    def customer_orders(operator, customer_id):
        found = customer_or_404(customer_id)
        query = bottle.request.query
        limit = limit_param(query.get("limit"), DEFAULT_PAGE, MAX_PAGE)
        rows, next_cursor = orders_page(found, query.get("cursor"), limit)
        operations = order_operations([o.id for o in rows])
        return json_answer(200, {"orders": [order_json(o, operations[o.id]) for o in rows], "nextCursor": next_cursor})

    @app.get("/v1/panel/customers/<customer_id>/payments")
    @signed_in(operators.PAYMENTS_READ)
    def customer_payments(operator, customer_id):
        found = customer_or_404(customer_id)
        query = bottle.request.query
        limit = limit_param(query.get("limit"), DEFAULT_PAGE, MAX_PAGE)
        rows, next_cursor = payments_page(found, query.get("cursor"), limit)
        return json_answer(200, {"payments": [payment_json(p) for p in rows], "nextCursor": next_cursor})

    @app.get("/v1/panel/customers/<customer_id>/wallet")
    @signed_in(operators.PAYMENTS_READ)
    def customer_wallet(operator, customer_id):
        found = customer_or_404(customer_id)
        query = bottle.request.query
        limit = limit_param(query.get("limit"), DEFAULT_PAGE, MAX_PAGE)
        items, next_cursor = wallet_page(found, query.get("cursor"), limit)
        return json_answer(
            200,
            {
                "balances": money_json(wallet_balances(found)),
                "history": [wallet_entry_json(item) for item in items],
                "nextCursor": next_cursor,
            },
        )

    @app.get("/v1/panel/subscriptions/<subscription_id>")
    @signed_in(operators.SUBSCRIPTIONS_READ)
    def subscription(operator, subscription_id):
        found = subscription_or_404(subscription_id)
        standing, plans, entitlements, operations = subscription_detail(found)
        return json_answer(
            200,
            {
                "subscription": subscription_json(found, standing, plans),
                "entitlements": [entitlement_json(e) for e in entitlements],
                "operations": [panel.operation_json(op) for op in operations],
            },
        )

    def subscription_change(change):
        def route(operator, customer_id, subscription_id):
            reason = panel.operator_reason()
            request_id = panel.change_request_id(json_body())
            try:
                operation = change(
                    customer_id[:TEXT_ID_MAX],
                    subscription_id[:TEXT_ID_MAX],
                    request_id,
                    actor=f"operator:{operator.username}",
                    reason=reason,
                )
            except changes.ChangeRejected as rejected:
                raise Problem(rejected.http_status, rejected.code, str(rejected)) from None
            except FulfillmentRequestRejected as rejected:  # the request id named another change
                status = 409 if rejected.code == "idempotency_key_reused" else 400
                raise Problem(status, rejected.code, str(rejected)) from None
            return json_answer(
                202, {"operationId": operation.id, "operation": operation.operation, "status": operation.status}
            )

        return route

    for action, change in (("pause", changes.pause), ("resume", changes.resume), ("reprovision", changes.reprovision)):
        app.post(f"/v1/panel/customers/<customer_id>/subscriptions/<subscription_id>/{action}")(
            signed_in(operators.SUBSCRIPTIONS_WRITE)(subscription_change(change))
        )

    @app.get("/v1/panel/orders/<order_id>")
    @signed_in(operators.PAYMENTS_READ)
    def order(operator, order_id):
        found = order_or_404(order_id)
        intents, transactions, operations = order_detail(found)
        return json_answer(
            200,
            {
                "order": order_json(found, order_operations([found.id])[found.id]),
                "payments": [payment_json(p) for p in intents],
                "ledger": [transaction_json(t, entries) for t, entries in transactions],
                "operations": [panel.operation_json(op) for op in operations],
                "refunds": [refund_json(r) for r in refunds_of([found.id])[found.id]],
            },
        )

    @app.post("/v1/panel/orders/<order_id>/refund")
    @signed_in(operators.PAYMENTS_WRITE)
    def refund_route(operator, order_id):
        found = order_or_404(order_id)
        reason = panel.operator_reason()
        body = json_body()
        amount, to = body.get("amountMinor"), body.get("to")
        if amount is not None and (isinstance(amount, bool) or not isinstance(amount, int)):
            raise Problem(400, problems.INVALID_REFUND_AMOUNT, "amountMinor is a whole number of minor units")
        if to is not None and to not in REFUND_DESTINATIONS:
            raise Problem(400, problems.INVALID_REFUND_DESTINATION, "to is provider or wallet")
        refunded = refund(operator, found, amount, reason, to)
        return json_answer(
            200,
            {
                "order": order_json(refunded, order_operations([found.id])[found.id]),
                "refunds": [refund_json(r) for r in refunds_of([found.id])[found.id]],
            },
        )

    @app.get("/v1/panel/payments/<payment_id>")
    @signed_in(operators.PAYMENTS_READ)
    def payment(operator, payment_id):
        intent = payment_or_404(payment_id)
        return json_answer(
            200, {"payment": payment_json(intent), "deliveries": [delivery_json(e) for e in deliveries_of(intent)]}
        )

    return app
