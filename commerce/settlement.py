"""Settlement (SPEC 2.2, 8.1, 13.2, 13.3): the one function every way of paying calls.

A provider webhook or poll, Telegram Stars, the wallet, a renewal, a gift, a
code and a trial all end here. One transaction writes the ledger movement,
order → paid, what the order bought, the outbox event, the operator
notice and, for a payment made in the chat (Stars, the wallet), the
customer's receipt (`RECEIPTS`, delivered by the bot): all of it commits,
or none of it does, so a paid order always has its money booked and, where
it buys access, a job waiting for it. Settling an order again returns the
first settlement's result and writes nothing.

The ledger movement depends on how the order was paid (`settled_by`):

- at a provider (`provider_webhook`, `provider_poll`, `stars`):
  provider_clearing:<provider> → revenue (`order:<id>:payment`); a top-up
  provider_clearing:<provider> → customer_wallet:<customer> (`order:<id>:topup`);
- from the wallet (`wallet`, `renewal`): customer_wallet:<customer> → revenue
  (`order:<id>:wallet`); a wallet that cannot cover it refuses the settlement
  (`insufficient_funds`) and nothing is written;
- `gift`, `code`, `trial`: the order is free and moves no money (what a gift
  cost was booked when it was bought); a priced order is refused.

What is written besides depends on the order's kind:

- a plan (purchase, renewal, extension, upgrade, downgrade, a gift's
  activation, code, trial): a new entitlement, its `create` (`order:<id>:fulfill`, or
  `gift:`/`code:`), `order.paid`; a trial also its one-per-customer row;
- an add-on: a `set_limits` of the subscription's current entitlement
  (`order:<id>:addon`) with the add-on's extra traffic and devices on top of
  the limits last asked for, and `addon.purchased`. No entitlement is made:
  a new one would supersede the plan;
- a top-up: the wallet credit and `wallet.credited`; nothing to fulfil, so the
  order is `fulfilled` at once;
- goods: their `goods_deliveries` row and `goods_delivery` job (goods/delivery.py),
  which hands the order to its provider; the order stays `paid` until delivered;
- a gift bought (a `gift` order settled by a payment, not by `gift`): a gift
  card and its code for the buyer to pass on (commerce/gift_purchase.py),
  `fulfilled` at once, no entitlement for the buyer.

An upgrade applies now (SPEC 13.9): its period starts at once, `resetTraffic`
set, and the unused part of every period it replaces is credited to the
wallet (`proration_credit`, revenue → customer_wallet, key
`order:<id>:proration:<entitlement id>`): the remaining seconds × the old
plan's price per second in the currency that period was paid in, rounded
down to a whole minor unit (commerce/catalogue.py `unused_value`), and never
more than that period's order paid net of refunds. A period that cost
nothing (trial, gift, code) or was refunded in full is credited nothing.
A downgrade waits for the current period's end: its period starts there and
its `create` carries `effectiveAt` = that end, so the job snoozes until then
(SPEC 2.12), without a traffic reset.

A provider's money is real once it arrives: a provider path also settles an
order that expired or was cancelled while its payer was paying.
"""

import datetime
import json
from dataclasses import dataclass, replace

from peewee import JOIN, IntegrityError

from commerce import gift_purchase, ledger, proration
from commerce.catalogue import CatalogueError, unused_value
from fulfillment.desired_state import DesiredState
from fulfillment.enqueue import enqueue_operation, find_operation
from fulfillment.rules import NOTICE_ORDER_PAID
from goods.delivery import open_delivery
from models.base import db, utcnow
from models.catalogue import TrialActivation
from models.commerce import PAYMENT_PROVIDERS, RESETS_TRAFFIC, Order, Plan, Subscription, new_uuid
from models.fulfillment import Entitlement, FulfillmentOperation
from models.transactions import cached_select, execute_all, fetch_one, is_postgres, locked
from ops.records import emit_event, queue_customer_notice, queue_notice

SETTLED_STATES = ("paid", "fulfilled", "partially_refunded", "refunded")
SETTLEABLE_STATES = ("draft", "pending")
LATE_STATES = ("expired", "cancelled")  # settled by a provider's payment only
PROVIDER_PATHS = ("provider_webhook", "provider_poll", "stars")
WALLET_PATHS = ("wallet", "renewal")
NOTICE_WALLET_CREDITED = "wallet_credited"  # a customer notice: the top-up arrived
# The customer's receipt for a payment made in the chat, a customer notice per way of paying (a gift
# card's says its code follows; a top-up's is wallet_credited). Payments at a hosted provider get none:
# the customer hears when their access is ready.
RECEIPTS = {"stars": "payment_received", "wallet": "paid_from_wallet"}
FREE_PATHS = ("gift", "code", "trial")
SETTLED_BY = PROVIDER_PATHS + WALLET_PATHS + FREE_PATHS
KEY_PREFIX = {"gift": "gift", "code": "code"}
OPEN_OPERATION_STATES = ("pending", "running", "retrying")

