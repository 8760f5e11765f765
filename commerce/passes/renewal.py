"""`renewal` (SPEC 5.1, 13.8, 14.6): every minute (timeout 5 minutes), the wallet pays for the next
period of every auto-renewing subscription whose period ends within a day.

Due: a subscription with `auto_renew` whose current period — its
entitlement with the latest end that is not superseded, bought by an order
still paid (not refunded) — is not paused and ends within RENEWAL_WINDOW,
or ended less than LATE_WINDOW ago (the worker was down, or the wallet was
topped up just after the end; the new period then starts now). Read through
`entitlements_period_end`, earliest end first, BATCH at a time, each batch
starting after the last one's (end, id): a run walks the due periods once,
so those the wallet cannot pay for never keep later ones from their turn.

Per subscription, one transaction: the renewal order keyed
`renewal:<subscription id>:<period end>` (`orders.idempotency_key` is
UNIQUE), of the plan the subscription renews (its `plan`, else the
period's) in the currency the period was paid in, and its settlement from
the wallet (`settle_order(order, "renewal")`: the charge, the order, the
next period continuing this one with `resetTraffic`, its operation and job,
SPEC 2.2). Two runs at once, or one run again, meet on the key: the second
insert waits for the first transaction and finds its order, whose
settlement answers the first one's. Nothing is charged twice.

A wallet that cannot pay: the transaction rolls back, so nothing is written
but one `dunning` customer notice per subscription and period
(`customer_notices`, key `<subscription id>:<period end>`), which the bot
delivers. A wallet plainly short of the price is not tried at all: its
balance is read first. Later runs try again while the period is due, so a
top-up renews it. Refused for another reason (the customer blocked, the plan
no longer on sale or not priced in that currency, a trial plan): one
`renewal_refused` operator notice per subscription and period, with the code.

A paused subscription is skipped: a paused period's end stands still and
the resume moves it by the time paused (SPEC 2.25), so it is not where the
period will end. Renewing it would charge now for a period that cannot
start before the resume; once resumed, the period comes due at its real end.
"""

import datetime
import logging
from collections import Counter
from dataclasses import dataclass

from peewee import Tuple, fn

from commerce import ledger
from commerce.catalogue import CatalogueError, plan_price
from commerce.orders import OrderRejected, create_order
from commerce.settlement import SettlementRejected, settle_order
from jobs import every, huey, should_stop
from models.base import db, utcnow
from models.commerce import Order, Subscription
from models.fulfillment import Entitlement
from ops.records import queue_customer_notice, queue_notice

logger = logging.getLogger("omniflow.passes.renewal")

NAME = "renewal"
INTERVAL_S = 60
TIMEOUT_S = 5 * 60
BATCH = 100
RENEWAL_WINDOW = datetime.timedelta(hours=24)
LATE_WINDOW = datetime.timedelta(hours=24)
# A period that can be renewed: not superseded, failed or disabled (a refund revokes access by disabling).
RENEWABLE_STATUSES = ("pending", "active", "limited", "expired")
PAID_ORDER_STATES = ("paid", "fulfilled", "partially_refunded")

NOTICE_DUNNING = "dunning"  # a customer notice, delivered by the bot
NOTICE_RENEWAL_REFUSED = "renewal_refused"  # an operator notice

RENEWED = "renewed"
ALREADY_RENEWED = "already_renewed"
INSUFFICIENT_FUNDS = "insufficient_funds"
REFUSED = "refused"
OUTCOMES = (RENEWED, ALREADY_RENEWED, INSUFFICIENT_FUNDS, REFUSED)


@dataclass(frozen=True)
class DuePeriod:
    entitlement_id: int
    subscription_id: str
    customer_id: str
    plan_id: int  # what the renewal buys
    currency: str
    period_end: datetime.datetime

    @property
    def period(self):
        return f"{self.subscription_id}:{self.period_end.isoformat(timespec='seconds')}Z"

    @property
    def order_key(self):
        return f"renewal:{self.period}"


