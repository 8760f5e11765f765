"""SPEC 13.13: the phase a customer sees is computed when it is read, from the
current entitlement, its order and its open operations — the same function for
the panel and the bot."""

import datetime
from types import SimpleNamespace

import pytest

from commerce import phase
from commerce.refunds import refund_order
from fulfillment import changes
from models.base import utcnow
from models.fulfillment import Entitlement, FulfillmentOperation
from tests.support import sales

NOW = datetime.datetime(2026, 12, 1, 12, 0, 0)
DAY = datetime.timedelta(days=1)


def period(status="active", ends_in=10 * DAY, grace_hours=24, paused=False, length=30 * DAY):
    return SimpleNamespace(
        status=status,
        starts_at=NOW + ends_in - length,
        ends_at=NOW + ends_in,
        grace_period_hours=grace_hours,
        paused_at=NOW - DAY if paused else None,
    )


@pytest.mark.parametrize(
    "entitlement, order_status, open_change, create_ended, expected",
    [
        (None, None, False, False, "expired"),
        (period(), "refunded", False, False, "expired"),
        (period(), "partially_refunded", False, False, "active"),
        (period(paused=True), "fulfilled", True, False, "paused"),
        (period(status="failed"), "fulfilled", False, False, "failed"),
        (period(status="pending"), "paid", False, True, "failed"),
        (period(status="pending"), "paid", True, True, "provisioning"),  # an operator retried it
        (period(status="pending"), "paid", False, False, "provisioning"),
        (period(), "fulfilled", True, False, "provisioning"),
        (period(status="disabled"), "fulfilled", False, False, "expired"),
        (period(status="limited"), "fulfilled", False, False, "active"),
        (period(ends_in=3 * DAY), "fulfilled", False, False, "expiring"),
        (period(ends_in=3 * DAY + datetime.timedelta(seconds=1)), "fulfilled", False, False, "active"),
        (period(ends_in=3 * DAY, length=3 * DAY), "fulfilled", False, False, "active"),
        (period(ends_in=DAY + datetime.timedelta(seconds=1), length=3 * DAY), "fulfilled", False, False, "active"),
        (period(ends_in=DAY, length=3 * DAY), "fulfilled", False, False, "expiring"),
        (period(ends_in=-datetime.timedelta(hours=23)), "fulfilled", False, False, "grace"),
        (period(ends_in=-datetime.timedelta(hours=24)), "fulfilled", False, False, "expired"),
        (period(ends_in=-datetime.timedelta(seconds=1), grace_hours=0), "fulfilled", False, False, "expired"),
    ],
    ids=[
        "nothing-current",
        "refunded",
        "partially-refunded",
        "paused",
        "panel-status-unknown",
        "create-ended",
        "create-retried",
        "waiting-for-create",
        "open-change",
        "disabled",
        "limited-by-traffic",
        "three-days-left",
        "more-than-three-days",
        "a-3-day-trial-just-begun",
        "a-3-day-trial-with-more-than-its-last-day-left",
        "a-3-day-trial-in-its-last-day",
        "in-grace",
        "grace-over",
        "no-grace",
    ],
)
def test_the_phase_follows_the_rules_in_their_order(entitlement, order_status, open_change, create_ended, expected):
    assert phase.phase_of(entitlement, order_status, open_change, create_ended, NOW) == expected
    assert expected in phase.PHASES


def test_standings_read_the_phase_of_each_subscription_from_the_database(database, ledger_invariant):
    buyer, plan = sales.customer(), sales.plan()
    _, waiting, _ = sales.paid_order(buyer, plan)
    _, provisioned, _ = sales.paid_order(buyer, plan)
    active = sales.provision(provisioned)
    _, outage, _ = sales.paid_order(buyer, plan)
    FulfillmentOperation.update(status="retrying", last_error_code="remnawave_unavailable", attempt_count=4).where(
        FulfillmentOperation.id == outage.operation_id
    ).execute()
    _, broken, _ = sales.paid_order(buyer, plan)
    FulfillmentOperation.update(status="failed", last_error_code="invalid_desired_state", completed_at=utcnow()).where(
        FulfillmentOperation.id == broken.operation_id
    ).execute()
    _, refunded, _ = sales.paid_order(buyer, plan)
    refunded_subscription = sales.provision(refunded)
    refund_order(refunded.order_id)

    def subscription_of(settlement):
        return Entitlement.get_by_id(settlement.entitlement_id).subscription_id

    ids = [subscription_of(s) for s in (waiting, outage, broken)] + [active.id, refunded_subscription.id]
    found = phase.standings(ids)
    assert [found[i].phase for i in ids] == ["provisioning", "provisioning", "failed", "active", "expired"]
    assert found[active.id].entitlement.id == provisioned.entitlement_id

    # A scheduled reconcile that keeps retrying does not make an active subscription provisioning.
    FulfillmentOperation.create(
        entitlement=provisioned.entitlement_id,
        operation="reconcile",
        status="retrying",
        idempotency_key="reconcile:test:1",
        desired_state="{}",
        correlation_id="scheduler:test",
    )
    assert phase.standings([active.id])[active.id].phase == "active"

    changes.pause(buyer.id, active.id, "pause-1", "operator:test", "customer asked")
    assert phase.standings([active.id])[active.id].phase == "paused"


def test_standings_of_no_subscriptions_read_nothing(database):
    assert phase.standings([]) == {}
