"""Campaigns and announcements an operator sends to customers through the bot (SPEC 6, 14.6, 15.5): who they go
to, when they start, pausing them, and what a campaign's delivery looks like.

The audience (`campaigns.audience`), among customers with a Telegram chat:

- `all`: every one;
- `active`: holders of a period that is live now — an entitlement `active`
  or `limited`, not paused, whose end is still ahead;
- `plan`: the same, of one plan (`plan_id`);
- `expired`: customers who had access (an entitlement that was provisioned)
  and hold nothing live, paused or still being provisioned now;
- `never-paid`: no order of theirs was ever paid with money (a paid,
  fulfilled or refunded order of a positive amount that is not a trial);
  free trials, gifts and codes do not count as paying;
- `trial-only`: took a free trial and never paid;
- `named`: the customers an operator listed (up to MAX_NAMED_CUSTOMERS).

Left out, and counted on the campaign: customers who blocked the bot
(`telegram_unreachable_at`, set when Telegram answered 403) and, for a
campaign (marketing) but not an announcement (service news), customers an
operator blocked (`customers.blocked`).

A campaign is created `draft` (started later by an operator), `scheduled`
(starts at `start_at`) or started at once; start, pause and resume move it
between `draft`/`scheduled`, `sending` and `paused`; the bot sends only the
recipients of `sending` campaigns (bot/campaigns.py) and marks one `done`
once its recipients are all written and tried. Every change is audited.

Recipients: a named campaign's are written when it is created, in one
INSERT … SELECT. Every other audience is written by the `campaign_expansion`
pass (ops/campaign_expansion.py) once the campaign has started, BATCH (5 000)
customers at a time in customer id order: each batch is one transaction that
inserts the batch's reachable customers (`INSERT … SELECT … ON CONFLICT DO
NOTHING` against the UNIQUE (campaign_id, customer_id) index), counts those
left out and moves `expansion_cursor` to the batch's last customer id, on
the condition that the cursor is still where the batch started (two runs at
once: the second one's batch rolls back). The audience is read as the pass
goes: a customer who joins it after the pass went past their id is not added.
"""

import datetime

from peewee import SQL, Case, fn

from models.base import db, utcnow
from models.campaigns import CAMPAIGN_KINDS, RECIPIENT_STATUSES, Campaign, CampaignRecipient
from models.commerce import Customer, Order, Plan, Subscription
from models.fulfillment import Entitlement
from ops.records import record_audit

MAX_TEXT_LENGTH = 4096  # Telegram's limit on a message's text
MAX_NAMED_CUSTOMERS = 10_000
BATCH = 5_000  # customers a campaign_expansion transaction goes through (SPEC 5.1)
MAX_SCHEDULE_AHEAD = datetime.timedelta(days=366)

SEGMENTS = ("all", "active", "expired", "trial-only", "never-paid", "plan")  # what the pass expands
LIVE_STATUSES = ("active", "limited")
PAID_ORDER_STATES = ("paid", "fulfilled", "partially_refunded", "refunded")
# status → what an operator may do to it, and the status it gets.
STARTABLE = ("draft", "scheduled")
PAUSABLE = ("scheduled", "sending")

INVALID_CAMPAIGN_KIND = "invalid_campaign_kind"
INVALID_CAMPAIGN_TEXT = "invalid_campaign_text"
INVALID_AUDIENCE = "invalid_audience"
INVALID_SCHEDULE = "invalid_schedule"
EMPTY_AUDIENCE = "empty_audience"
PLAN_NOT_FOUND = "plan_not_found"
CAMPAIGN_NOT_FOUND = "campaign_not_found"
CAMPAIGN_STATE_CONFLICT = "campaign_state_conflict"

CATEGORY = "campaigns"
CREATED = "campaign.created"
STARTED = "campaign.started"
PAUSED = "campaign.paused"
RESUMED = "campaign.resumed"


class CampaignRejected(Exception):
    def __init__(self, code, detail):
        super().__init__(detail)
        self.code = code
        self.detail = detail


def validate(kind, text, customer_ids, audience="all", plan_id=None):
    if kind not in CAMPAIGN_KINDS:
        raise CampaignRejected(INVALID_CAMPAIGN_KIND, f"kind must be one of {', '.join(CAMPAIGN_KINDS)}")
    if not isinstance(text, str) or not text.strip() or len(text) > MAX_TEXT_LENGTH:
        raise CampaignRejected(INVALID_CAMPAIGN_TEXT, f"text must be 1 to {MAX_TEXT_LENGTH} characters")
    validate_audience(audience, plan_id, customer_ids)


