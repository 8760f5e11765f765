"""SPEC 15.5, 5.1, 14.6: campaigns with an audience and a schedule — each audience holds the customers it names,
blocked and unreachable ones are left out and counted, the campaign_expansion pass writes the recipients once,
a scheduled campaign waits for its start, and the bot sends nothing of a paused campaign."""

import datetime
import importlib
import threading
import time

from peewee import Case, SqliteDatabase, Value

import omniflow
from bot.campaigns import SENDERS, CampaignDelivery
from jobs import huey
from models.base import db, utcnow
from models.campaigns import Campaign, CampaignRecipient
from models.commerce import Customer, Order, Plan, Subscription
from models.fulfillment import Entitlement
from models.ops import AuditEvent
from ops import campaign_expansion
from ops.campaigns import create_campaign, pause, preview, progress, resume, start

DAY = datetime.timedelta(days=1)
FIRST_CHAT = 7_000_000
TEXT = "Winter sale: two months for the price of one."


def plan(code):
    return Plan.create(code=code, name=code, duration_days=30, price_minor=29900, currency="RUB").id


def population(shapes, plan_id, first_chat=FIRST_CHAT):
    """One customer with a chat per shape, written in bulk in one transaction; returns their ids in order.

    A shape is what the customer holds: `active` (a paid period live for 20 more days), `expired` (a paid period
    that ended 5 days ago), `trial` (a free trial that ended yesterday), `paused` (a paid period an operator
    paused), `pending` (a paid period not provisioned yet) or `none` (never ordered)."""
    now = utcnow()
    ids = [f"a{first_chat + index:09d}" for index in range(len(shapes))]
    customers = [{"id": customer_id, "display_name": customer_id, "telegram_id": first_chat + index}
                 for index, customer_id in enumerate(ids)]  # fmt: skip
    holders = [(customer_id, shape) for customer_id, shape in zip(ids, shapes) if shape != "none"]
    subscriptions = [{"id": f"s-{customer_id}", "customer": customer_id, "slot": 1} for customer_id, _ in holders]
    orders = [
        {
            "customer": customer_id,
            "subscription": f"s-{customer_id}",
            "plan": plan_id,
            "operation": "trial" if shape == "trial" else "purchase",
            "status": "fulfilled" if shape != "pending" else "paid",
            "amount_minor": 0 if shape == "trial" else 29900,
            "currency": "RUB",
            "idempotency_key": f"audience:{customer_id}",
        }
        for customer_id, shape in holders
    ]
    ends = {"active": now + 20 * DAY, "expired": now - 5 * DAY, "trial": now - DAY, "paused": now + 9 * DAY,
            "pending": now + 30 * DAY}  # fmt: skip
    status = {"pending": "pending", "expired": "expired", "trial": "expired"}
    with db.atomic():
        for model, rows in ((Customer, customers), (Subscription, subscriptions), (Order, orders)):
            for at in range(0, len(rows), 1000):
                model.insert_many(rows[at : at + 1000]).execute()
        order_of = dict(
            Order.select(Order.customer, Order.id).where(Order.idempotency_key.startswith("audience:")).tuples()
        )
        entitlements = [
            {
                "order": order_of[customer_id],
                "subscription": f"s-{customer_id}",
                "plan": plan_id,
                "status": status.get(shape, "active"),
                "starts_at": ends[shape] - 30 * DAY,
                "ends_at": ends[shape],
                "paused_at": now - DAY if shape == "paused" else None,
            }
            for customer_id, shape in holders
        ]
        for at in range(0, len(entitlements), 1000):
            Entitlement.insert_many(entitlements[at : at + 1000]).execute()
    return ids


def analyze():
    """PostgreSQL's statistics of the tables just filled, as autovacuum would gather them: planned without, the
    audience's EXISTS lookups take several times longer."""
    if not isinstance(db.obj, SqliteDatabase):
        db.execute_sql("ANALYZE customers, subscriptions, orders, entitlements")


