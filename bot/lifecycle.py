"""The customer lifecycle notices loop (SPEC 6, 14.6): a customer hears that a period ends in 3 days, in 1 day,
and that it has ended — each once per (subscription, kind, period) — in words that fit the subscription.

A bot loop, not a worker pass, because SPEC 6 puts it in the bot: it only
*produces* `customer_notices` rows (the bot's delivery loop sends them), and
a row is unique on (kind, `<subscription>:<period end>`), inserted with ON
CONFLICT DO NOTHING, so a second copy of the loop, a rerun after a crash or
any number of ticks queue nothing twice. Dunning notices come from the
`renewal` pass (commerce/passes/renewal.py): only its transaction knows the
wallet could not pay, and it queues them under the same key shape.

Every INTERVAL_S (15 min) a tick walks each window through
`entitlements_period_end` (migration 0018): periods whose end lies in the
window, earliest first, PAGE (200) at a time, each page after the last one's
(end, id). A period qualifies when it is the subscription's current one (no
later period that is not superseded), is live (not failed, disabled or
paused), its customer has a Telegram chat, and it started before the window
opened for it — a 3-day trial is not told it has 3 days left the moment it
is bought (checked on the page's rows: the dialects share no portable
datetime arithmetic, and the page stays bounded either way). `expired`
looks back EXPIRED_LOOKBACK (7 days) only: a bot down for longer than that
does not greet customers with news of an end long past.

What a period is told depends on its subscription (`notice_for`):

- a trial is offered a plan to buy (it cannot be renewed): `trial_ending`
  in its last day, `trial_ended` once it is over, nothing 3 days before;
- an auto-renewing one is not asked to renew what the wallet renews by
  itself: 3 days before, `renews_from_wallet` (when and what it will cost)
  if the balance covers the renewal, else `renewal_needs_topup` (top the
  wallet up); in the last day nothing, because the `renewal` pass charges
  it then, or sends its `dunning` notice when the wallet cannot pay (one
  whose plan the wallet cannot renew, no longer priced in its currency, is
  told as any other);
- any other is told it ends (`expiring_3d`, `expiring_1d`) and how to
  extend it, and every one that ended is told `expired`.
"""

import datetime
import logging
from dataclasses import dataclass

from peewee import Tuple, fn

from commerce import ledger
from commerce.catalogue import CatalogueError, plan_price
from models.base import db, utcnow
from models.commerce import Customer, Order, Plan, Subscription
from models.fulfillment import Entitlement
from ops.records import queue_customer_notice

logger = logging.getLogger("omniflow.bot.lifecycle")

INTERVAL_S = 15 * 60
PAGE = 200
DAY = datetime.timedelta(days=1)
EXPIRED_LOOKBACK = datetime.timedelta(days=7)
LIVE_STATUSES = ("pending", "active", "limited", "expired")

EXPIRING_3D = "expiring_3d"
EXPIRING_1D = "expiring_1d"
EXPIRED = "expired"
TRIAL_ENDING = "trial_ending"
TRIAL_ENDED = "trial_ended"
RENEWS_FROM_WALLET = "renews_from_wallet"
RENEWAL_NEEDS_TOPUP = "renewal_needs_topup"
KINDS = (EXPIRING_3D, EXPIRING_1D, EXPIRED, TRIAL_ENDING, TRIAL_ENDED, RENEWS_FROM_WALLET, RENEWAL_NEEDS_TOPUP)
TRIAL_KINDS = {EXPIRING_1D: TRIAL_ENDING, EXPIRED: TRIAL_ENDED}  # a window's kind → what a trial hears then


@dataclass(frozen=True)
class Period:
    """One row of a window's page: a subscription's current period and what decides its words."""

    entitlement_id: int
    subscription_id: str
    customer_id: str
    ends_at: datetime.datetime
    starts_at: datetime.datetime
    plan_name: str
    trial: bool
    auto_renew: bool
    renewal_plan_id: int  # what a renewal buys (the subscription's plan, else the period's)
    currency: str  # what the period was paid in, and a renewal is charged in


@dataclass(frozen=True)
class Window:
    """Periods ending in (now + start, now + end]; `lead` is how long before its end a period must have begun."""

    kind: str
    start: datetime.timedelta
    end: datetime.timedelta
    lead: datetime.timedelta


WINDOWS = (
    Window(EXPIRING_3D, DAY, 3 * DAY, 3 * DAY),
    Window(EXPIRING_1D, datetime.timedelta(0), DAY, DAY),
    Window(EXPIRED, -EXPIRED_LOOKBACK, datetime.timedelta(0), datetime.timedelta(0)),
)