def validate_audience(audience, plan_id, customer_ids):
    if audience == "named":
        if (
            not isinstance(customer_ids, list)
            or not customer_ids
            or len(customer_ids) > MAX_NAMED_CUSTOMERS
            or not all(isinstance(value, str) and 0 < len(value) <= 64 for value in customer_ids)
        ):
            raise CampaignRejected(
                INVALID_AUDIENCE, f"customerIds must be a list of 1 to {MAX_NAMED_CUSTOMERS} customer ids"
            )
    elif audience not in SEGMENTS:
        raise CampaignRejected(INVALID_AUDIENCE, f"audience must be one of {', '.join(SEGMENTS)}, or customerIds")
    elif customer_ids is not None:
        raise CampaignRejected(INVALID_AUDIENCE, "customerIds name the audience: leave audience out with them")
    if audience == "plan":
        if not isinstance(plan_id, int) or isinstance(plan_id, bool) or plan_id <= 0:
            raise CampaignRejected(INVALID_AUDIENCE, "the audience `plan` needs planId, a plan's id")
        if not Plan.select().where(Plan.id == plan_id).exists():
            raise CampaignRejected(PLAN_NOT_FOUND, f"plan {plan_id} does not exist")
    elif plan_id is not None:
        raise CampaignRejected(INVALID_AUDIENCE, "planId goes only with the audience `plan`")


def _holds_live_period(now, plan_id=None):
    live = (
        Entitlement.select(SQL("1"))
        .join(Subscription, on=(Entitlement.subscription == Subscription.id))
        .where(
            Subscription.customer == Customer.id,
            Entitlement.status.in_(LIVE_STATUSES),
            Entitlement.paused_at.is_null(),
            Entitlement.ends_at > now,
        )
    )
    return fn.EXISTS(live.where(Entitlement.plan == plan_id) if plan_id is not None else live)


def _entitlements(*conditions):
    return fn.EXISTS(
        Entitlement.select(SQL("1"))
        .join(Subscription, on=(Entitlement.subscription == Subscription.id))
        .where(Subscription.customer == Customer.id, *conditions)
    )


def _orders(*conditions):
    return fn.EXISTS(Order.select(SQL("1")).where(Order.customer == Customer.id, *conditions))


def _paid():
    return _orders(Order.status.in_(PAID_ORDER_STATES), Order.amount_minor > 0, Order.operation != "trial")


def segment(audience, now, plan_id=None):
    """The condition on Customer of an audience other than `named`."""
    if audience == "active":
        return _holds_live_period(now)
    if audience == "plan":
        return _holds_live_period(now, plan_id)
    if audience == "expired":
        had_access = _entitlements(Entitlement.status.not_in(("pending", "failed")))
        current = _entitlements(
            (Entitlement.status == "pending")
            | (
                Entitlement.status.in_(LIVE_STATUSES)
                & (Entitlement.paused_at.is_null(False) | (Entitlement.ends_at > now))
            )
        )
        return had_access & ~current
    if audience == "never-paid":
        return ~_paid()
    if audience == "trial-only":
        return _orders(Order.operation == "trial", Order.status.in_(PAID_ORDER_STATES)) & ~_paid()
    return SQL("1 = 1")


def members(audience, now, plan_id=None, customer_ids=None):
    """Customers of the audience who have a Telegram chat, reachable or not."""
    query = Customer.select(Customer.id, Customer.telegram_id).where(Customer.telegram_id.is_null(False))
    if audience == "named":
        return query.where(Customer.id.in_(sorted(set(customer_ids))))
    return query.where(segment(audience, now, plan_id))


def reachable(kind):
    """The condition that keeps a member: the bot can reach them, and (a campaign) no operator blocked them."""
    condition = Customer.telegram_unreachable_at.is_null()
    return condition & (Customer.blocked == False) if kind == "campaign" else condition  # noqa: E712