def crowd(count, plan_id, first_chat=FIRST_CHAT):
    """`count` customers with a chat in a few set-based statements of one transaction (a row at a time through
    the ORM takes seconds per 20 000 on a busy machine): by their chat's last digit, 0-7 hold a paid period live
    for 20 more days, 8 one that ended 5 days ago, 9 never ordered. Returns the ids of the period holders."""
    now = utcnow()
    at = lambda moment: Value(moment, converter=Entitlement.ends_at.db_value)  # noqa: E731
    numbers = f"WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < {count - 1})"
    ours = Customer.telegram_id.between(first_chat, first_chat + count - 1)
    digit = Customer.telegram_id - Customer.telegram_id / 10 * 10  # whole numbers: `/` divides without a fraction
    holds, live = ours & (digit != 9), digit < 8
    with db.atomic():
        db.execute_sql(
            f"{numbers} INSERT INTO customers (id, display_name, telegram_id, blocked, created_at)"
            f" SELECT 'a' || ({first_chat} + i), 'customer', {first_chat} + i, {db.param}, {db.param} FROM n",
            (False, Customer.created_at.db_value(now)),
        )
        Subscription.insert_from(
            Customer.select(Value("s-").concat(Customer.id), Customer.id, Value(1), at(now)).where(holds),
            [Subscription.id, Subscription.customer, Subscription.slot, Subscription.created_at],
        ).as_rowcount().execute()
        Order.insert_from(
            Customer.select(
                Customer.id, Value("s-").concat(Customer.id), Value(plan_id), Value("purchase"), Value("fulfilled"),
                Value(29900), Value("RUB"), Value("audience:").concat(Customer.id), at(now),
            ).where(holds),
            [Order.customer, Order.subscription, Order.plan, Order.operation, Order.status, Order.amount_minor,
             Order.currency, Order.idempotency_key, Order.created_at],
        ).as_rowcount().execute()  # fmt: skip
        Entitlement.insert_from(
            Order.select(
                Order.id, Order.subscription, Value(plan_id), Case(None, [(live, "active")], "expired"),
                Case(None, [(live, at(now - 10 * DAY))], at(now - 35 * DAY)),
                Case(None, [(live, at(now + 20 * DAY))], at(now - 5 * DAY)), at(now), at(now),
            ).join(Customer, on=(Order.customer == Customer.id)).where(holds),
            [Entitlement.order, Entitlement.subscription, Entitlement.plan, Entitlement.status, Entitlement.starts_at,
             Entitlement.ends_at, Entitlement.created_at, Entitlement.updated_at],
        ).as_rowcount().execute()  # fmt: skip
    analyze()
    return [row[0] for row in Customer.select(Customer.id).where(holds, live).order_by(Customer.id).tuples()]


def started(audience="all", kind="campaign", plan_id=None):
    """A campaign started now, expanded by one run of the pass."""
    created = create_campaign(kind, TEXT, "operator:alice", "winter sale", audience_name=audience, plan_id=plan_id)
    campaign_expansion.run()
    return Campaign.get_by_id(created.id)


def recipients_of(campaign):
    return {r.customer_id for r in CampaignRecipient.select().where(CampaignRecipient.campaign == campaign.id)}


def test_campaign_expansion_is_declared_every_minute_with_a_five_minute_timeout():
    assert "ops.campaign_expansion" in omniflow.JOB_KIND_MODULES
    for module in omniflow.JOB_KIND_MODULES:
        importlib.import_module(module)
    spec = huey.periodic_schedules["campaign_expansion"]
    assert (spec.schedule.seconds, spec.timeout) == (60, 5 * 60)


def test_each_audience_holds_the_customers_it_names_and_leaves_out_blocked_and_unreachable_ones(database):
    monthly, yearly = plan("monthly"), plan("yearly")
    shapes = ["active", "active", "expired", "trial", "paused", "pending", "none", "active", "active"]
    active, active2, expired, trial, paused, pending, never, blocked, unreachable = population(shapes, monthly)
    Entitlement.update(plan=yearly).where(Entitlement.subscription == f"s-{active2}").execute()
    Customer.update(blocked=True).where(Customer.id == blocked).execute()
    Customer.update(telegram_unreachable_at=utcnow()).where(Customer.id == unreachable).execute()
    Customer.create(id="web-only", display_name="no chat")  # never in an audience: the bot cannot reach them

    expected = {
        "all": {active, active2, expired, trial, paused, pending, never},
        "active": {active, active2},
        "expired": {expired, trial},
        "never-paid": {trial, never},
        "trial-only": {trial},
    }
    for audience, members in expected.items():
        campaign = started(audience)
        assert recipients_of(campaign) == members, audience
        left_out = 2 if audience in ("all", "active") else 0  # the blocked and the unreachable one hold a period
        assert (campaign.recipients, campaign.left_out_blocked + campaign.left_out_unreachable) == (
            len(members),
            left_out,
        ), audience
        assert preview("campaign", audience)["recipients"] == len(members), audience
    assert recipients_of(started("plan", plan_id=yearly)) == {active2}
    assert preview("campaign", "active") == {"audience": 4, "blocked": 1, "unreachable": 1, "recipients": 2}
    # An announcement (service news) reaches the customer an operator blocked, never the one who blocked the bot.
    news = started("active", kind="announcement")
    assert recipients_of(news) == {active, active2, blocked}
    assert (news.left_out_blocked, news.left_out_unreachable) == (0, 1)