INVALID_SETTLEMENT_SOURCE = "invalid_settlement_source"
ORDER_NOT_FOUND = "order_not_found"
ORDER_NOT_PAYABLE = "order_not_payable"
ORDER_NOT_REFUNDABLE = "order_not_refundable"
INVALID_REFUND_AMOUNT = "invalid_refund_amount"
PROVIDER_REQUIRED = "provider_required"
ORDER_NOT_FREE = "order_not_free"
NO_CURRENT_ENTITLEMENT = "no_current_entitlement"
TRIAL_ALREADY_USED = "trial_already_used"


class SettlementRejected(ValueError):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Settlement:
    order_id: int
    entitlement_id: int  # None for a top-up
    operation_id: int  # None for a top-up
    already_settled: bool


def settle_order(order_id, settled_by, provider=None):
    """Mark an order paid, book its money and create everything it bought, atomically.

    `provider` names the provider a provider path was paid at (default: the
    order's own). Inside a caller's transaction this is a savepoint of it."""
    if settled_by not in SETTLED_BY:
        raise SettlementRejected(INVALID_SETTLEMENT_SOURCE, f"unknown settlement source {settled_by!r}")
    with db.atomic():
        order = lock_order(order_id)
        if order is None:
            raise SettlementRejected(ORDER_NOT_FOUND, f"order {order_id} does not exist")
        return settle_locked(order, settled_by, provider)


def lock_order(order_id):
    """The order row under its lock (FOR UPDATE on PostgreSQL), with its plan read in the same
    statement (the plan row itself is not locked), or None."""

    def build():
        query = Order.select(Order, Plan).join(Plan, JOIN.LEFT_OUTER).where(Order.id == order_id).limit(1)
        return query.for_update(of=Order) if is_postgres() else query

    rows = cached_select("settlement.lock_order", build, (order_id, 1))
    return rows[0] if rows else None


def settle_locked(order, settled_by, provider=None):
    """settle_order for an order its caller has already locked in the open transaction
    (apply_payment locks it first to judge the payment: a second lock would be a round trip
    more for nothing)."""
    if settled_by not in SETTLED_BY:
        raise SettlementRejected(INVALID_SETTLEMENT_SOURCE, f"unknown settlement source {settled_by!r}")
    if not db.in_transaction():
        raise RuntimeError("settle_locked runs inside the transaction that locked the order")
    with db.atomic():
        if order.status in SETTLED_STATES:
            return _first_settlement(order)
        payable = SETTLEABLE_STATES + (LATE_STATES if settled_by in PROVIDER_PATHS else ())
        if order.status not in payable:
            raise SettlementRejected(ORDER_NOT_PAYABLE, f"order {order.id} is {order.status}")

        now = utcnow().replace(microsecond=0)
        _book(order, settled_by, provider)
        _queue_receipt(order, settled_by, now)  # before a gift's code notice, so it is delivered first
        bought_gift = order.operation == "gift" and settled_by not in FREE_PATHS
        if order.operation == "topup":
            settlement, subscription = _credit_wallet(order), None
        elif bought_gift:  # a gift card for someone else: its code, no period for the buyer
            gift_purchase.issue_bought_gift(order, now)
            settlement, subscription = Settlement(order.id, None, None, already_settled=False), None
        elif order.operation == "addon":
            settlement, subscription = _apply_addon(order), order.subscription_id
        elif order.operation == "goods":  # its delivery and the job that makes it (goods/delivery.py)
            open_delivery(order, now)
            settlement, subscription = Settlement(order.id, None, None, already_settled=False), None
        else:
            settlement, subscription = _open_period(order, now)
        fulfilled = order.operation == "topup" or bought_gift
        used_offer = []
        if order.personal_offer_id is not None:  # the order's price had it: used now, by this order only
            used_offer.append((_OFFER_USED, (now, order.id, order.personal_offer_id)))
        execute_all(
            used_offer
            + [
                (
                    "UPDATE orders SET status = %s, paid_at = %s, fulfilled_at = %s, settled_by = %s,"
                    " subscription_id = %s, expires_at = NULL WHERE id = %s",
                    (
                        "fulfilled" if fulfilled else "paid",
                        now,
                        now if fulfilled else None,
                        settled_by,
                        getattr(subscription, "id", subscription),
                        order.id,
                    ),
                )
            ]
        )
        queue_notice(
            NOTICE_ORDER_PAID,
            f"order:{order.id}",
            {"orderId": order.id, "entitlementId": settlement.entitlement_id},
            returning=False,
        )
        return settlement


