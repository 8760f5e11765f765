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
    assert [notice.kind for notice in notices()] == [renewal.NOTICE_DUNNING]  # not also "renew it from the menu"


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


def told(notice, language):
    """The notice's text as the customer-notice loop renders it, in `language`."""
    from bot import customer_notices

    Customer.update(language_code=language).where(Customer.id == notice.customer_id).execute()
    return customer_notices.render(CustomerNotice.get_by_id(notice.id)).text


def with_auto_renew(period, balance):
    from tests.support.sales import topped_up

    Subscription.update(auto_renew=True).where(Subscription.id == period.subscription_id).execute()
    if balance:
        topped_up(period.subscription.customer, balance, "RUB")
    CustomerNotice.delete().execute()  # the top-up's own notice


def test_a_new_trial_is_not_told_it_ends_at_once_and_in_its_last_day_is_offered_a_plan_to_buy(database):
    from commerce import phase
    from tests.support import commerce
    from tests.support.sales import provision

    trial_plan = commerce.priced_plan("trial", prices={"RUB": 0}, trial=True, days=3)
    Plan.update(name="Trial, 3 days").where(Plan.id == trial_plan.id).execute()
    customer = Customer.create(display_name="Tia", telegram_id=next(_telegram_ids))
    settled = settle_order(create_order(customer.id, "trial", "RUB", plan_id=trial_plan.id).id, "trial")
    provision(settled)
    trial = Entitlement.get_by_id(settled.entitlement_id)
    now = utcnow()
    for moment in (now, now + HOUR, now + DAY):
        lifecycle.tick(now=moment)
        standing = phase.standings([trial.subscription_id], now=moment)[trial.subscription_id]
        assert standing.phase == phase.ACTIVE  # not "ends soon" from the start
    assert notices() == []
    lifecycle.tick(now=trial.ends_at - HOUR)
    lifecycle.tick(now=trial.ends_at + HOUR)
    ending, ended = notices()
    assert (ending.kind, ended.kind) == (lifecycle.TRIAL_ENDING, lifecycle.TRIAL_ENDED)
    when = f"{trial.ends_at:%Y-%m-%d %H:%M} UTC"
    assert told(ending, "en") == (
        f"Your free trial ends tomorrow, on {when}. To keep your access, choose a plan under Buy in the menu."
    )
    assert told(ending, "ru") == (
        f"Пробный период закончится завтра, {when}. Чтобы сохранить доступ, выберите тариф в меню «Купить»."
    )
    assert told(ended, "en").startswith(f"Your free trial ended on {when}. Choose a plan under Buy")
    assert told(ended, "ru").startswith(f"Пробный период закончился {when}. Выберите тариф")


def test_an_auto_renewing_subscription_the_wallet_covers_is_told_it_renews_and_never_asked_to_renew(database):
    period = subscribed(ends_in=3 * DAY - HOUR)
    with_auto_renew(period, 50000)
    now = utcnow()
    for moment in (now, now + DAY, now + 2 * DAY, now + 2 * DAY + HOUR):
        lifecycle.tick(now=moment)
    (notice,) = notices()
    assert (notice.kind, notice.dedupe_key) == (lifecycle.RENEWS_FROM_WALLET, key_of(period))
    when = f"{period.ends_at:%Y-%m-%d %H:%M} UTC"
    assert told(notice, "en") == (
        f"Your Monthly subscription renews from your wallet before it ends on {when}: 199.00 RUB "
        "(your balance is 500.00 RUB). There is nothing you need to do."
    )
    assert told(notice, "ru").startswith(f"Подписка «Monthly» продлится с кошелька до окончания, {when}: 199.00 RUB")


def test_an_auto_renewing_subscription_the_wallet_cannot_cover_gets_the_top_up_prompt(database):
    period = subscribed(ends_in=3 * DAY - HOUR)
    with_auto_renew(period, 10000)
    now = utcnow()
    for moment in (now, now + 2 * DAY, now + 2 * DAY + HOUR):
        lifecycle.tick(now=moment)
    (notice,) = notices()
    assert notice.kind == lifecycle.RENEWAL_NEEDS_TOPUP
    assert told(notice, "en") == (
        f"Your Monthly subscription ends on {period.ends_at:%Y-%m-%d %H:%M} UTC. Auto-renewal pays 199.00 RUB from "
        "your wallet, but your balance is 100.00 RUB: top up your wallet from the menu (Wallet) to keep your access."
    )
    assert "пополните кошелёк" in told(notice, "ru")


def test_a_subscription_without_auto_renewal_is_told_how_to_extend_it(database):
    subscribed(ends_in=3 * DAY - HOUR)
    lifecycle.tick()
    (notice,) = notices()
    assert notice.kind == lifecycle.EXPIRING_3D
    assert "(Buy → Monthly → Extend my subscription)" in told(notice, "en")
    assert "(«Купить» → «Monthly» → «Продлить мою подписку»)" in told(notice, "ru")


def test_an_auto_renewing_subscription_its_plan_no_longer_renews_is_told_it_ends(database):
    from models.catalogue import PlanPrice

    period = subscribed(ends_in=3 * DAY - HOUR)
    with_auto_renew(period, 50000)
    PlanPrice.delete().where(PlanPrice.plan == monthly().id, PlanPrice.currency == "RUB").execute()
    now = utcnow()
    for moment in (now, now + 2 * DAY + HOUR):
        lifecycle.tick(now=moment)
    assert [notice.kind for notice in notices()] == [lifecycle.EXPIRING_3D, lifecycle.EXPIRING_1D]
