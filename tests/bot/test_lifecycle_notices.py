"""SPEC 6, 14.6: lifecycle notices — expiring in 3 days, in 1 day, expired — each once per subscription,
kind and period, however many ticks pass; dunning once per period."""

import datetime
import json
import threading

import pytest

from bot import lifecycle, texts
from commerce.orders import create_order
from commerce.passes import renewal
from commerce.settlement import settle_order
from models.base import utcnow
from models.commerce import Customer, Plan, Subscription
from models.fulfillment import Entitlement
from models.ops import CustomerNotice
from tests.support.shop import rub_plan

pytestmark = pytest.mark.usefixtures("ledger_invariant")

HOUR = datetime.timedelta(hours=1)
DAY = 24 * HOUR
_telegram_ids = iter(range(700_000, 800_000))


def monthly():
    return Plan.get_or_none(Plan.code == "monthly") or rub_plan("monthly")


def subscribed(ends_in, length=30 * DAY, telegram=True, status="active"):
    """A customer whose current period ends `ends_in` from now and lasted `length`; returns its entitlement."""
    customer = Customer.create(display_name="Alice", telegram_id=next(_telegram_ids) if telegram else None)
    order = create_order(customer.id, "purchase", "RUB", plan_id=monthly().id, provider="yookassa")
    settlement = settle_order(order.id, "provider_webhook")
    ends_at = utcnow().replace(microsecond=0) + ends_in
    Entitlement.update(status=status, ends_at=ends_at, starts_at=ends_at - length).where(
        Entitlement.id == settlement.entitlement_id
    ).execute()
    return Entitlement.get_by_id(settlement.entitlement_id)


def notices(kind=None):
    query = CustomerNotice.select().order_by(CustomerNotice.id)
    if kind:
        query = query.where(CustomerNotice.kind == kind)
    return list(query)


def key_of(entitlement):
    return f"{entitlement.subscription_id}:{entitlement.ends_at.isoformat(timespec='seconds')}Z"


def test_a_subscription_expiring_in_3_days_gets_one_notice_however_many_ticks_pass(database):
    period = subscribed(ends_in=3 * DAY - HOUR)
    for _ in range(5):
        lifecycle.tick()
    [notice] = notices()
    assert (notice.kind, notice.dedupe_key, notice.sent_at) == (lifecycle.EXPIRING_3D, key_of(period), None)
    assert notice.customer_id == period.subscription.customer_id
    payload = json.loads(notice.payload)
    assert payload["subscriptionId"] == period.subscription_id and payload["plan"] == monthly().name


def test_the_same_period_is_told_3_days_then_1_day_then_expired_each_once(database):
    period = subscribed(ends_in=3 * DAY - HOUR)
    now = utcnow()
    for moment in (now, now + HOUR, now + 2 * DAY, now + 2 * DAY + HOUR, now + 3 * DAY, now + 4 * DAY):
        lifecycle.tick(now=moment)
    assert [notice.kind for notice in notices()] == [lifecycle.EXPIRING_3D, lifecycle.EXPIRING_1D, lifecycle.EXPIRED]
    assert {notice.dedupe_key for notice in notices()} == {key_of(period)}


def test_a_period_extended_after_its_notice_is_a_new_period_told_once_more(database):
    period = subscribed(ends_in=2 * DAY)
    lifecycle.tick()
    Entitlement.update(ends_at=period.ends_at + 6 * HOUR).where(Entitlement.id == period.id).execute()
    lifecycle.tick()
    lifecycle.tick()
    assert [notice.kind for notice in notices()] == [lifecycle.EXPIRING_3D, lifecycle.EXPIRING_3D]
    assert len({notice.dedupe_key for notice in notices()}) == 2


def test_only_live_current_periods_of_customers_with_a_chat_bought_before_the_window_are_told(database):
    told = subscribed(ends_in=2 * DAY)
    subscribed(ends_in=2 * DAY, telegram=False)  # no chat to tell
    subscribed(ends_in=2 * DAY, status="disabled")  # refunded: access revoked
    subscribed(ends_in=2 * DAY, length=2 * DAY + HOUR)  # bought inside the 3-day window
    subscribed(ends_in=5 * DAY)  # not yet
    subscribed(ends_in=-8 * DAY, status="expired")  # ended before the look-back
    paused = subscribed(ends_in=2 * DAY)
    Entitlement.update(paused_at=utcnow()).where(Entitlement.id == paused.id).execute()
    renewed = subscribed(ends_in=2 * DAY)
    Entitlement.create(
        order=create_order(renewed.subscription.customer_id, "purchase", "RUB", plan_id=monthly().id).id,
        subscription=renewed.subscription_id, plan=monthly().id, status="pending",
        starts_at=renewed.ends_at, ends_at=renewed.ends_at + 30 * DAY,
    )  # fmt: skip
    counts = lifecycle.tick()
    assert counts == {lifecycle.EXPIRING_3D: 1, lifecycle.EXPIRING_1D: 0, lifecycle.EXPIRED: 0}
    assert [notice.dedupe_key for notice in notices()] == [key_of(told)]


def test_a_window_is_walked_in_bounded_pages_and_every_period_is_told(database, monkeypatch):
    monkeypatch.setattr(lifecycle, "PAGE", 3)
    periods = [subscribed(ends_in=2 * DAY + index * HOUR) for index in range(8)]
    pages = []
    original = lifecycle.window_query
    monkeypatch.setattr(lifecycle, "window_query", lambda *a, **k: pages.append(1) or original(*a, **k))
    assert lifecycle.tick()[lifecycle.EXPIRING_3D] == 8
    assert {notice.dedupe_key for notice in notices()} == {key_of(period) for period in periods}
    assert len(pages) == 3 + 1 + 1  # 3 pages of the 3-day window, one each for the others


def test_dunning_is_queued_once_per_period_however_many_renewal_runs_find_the_wallet_short(database):
    period = subscribed(ends_in=2 * HOUR)
    Subscription.update(auto_renew=True).where(Subscription.id == period.subscription_id).execute()
    for _ in range(4):
        renewal.run()
        lifecycle.tick()
    dunning = notices(renewal.NOTICE_DUNNING)
    assert [notice.dedupe_key for notice in dunning] == [key_of(period)]
    assert [notice.kind for notice in notices(lifecycle.EXPIRING_1D)] == [lifecycle.EXPIRING_1D]


def test_the_loop_runs_ticks_until_stopped(database):
    subscribed(ends_in=2 * DAY)
    stop = threading.Event()
    loop = lifecycle.LifecycleNotices(stop, interval_s=0.05)
    thread = threading.Thread(target=loop.run)
    thread.start()
    try:
        for _ in range(100):
            if notices():
                break
            stop.wait(0.05)
    finally:
        stop.set()
        thread.join(5)
    assert not thread.is_alive()
    assert len(notices()) == 1


def test_every_lifecycle_kind_has_a_text_in_both_languages():
    for kind in lifecycle.KINDS:
        for language in texts.LANGUAGES:
            assert f"notice_{kind}" in texts.CATALOG[language]