_OFFER_USED = (
    "UPDATE personal_offers SET status = 'used', used_at = %s, used_order_id = %s"
    " WHERE id = %s AND used_order_id IS NULL"
)


def _book(order, settled_by, provider):
    """The order's ledger movement, in the settlement's transaction."""
    try:
        if settled_by in FREE_PATHS:
            if order.amount_minor != 0:
                raise SettlementRejected(ORDER_NOT_FREE, f"a {settled_by} settles free orders only")
            return
        if order.amount_minor == 0:
            return  # a free order (a full discount) moves nothing, whoever settles it
        if settled_by in WALLET_PATHS:
            ledger.charge_wallet(order)
            return
        provider = "stars" if settled_by == "stars" else provider or order.provider
        if provider not in PAYMENT_PROVIDERS:
            raise SettlementRejected(PROVIDER_REQUIRED, "a provider payment names its provider")
        if order.operation == "topup":
            ledger.credit_topup(order, provider)
        else:
            ledger.record_sale(order, provider)
    except ledger.LedgerRejected as rejected:
        raise SettlementRejected(rejected.code, str(rejected)) from None


_RECEIPT = (
    "INSERT INTO customer_notices (customer_id, kind, dedupe_key, payload, created_at)"
    " SELECT id, %s, %s, %s, %s FROM customers WHERE id = %s AND telegram_id IS NOT NULL"
    " ON CONFLICT (kind, dedupe_key) DO NOTHING"
)


def _queue_receipt(order, settled_by, now):
    """The payment's receipt, written with the settlement: sent as an answer after the commit, a crash
    in between would lose it; as a notice the bot's loop delivers it once the commit is made. A customer
    without a Telegram chat (a script's wallet checkout) has nowhere to receive it."""
    kind = RECEIPTS.get(settled_by)
    if kind is None or order.operation == "topup":
        return
    if order.operation in ("gift", "goods"):
        kind = f"{order.operation}_{kind}"
    payload = {"orderId": order.id, "planId": order.plan_id, "amountMinor": order.amount_minor,
               "currency": order.currency}  # fmt: skip
    if order.operation == "goods":
        payload = {**payload, "goodsName": order.goods.name}
    execute_all([(_RECEIPT, (kind, f"order:{order.id}", json.dumps(payload, sort_keys=True), now, order.customer_id))])


def _open_period(order, now):
    """A plan's new period: the entitlement, its create and `order.paid`."""
    if order.subscription_id is None:
        subscription, current = _new_subscription(order), None
    else:
        subscription = order.subscription
        current = _current_period(subscription)
    starts_at = _period_start(order, current, now)
    plan = order.plan
    if order.operation == "trial":
        try:
            with db.atomic():
                TrialActivation.create(customer=order.customer_id, plan=plan, order=order, activated_at=now)
        except IntegrityError:
            raise SettlementRejected(TRIAL_ALREADY_USED, "this customer has had a trial") from None
    entitlement = _new_entitlement(
        order=order,
        subscription=subscription,
        plan=plan,
        status="pending",
        starts_at=starts_at,
        ends_at=starts_at + datetime.timedelta(days=plan.duration_days),
        paused_at=_carried_pause(order, current, starts_at),
        traffic_allowance_bytes=plan.traffic_allowance_bytes,
        device_limit=plan.device_limit,
        squad_ids=plan.squad_ids,
        grace_period_hours=plan.grace_period_hours,
        created_at=now,
        updated_at=now,
    )
    desired = DesiredState.from_entitlement(entitlement, reset_traffic=order.operation in RESETS_TRAFFIC)
    if order.operation in AT_PERIOD_END and starts_at > now:
        desired = replace(desired, effective_at=starts_at)
    if order.operation in PRORATED:
        _credit_unused(order, subscription, now)
    enqueued = enqueue_operation(
        entitlement, "create", desired, fulfillment_key(order), correlation_id=f"order:{order.id}"
    )
    emit_event(
        "order.paid",
        {
            "orderId": order.id,
            "customerId": order.customer_id,
            "entitlementId": entitlement.id,
            "amountMinor": order.amount_minor,
            "currency": order.currency,
        },
        aggregate=f"customer:{order.customer_id}",
        returning=False,
    )
    return Settlement(order.id, entitlement.id, enqueued.operation.id, already_settled=False), subscription