def due_query(now, after=None, limit=None):
    """The next `limit` (BATCH) due periods, earliest end first, after the (end, entitlement id) `after`."""
    later = Entitlement.alias()
    a_later_period = later.select(later.id).where(
        later.subscription == Entitlement.subscription,
        later.ends_at > Entitlement.ends_at,
        later.status != "superseded",
    )
    query = (
        Entitlement.select(
            Entitlement.id,
            Entitlement.subscription,
            Subscription.customer,
            fn.COALESCE(Subscription.plan, Entitlement.plan),
            Order.currency,
            Entitlement.ends_at,
        )
        .join(Subscription, on=(Entitlement.subscription == Subscription.id))
        .switch(Entitlement)
        .join(Order, on=(Entitlement.order == Order.id))
        .where(
            Entitlement.ends_at >= now - LATE_WINDOW,
            Entitlement.ends_at <= now + RENEWAL_WINDOW,
            Entitlement.status.in_(RENEWABLE_STATUSES),
            Entitlement.paused_at.is_null(),
            Subscription.auto_renew == True,  # noqa: E712
            Order.status.in_(PAID_ORDER_STATES),
            ~fn.EXISTS(a_later_period),
        )
        .order_by(Entitlement.ends_at, Entitlement.id)
        .limit(limit or BATCH)
    )
    if after is not None:
        query = query.where(Tuple(Entitlement.ends_at, Entitlement.id) > Tuple(*after))
    return query


def due_periods(now, after=None, limit=None):
    return [DuePeriod(*row) for row in due_query(now, after, limit).tuples()]


def renew(due):
    """Charge one due period's renewal from the wallet, or say why not; returns the outcome."""
    try:
        price = plan_price(due.plan_id, due.currency)
    except CatalogueError:
        price = None  # create_order refuses the order, with the reason
    if price is not None and ledger.balance(due.customer_id, due.currency) < price:
        return _dun(due, price)
    try:
        with db.atomic():
            order = create_order(
                due.customer_id, "renewal", due.currency, plan_id=due.plan_id, subscription_id=due.subscription_id,
                key=due.order_key,
            )  # fmt: skip
            settlement = settle_order(order.id, "renewal")
    except OrderRejected as rejected:
        return _refused(due, rejected.code)
    except SettlementRejected as rejected:
        if rejected.code == ledger.INSUFFICIENT_FUNDS:
            return _dun(due, price)
        return _refused(due, rejected.code)
    return ALREADY_RENEWED if settlement.already_settled else RENEWED


def run(now=None):
    """Renew every due period, BATCH at a time, until none is left or the run is asked to stop.
    Returns {outcome: count}."""
    now = now or utcnow()
    counts = Counter({outcome: 0 for outcome in OUTCOMES})
    after, stopped = None, False
    while not stopped:
        batch = due_periods(now, after)
        for due in batch:
            stopped = should_stop()
            if stopped:
                break
            counts[renew(due)] += 1
        if len(batch) < BATCH:
            break
        after = (batch[-1].period_end, batch[-1].entitlement_id)
    logger.info(
        f"renewal {'stopped before the end of the due periods' if stopped else 'finished'}",
        extra={
            "task": NAME,
            "count": sum(counts.values()),
            "state": ",".join(f"{outcome}={counts[outcome]}" for outcome in OUTCOMES),
        },
    )
    return dict(counts)


def _dun(due, price):
    queue_customer_notice(
        due.customer_id,
        NOTICE_DUNNING,
        due.period,
        {
            "subscriptionId": due.subscription_id,
            "periodEnd": due.period_end.isoformat(timespec="seconds") + "Z",
            "planId": due.plan_id,
            "amountMinor": price,
            "currency": due.currency,
        },
    )
    return INSUFFICIENT_FUNDS


def _refused(due, code):
    queue_notice(
        NOTICE_RENEWAL_REFUSED,
        due.period,
        {"subscriptionId": due.subscription_id, "customerId": due.customer_id, "planId": due.plan_id, "code": code},
    )
    return REFUSED


@huey.periodic_task(every(seconds=INTERVAL_S), name=NAME, timeout=TIMEOUT_S)
def renewal():
    run()
