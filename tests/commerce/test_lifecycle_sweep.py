"""SPEC 13.11, 5.1: lifecycle_sweep expires unredeemed gift cards and unused personal offers past
their expiry, in bounded batches."""

import datetime

from commerce.codes import issue_gift_card
from commerce.passes import lifecycle_sweep
from jobs import insert
from models.base import utcnow
from models.catalogue import GiftCard, PersonalOffer
from models.jobs import Job
from tests.support import commerce
from tests.support.direct import run_next
from tests.support.shop import rub_plan

DAY = datetime.timedelta(days=1)


def offer(customer, expires_at, status="active"):
    return PersonalOffer.create(
        customer=customer, discount_percent=10, status=status, expires_at=expires_at,
        used_at=utcnow() if status == "used" else None,
    )  # fmt: skip


def status(row):
    return type(row).get_by_id(row.id).status


def test_gift_cards_and_offers_past_their_expiry_expire_and_the_rest_stay(database):
    plan, customer, now = rub_plan(), commerce.customer(), utcnow()
    stale, _ = issue_gift_card(plan, now - DAY)
    fresh, _ = issue_gift_card(plan, now + DAY)
    redeemed, _ = issue_gift_card(plan, now - DAY)
    GiftCard.update(status="redeemed", redeemed_by=customer, redeemed_at=now - 2 * DAY).where(
        GiftCard.id == redeemed.id
    ).execute()
    lapsed, open_offer = offer(customer, now - DAY), offer(customer, now + DAY)
    used = offer(customer, now - DAY, "used")

    assert lifecycle_sweep.sweep() == {"gift_cards": 1, "personal_offers": 1}

    assert (status(stale), status(fresh), status(redeemed)) == ("expired", "active", "redeemed")
    assert (status(lapsed), status(open_offer), status(used)) == ("expired", "active", "used")
    assert lifecycle_sweep.sweep() == {"gift_cards": 0, "personal_offers": 0}


def test_the_sweep_expires_a_batch_per_statement_and_a_run_asked_to_stop_leaves_the_rest(database, monkeypatch):
    plan, now = rub_plan(), utcnow()
    cards = [issue_gift_card(plan, now - (10 - n) * DAY)[0] for n in range(5)]
    offer(commerce.customer(), now - DAY)
    monkeypatch.setattr(lifecycle_sweep, "BATCH", 2)
    monkeypatch.setattr(
        lifecycle_sweep, "should_stop", lambda: GiftCard.select().where(GiftCard.status == "expired").exists()
    )

    assert lifecycle_sweep.sweep() == {"gift_cards": 2}
    assert [status(card) for card in cards] == ["expired", "expired", "active", "active", "active"]
    monkeypatch.setattr(lifecycle_sweep, "should_stop", lambda: False)
    assert lifecycle_sweep.sweep() == {"gift_cards": 3, "personal_offers": 1}


def test_lifecycle_sweep_runs_as_a_periodic_job(database):
    card, _ = issue_gift_card(rub_plan(), utcnow() - DAY)
    job_id = insert("periodic_task", {"task": lifecycle_sweep.NAME}).job_id
    assert run_next() == job_id
    assert Job.get_by_id(job_id).state == "completed"
    assert status(card) == "expired"