_ENTITLEMENT_COLUMNS = (
    "order_id", "subscription_id", "plan_id", "status", "starts_at", "ends_at", "paused_at",
    "traffic_allowance_bytes", "device_limit", "squad_ids", "grace_period_hours", "created_at", "updated_at",
)  # fmt: skip
_NEW_ENTITLEMENT = (
    f"INSERT INTO entitlements ({', '.join(_ENTITLEMENT_COLUMNS)})"
    f" VALUES ({', '.join(['%s'] * len(_ENTITLEMENT_COLUMNS))}) RETURNING id"
)


def _new_entitlement(**values):
    """Entitlement.create without peewee building the INSERT each time: the row, and the model as
    it now stands (the fields given are every column but the id the INSERT answers)."""
    entitlement = Entitlement(**values)
    params = [_column_value(entitlement, column) for column in _ENTITLEMENT_COLUMNS]
    entitlement.id = fetch_one(_NEW_ENTITLEMENT, params)[0]
    entitlement._dirty.clear()
    return entitlement


def _column_value(entitlement, column):
    field = Entitlement._meta.columns[column]
    return field.db_value(entitlement.__data__.get(field.name))


def _apply_addon(order):
    """An add-on's `set_limits` of the subscription's current entitlement and `addon.purchased`."""
    entitlement = _addon_target(order.subscription_id)
    if entitlement is None:
        raise SettlementRejected(NO_CURRENT_ENTITLEMENT, "the subscription has no period to add to")
    addon = order.addon
    traffic, devices = _limits_asked_for(entitlement)
    desired = replace(
        DesiredState.from_entitlement(entitlement),
        traffic_allowance_bytes=_plus(traffic, addon.extra_traffic_bytes),
        device_limit=_plus(devices, addon.extra_devices),
    )
    enqueued = enqueue_operation(
        entitlement, "set_limits", desired, fulfillment_key(order), correlation_id=f"order:{order.id}"
    )
    emit_event(
        "addon.purchased",
        {
            "orderId": order.id,
            "customerId": order.customer_id,
            "subscriptionId": order.subscription_id,
            "entitlementId": entitlement.id,
            "addonId": addon.id,
            "extraTrafficBytes": addon.extra_traffic_bytes,
            "extraDevices": addon.extra_devices,
            "amountMinor": order.amount_minor,
            "currency": order.currency,
        },
        aggregate=f"customer:{order.customer_id}",
        returning=False,
    )
    return Settlement(order.id, entitlement.id, enqueued.operation.id, already_settled=False)


def _credit_wallet(order):
    """A top-up's event and its customer's notice (the bot said it would tell them when the money
    arrived); its credit is the ledger movement booked before."""
    balance = ledger.balance(order.customer_id, order.currency)
    emit_event(
        "wallet.credited",
        {
            "orderId": order.id,
            "customerId": order.customer_id,
            "amountMinor": order.amount_minor,
            "currency": order.currency,
            "balanceMinor": balance,
        },
        aggregate=f"customer:{order.customer_id}",
        returning=False,
    )
    queue_customer_notice(
        order.customer_id,
        NOTICE_WALLET_CREDITED,
        f"order:{order.id}",
        {"orderId": order.id, "amountMinor": order.amount_minor, "currency": order.currency, "balanceMinor": balance},
        returning=False,
    )
    return Settlement(order.id, None, None, already_settled=False)


def fulfillment_key(order):
    """The idempotency key of the fulfillment operation an order's settlement queues."""
    if order.operation == "addon":
        return f"order:{order.id}:addon"
    return f"{KEY_PREFIX.get(order.operation, 'order')}:{order.id}:fulfill"


def _first_settlement(order):
    operation = None if order.operation == "topup" else find_operation(fulfillment_key(order))
    if operation is None:
        return Settlement(order.id, None, None, already_settled=True)
    return Settlement(order.id, operation.entitlement_id, operation.id, already_settled=True)


def _addon_target(subscription_id):
    """The period an add-on goes onto: the subscription's newest entitlement that is not
    superseded and has begun (one still pending gets it after its create: the worker runs them
    in turn). A period that starts later — a downgrade waiting for the current period's end,
    a renewal continuing it — is not the one the customer is using now."""
    return locked(
        Entitlement.select()
        .where(
            Entitlement.subscription == subscription_id,
            Entitlement.status != "superseded",
            Entitlement.starts_at <= utcnow(),
        )
        .order_by(Entitlement.id.desc())
    ).first()