def period_key(subscription_id, period_end):
    """`<subscription>:<period end>`, the key renewal's dunning notices use too."""
    return f"{subscription_id}:{period_end.isoformat(timespec='seconds')}Z"


def window_query(window, now, after=None):
    later = Entitlement.alias()
    a_later_period = later.select(later.id).where(
        later.subscription == Entitlement.subscription,
        later.ends_at > Entitlement.ends_at,
        later.status != "superseded",
    )
    query = (
        Entitlement.select(
            Entitlement.id, Entitlement.subscription, Subscription.customer, Entitlement.ends_at,
            Entitlement.starts_at, Plan.name, Plan.trial, Subscription.auto_renew,
            fn.COALESCE(Subscription.plan, Entitlement.plan), Order.currency,
        )  # fmt: skip
        .join(Subscription, on=(Entitlement.subscription == Subscription.id))
        .join(Customer, on=(Subscription.customer == Customer.id))
        .switch(Entitlement)
        .join(Plan, on=(Entitlement.plan == Plan.id))
        .switch(Entitlement)
        .join(Order, on=(Entitlement.order == Order.id))
        .where(
            Entitlement.ends_at > now + window.start,
            Entitlement.ends_at <= now + window.end,
            Entitlement.status.in_(LIVE_STATUSES),
            Entitlement.paused_at.is_null(),
            Customer.telegram_id.is_null(False),
            ~fn.EXISTS(a_later_period),
        )
        .order_by(Entitlement.ends_at, Entitlement.id)
        .limit(PAGE)
    )
    if after is not None:
        query = query.where(Tuple(Entitlement.ends_at, Entitlement.id) > Tuple(*after))
    return query


def notice_for(window, period):
    """(kind, payload fields beyond the period's own) of what this period is told in this window, or None."""
    if period.trial:
        kind = TRIAL_KINDS.get(window.kind)
        return None if kind is None else (kind, {})
    if period.auto_renew and window.kind != EXPIRED:
        try:
            price = plan_price(period.renewal_plan_id, period.currency)
        except CatalogueError:
            return window.kind, {}  # the wallet cannot renew it (the pass refuses): extending it by hand can
        if window.kind == EXPIRING_1D:
            return None  # the renewal pass charges it now, or duns the customer
        balance = ledger.balance(period.customer_id, period.currency)
        kind = RENEWS_FROM_WALLET if balance >= price else RENEWAL_NEEDS_TOPUP
        return kind, {"amountMinor": price, "currency": period.currency, "balanceMinor": balance}
    return window.kind, {}


def queue_window(window, now, stop=None):
    """Queue the window's notices, page by page; returns how many were queued now (repeats are not counted)."""
    queued, after = 0, None
    while stop is None or not stop.is_set():
        periods = [Period(*row) for row in window_query(window, now, after).tuples()]
        with db.atomic():
            for period in periods:
                if period.starts_at >= period.ends_at - window.lead:
                    continue  # bought inside the window: the customer knows how long it has
                told = notice_for(window, period)
                if told is None:
                    continue
                kind, fields = told
                payload = {
                    "subscriptionId": period.subscription_id,
                    "periodEnd": period.ends_at.isoformat(timespec="seconds") + "Z",
                    "plan": period.plan_name,
                    "ends": period.ends_at.strftime("%Y-%m-%d %H:%M"),
                    **fields,
                }
                key = period_key(period.subscription_id, period.ends_at)
                queued += queue_customer_notice(period.customer_id, kind, key, payload)
        if len(periods) < PAGE:
            break
        after = (periods[-1].ends_at, periods[-1].entitlement_id)
    return queued


def tick(now=None, stop=None):
    """One pass over every window; returns {kind: queued now}."""
    now = now or utcnow()
    return {window.kind: queue_window(window, now, stop) for window in WINDOWS}


class LifecycleNotices:
    def __init__(self, stop, interval_s=INTERVAL_S):
        self.stop = stop
        self.interval_s = interval_s

    def run(self):
        logger.info("lifecycle notices started", extra={"task": "lifecycle_notices"})
        while not self.stop.is_set():
            try:
                counts = tick(stop=self.stop)
                if any(counts.values()):
                    logger.info(
                        "lifecycle notices queued",
                        extra={"task": "lifecycle_notices", "count": sum(counts.values()),
                               "state": ",".join(f"{kind}={count}" for kind, count in counts.items())},
                    )  # fmt: skip
            except Exception:
                logger.exception("lifecycle notices tick failed", extra={"task": "lifecycle_notices"})
            finally:
                db.close()
            self.stop.wait(self.interval_s)