def test_a_scheduled_campaign_waits_for_its_start_and_a_draft_for_an_operator(database):
    ids = population(["active"] * 3, plan("monthly"))
    later = create_campaign("campaign", TEXT, "operator:alice", "tomorrow", start_at=utcnow() + DAY)
    draft = create_campaign("campaign", TEXT, "operator:alice", "not yet", audience_name="active", draft=True)
    assert (later.status, draft.status, draft.start_at) == ("scheduled", "draft", None)
    campaign_expansion.run()
    assert recipients_of(later) == recipients_of(draft) == set()

    campaign_expansion.run(now=utcnow() + DAY + datetime.timedelta(minutes=1))  # the start has come
    assert Campaign.get_by_id(later.id).status == "sending" and recipients_of(later) == set(ids)
    assert recipients_of(draft) == set()
    start(draft.id, "operator:bob", "go")
    campaign_expansion.run()
    assert (Campaign.get_by_id(draft.id).status, recipients_of(draft)) == ("sending", set(ids))
    actions = [
        e.action
        for e in AuditEvent.select().where(
            AuditEvent.subject_type == "campaign", AuditEvent.subject_id == str(draft.id)
        )
    ]
    assert actions == ["campaign.created", "campaign.started"]


def test_20000_customers_audience_active_is_expanded_once_sent_at_the_rate_and_a_pause_stops_the_sends(
    database, telebot, fake_telegram
):
    """20 000 customers, 16 000 of them holding a live period, 2 000 whose period ended and 2 000 who never ordered:
    the audience `active` is written by the pass in batches of 5 000, and a second run — and a whole expansion
    replayed from the start — adds nobody. The bot's loop then sends at the paced rate (25/s), and a pause stops
    the sends at once: only those already claimed (at most SENDERS) still leave. The delivery is checked on the
    first hundred sends of this campaign, not on all 16 000: at 25/s they would take more than ten minutes."""
    begun = time.monotonic()
    holders = crowd(20_000, plan("monthly"))
    print(f"20 000 customers written in {time.monotonic() - begun:.2f} s")
    Customer.update(blocked=True).where(Customer.id.in_(holders[:40])).execute()
    Customer.update(telegram_unreachable_at=utcnow()).where(Customer.id.in_(holders[40:100])).execute()
    assert preview("campaign", "active") == {"audience": 16_000, "blocked": 40, "unreachable": 60,
                                             "recipients": 15_900}  # fmt: skip

    campaign = create_campaign("campaign", TEXT, "operator:alice", "winter sale", audience_name="active")
    begun = time.monotonic()
    first = campaign_expansion.run()
    expansion_s = time.monotonic() - begun
    second = campaign_expansion.run()
    assert (first["recipients"], first["campaigns"], second["recipients"]) == (15_900, 1, 0)
    expanded = Campaign.get_by_id(campaign.id)
    assert (expanded.recipients, expanded.left_out_blocked, expanded.left_out_unreachable) == (15_900, 40, 60)
    assert CampaignRecipient.select().where(CampaignRecipient.campaign == campaign.id).count() == 15_900
    # Replayed from the first customer (as a run that lost its cursor would): the unique index takes nobody twice.
    Campaign.update(expansion_cursor=None, expanded_at=None).where(Campaign.id == campaign.id).execute()
    assert campaign_expansion.run()["recipients"] == 0
    assert CampaignRecipient.select().where(CampaignRecipient.campaign == campaign.id).count() == 15_900
    print(f"expanded 15 900 recipients of 20 000 customers in {expansion_s:.2f} s")

    rate = 25
    loop = CampaignDelivery(telebot, threading.Event(), rate, idle_s=0.05)
    thread = threading.Thread(target=loop.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while fake_telegram.accepted_count("sendMessage") < 100 and time.monotonic() < deadline:
            time.sleep(0.01)
        pause(campaign.id, "operator:alice", "wrong price in the text")
        at_pause = fake_telegram.accepted_count("sendMessage")
        time.sleep(0.5)  # the sends claimed before the pause finish
        settled = fake_telegram.accepted_count("sendMessage")
        time.sleep(1.5)  # 37 more sends at the rate, had the pause not stopped them
        assert fake_telegram.accepted_count("sendMessage") == settled
        assert settled - at_pause <= SENDERS
    finally:
        loop.stop.set()
        thread.join(15)
    assert not thread.is_alive()
    counts = progress(campaign.id)
    assert counts["sent"] == settled and counts["sending"] == 0 and counts["pending"] == 15_900 - settled
    assert Campaign.get_by_id(campaign.id).status == "paused"

    chats = [call["chat_id"] for call in fake_telegram.accepted("sendMessage")]
    assert len(chats) == len(set(chats))  # nobody twice
    times = sorted(m["at"] for chat in chats for m in fake_telegram.bot_messages(chat) if m["text"] == TEXT)
    measured = (len(times) - 1) / (times[-1] - times[0])
    print(f"campaign of 20 000 customers sent at {measured:.1f}/s (rate {rate}/s)")
    # Never faster than the rate; slower only as much as a loaded machine makes it (the pacing's own
    # ±10 % bound is tests/bot/test_campaign_delivery.py's, on a campaign that sends nothing else).
    assert 0.75 * rate <= measured <= 1.1 * rate

    resume(campaign.id, "operator:alice", "text fixed")
    assert Campaign.get_by_id(campaign.id).status == "sending" and loop.due()  # its recipients are due again