def left_out_counts(kind, query):
    """(blocked, unreachable) of a members query: blocked first, so nobody is counted twice."""
    unreachable = Customer.telegram_unreachable_at.is_null(False)
    if kind != "campaign":
        return 0, query.where(unreachable).count()
    blocked = query.where(Customer.blocked == True).count()  # noqa: E712
    return blocked, query.where(unreachable, Customer.blocked == False).count()  # noqa: E712


def audience(kind, customer_ids=None, audience_name=None, plan_id=None, now=None):
    """The reachable members: what a campaign of `kind` starting now would be sent to."""
    name = audience_name or ("named" if customer_ids is not None else "all")
    return members(name, now or utcnow(), plan_id, customer_ids).where(reachable(kind))


def preview(kind, audience_name=None, plan_id=None, customer_ids=None, now=None):
    """{audience, blocked, unreachable, recipients} of an audience as of now; CampaignRejected on bad input."""
    name = audience_name or ("named" if customer_ids is not None else "all")
    if kind not in CAMPAIGN_KINDS:
        raise CampaignRejected(INVALID_CAMPAIGN_KIND, f"kind must be one of {', '.join(CAMPAIGN_KINDS)}")
    validate_audience(name, plan_id, customer_ids)
    query = members(name, now or utcnow(), plan_id, customer_ids)
    total = query.count()
    blocked, unreachable = left_out_counts(kind, query)
    return {"audience": total, "blocked": blocked, "unreachable": unreachable,
            "recipients": total - blocked - unreachable}  # fmt: skip


def _schedule(start_at, draft, now):
    """(status, start_at) of a new campaign."""
    if draft:
        if start_at is not None:
            raise CampaignRejected(INVALID_SCHEDULE, "a draft has no start time: give startAt or draft, not both")
        return "draft", None
    if start_at is None or start_at <= now:
        return "sending", now
    if start_at - now > MAX_SCHEDULE_AHEAD:
        raise CampaignRejected(INVALID_SCHEDULE, "startAt is at most a year ahead")
    return "scheduled", start_at


def create_campaign(
    kind, text, actor, reason, customer_ids=None, audience_name=None, plan_id=None, start_at=None, draft=False
):
    """The campaign (and a named one's recipients), or CampaignRejected (nothing written).

    Started now, a campaign whose audience has nobody the bot can reach is refused (`empty_audience`);
    a draft or a scheduled one is not: its audience is read when it starts."""
    name = audience_name or ("named" if customer_ids is not None else "all")
    validate(kind, text, customer_ids, name, plan_id)
    now = utcnow()
    status, start = _schedule(start_at, draft, now)
    with db.atomic():
        campaign = Campaign.create(
            kind=kind, text=text, created_by=actor, created_at=now, audience=name, plan=plan_id, status=status,
            start_at=start, expanded_at=now if name == "named" else None,
        )  # fmt: skip
        details = {"kind": kind, "audience": name, "status": status}
        if name == "named":
            count = _write_named(campaign, customer_ids, now)
            details["recipients"] = count
        elif status == "sending" and not audience(kind, None, name, plan_id, now).exists():
            count = 0
        else:
            count = None
        if count == 0:  # raised inside the transaction: the campaign row goes with it
            raise CampaignRejected(EMPTY_AUDIENCE, "no customer in the audience can be reached through the bot")
        if plan_id is not None:
            details["planId"] = plan_id
        if start is not None and status == "scheduled":
            details["startAt"] = start.isoformat(timespec="seconds") + "Z"
        record_audit(CATEGORY, CREATED, actor, reason, "campaign", campaign.id, details)
    return Campaign.get_by_id(campaign.id)


def _write_named(campaign, customer_ids, now):
    query = members("named", now, customer_ids=customer_ids)
    chosen = query.where(reachable(campaign.kind)).select(campaign.id, Customer.id, Customer.telegram_id)
    count = (
        CampaignRecipient.insert_from(
            chosen, [CampaignRecipient.campaign, CampaignRecipient.customer, CampaignRecipient.chat_id]
        )
        .as_rowcount()
        .execute()
    )
    blocked, unreachable = left_out_counts(campaign.kind, query)
    Campaign.update(recipients=count, left_out_blocked=blocked, left_out_unreachable=unreachable).where(
        Campaign.id == campaign.id
    ).execute()
    return count