def _limits_asked_for(entitlement):
    """The limits the entitlement will hold once what is queued is applied: those of its
    newest open `set_limits` (an add-on bought a moment ago), else those it holds."""
    newest = (
        FulfillmentOperation.select(FulfillmentOperation.desired_state)
        .where(
            FulfillmentOperation.entitlement == entitlement,
            FulfillmentOperation.operation == "set_limits",
            FulfillmentOperation.status.in_(OPEN_OPERATION_STATES),
        )
        .order_by(FulfillmentOperation.id.desc())
        .first()
    )
    if newest is None:
        return entitlement.traffic_allowance_bytes, entitlement.device_limit
    desired = DesiredState.parse(newest.desired_state)
    return desired.traffic_allowance_bytes, desired.device_limit


def _plus(limit, extra):
    """An add-on onto a limit; an unlimited one (None) stays unlimited."""
    return None if limit is None else limit + extra


def _new_subscription(order):
    """A purchase without a target subscription opens the customer's next slot. One statement
    reads and takes the slot (a concurrent purchase taking it too is refused by the unique
    (customer, slot), as before), and it rides with the next round trip: nothing here reads the
    slot back, so the returned Subscription has none."""
    subscription = Subscription(id=new_uuid(), customer=order.customer_id, auto_renew=False, created_at=utcnow())
    execute_all(
        [
            (
                "INSERT INTO subscriptions (id, customer_id, slot, auto_renew, created_at)"
                " SELECT %s, %s, COALESCE(MAX(slot), 0) + 1, %s, %s FROM subscriptions WHERE customer_id = %s",
                (subscription.id, order.customer_id, False, subscription.created_at, order.customer_id),
            )
        ]
    )
    return subscription


CONTINUES_PERIOD = ("extension", "renewal", "downgrade")
PRORATED = ("upgrade",)
AT_PERIOD_END = ("downgrade",)
CREDITABLE_STATES = ("paid", "fulfilled", "partially_refunded")


def _current_period(subscription):
    """The subscription's latest period (its newest end), or None."""
    return (
        Entitlement.select(Entitlement.ends_at, Entitlement.paused_at)
        .where(Entitlement.subscription == subscription, Entitlement.status != "superseded")
        .order_by(Entitlement.ends_at.desc())
        .first()
    )


def _credit_unused(order, subscription, now):
    """An upgrade's credit of the unused part of each period it replaces, in the upgrade's transaction."""
    if subscription is None:
        return
    replaced = (
        Entitlement.select(Entitlement, Order)
        .join(Order, on=(Entitlement.order == Order.id))
        .where(
            Entitlement.subscription == subscription,
            Entitlement.status != "superseded",
            Entitlement.ends_at > now,
            Entitlement.order != order.id,
        )
        .order_by(Entitlement.id)
    )
    already = proration.credited_for_periods(getattr(subscription, "id", subscription))
    for period in replaced:
        paid = period.order
        if paid.status not in CREDITABLE_STATES or paid.amount_minor - paid.refunded_amount_minor <= 0:
            continue
        if already.get(period.id, 0) > 0:
            continue  # an earlier upgrade, not yet applied by the worker, bought this period's rest back
        # A paused period's end stands still from its pause: what is left is counted from there.
        since = max(period.starts_at, period.paused_at or now)
        try:
            worth = unused_value(period.plan, paid.currency, (period.ends_at - since).total_seconds())
        except CatalogueError:
            continue  # no longer priced in that currency: nothing to count the rest by
        credit = min(worth, paid.amount_minor - paid.refunded_amount_minor)
        if credit > 0:
            ledger.post(
                proration.KIND,
                [
                    ledger.Entry(ledger.REVENUE, -credit, paid.currency),
                    ledger.Entry(ledger.wallet(order.customer_id), credit, paid.currency),
                ],
                order=order,
                key=proration.key(order.id, period.id),
            )


def _period_start(order, current, now):
    """Extensions, renewals and downgrades continue the current period; everything else starts now.
    A paused period's end stands still, so the next one starts there even if it is past:
    the resume moves both by the time paused."""
    if order.operation not in CONTINUES_PERIOD or current is None:
        return now
    return current.ends_at if current.paused_at is not None else max(now, current.ends_at)


def _carried_pause(order, current, starts_at):
    """Only a resume lifts a pause (SPEC 2.6, 2.25): a new period of a paused subscription
    is paused too, from the same moment when it continues the paused period, else from
    its own start."""
    if current is None or current.paused_at is None:
        return None
    return current.paused_at if order.operation in CONTINUES_PERIOD else starts_at