def expand_batch(campaign, now=None, batch=BATCH):
    """Write the next `batch` customers of a started campaign's audience; returns (inserted, finished).

    One transaction; a second run over the same customers inserts nobody (the UNIQUE index), and a run that
    finds the cursor moved under it writes nothing (CampaignRejected rolls it back)."""
    now = now or utcnow()
    query = members(campaign.audience, now, campaign.plan_id)
    cursor = campaign.expansion_cursor
    if cursor is not None:
        query = query.where(Customer.id > cursor)
    last = query.select(Customer.id).order_by(Customer.id).offset(batch - 1).limit(1).scalar()
    chunk = query.where(Customer.id <= last) if last is not None else query
    with db.atomic():
        chosen = chunk.where(reachable(campaign.kind)).select(campaign.id, Customer.id, Customer.telegram_id)
        inserted = (
            CampaignRecipient.insert_from(
                chosen, [CampaignRecipient.campaign, CampaignRecipient.customer, CampaignRecipient.chat_id]
            )
            .on_conflict_ignore()
            .as_rowcount()
            .execute()
        )
        blocked, unreachable = left_out_counts(campaign.kind, chunk)
        same_cursor = Campaign.expansion_cursor.is_null() if cursor is None else Campaign.expansion_cursor == cursor
        moved = (
            Campaign.update(
                recipients=Campaign.recipients + inserted,
                left_out_blocked=Campaign.left_out_blocked + blocked,
                left_out_unreachable=Campaign.left_out_unreachable + unreachable,
                expansion_cursor=last if last is not None else cursor,
                expanded_at=now if last is None else None,
            )
            .where(Campaign.id == campaign.id, Campaign.expanded_at.is_null(), same_cursor)
            .execute()
        )
        if moved != 1:
            raise CampaignRejected(CAMPAIGN_STATE_CONFLICT, f"campaign {campaign.id} was expanded by another run")
    campaign.expansion_cursor = last if last is not None else cursor
    return inserted, last is None


def to_expand(now):
    """Started campaigns whose recipients are not all written, oldest first."""
    return list(
        Campaign.select()
        .where(
            Campaign.expanded_at.is_null(),
            Campaign.status.in_(("sending", "paused")),
            Campaign.start_at <= now,
        )
        .order_by(Campaign.id)
    )


def start_due(now):
    """Scheduled campaigns whose start has come begin sending; returns how many."""
    with db.atomic():
        return (
            Campaign.update(status="sending").where(Campaign.status == "scheduled", Campaign.start_at <= now).execute()
        )


def _change(campaign_id, allowed, action, actor, reason, values):
    with db.atomic():
        changed = Campaign.update(**values).where(Campaign.id == campaign_id, Campaign.status.in_(allowed)).execute()
        found = Campaign.get_or_none(Campaign.id == campaign_id)
        if found is None:
            raise CampaignRejected(CAMPAIGN_NOT_FOUND, f"campaign {campaign_id} does not exist")
        if not changed:
            raise CampaignRejected(
                CAMPAIGN_STATE_CONFLICT,
                f"campaign {campaign_id} is {found.status}; this needs it {' or '.join(allowed)}",
            )
        record_audit(CATEGORY, action, actor, reason, "campaign", campaign_id, {"status": found.status})
    return found


def start(campaign_id, actor, reason):
    """A draft or scheduled campaign starts now."""
    return _change(campaign_id, STARTABLE, STARTED, actor, reason, {"status": "sending", "start_at": utcnow()})


def pause(campaign_id, actor, reason):
    """The bot sends no more of it (a send already claimed finishes) until it is resumed."""
    return _change(campaign_id, PAUSABLE, PAUSED, actor, reason, {"status": "paused"})


def resume(campaign_id, actor, reason):
    """Back to sending (or to waiting for its start, if that is still ahead)."""
    now = utcnow()
    status = Case(None, [(Campaign.start_at > now, "scheduled")], "sending")
    return _change(campaign_id, ("paused",), RESUMED, actor, reason, {"status": status})


def progress(campaign_id):
    """{status: recipients} of a campaign, every status present."""
    rows = (
        CampaignRecipient.select(CampaignRecipient.status, fn.COUNT(CampaignRecipient.id))
        .where(CampaignRecipient.campaign == campaign_id)
        .group_by(CampaignRecipient.status)
        .tuples()
    )
    counts = dict.fromkeys(RECIPIENT_STATUSES, 0)
    counts.update({status: count for status, count in rows})
    return counts
