"""SPEC 13.11: gift and access codes are stored only as hashes, shown once;
an access code allows a bounded number of activations, one per customer."""

import datetime

import pytest
from peewee import IntegrityError

from commerce import codes
from commerce.codes import CodeRejected
from models.base import db, utcnow
from models.catalogue import AccessCode, AccessCodeActivation, GiftCard
from models.commerce import Order
from tests.support import commerce


def every_stored_text(database):
    """Every value of every column of every table, as text."""
    values = []
    for table in database.get_tables():
        for row in database.execute_sql(f"SELECT * FROM {table}").fetchall():
            values.extend(str(value) for value in row)
    return values


def test_a_stored_gift_card_never_contains_its_code(database):
    plan = commerce.priced_plan()
    card, code = codes.issue_gift_card(plan, utcnow() + datetime.timedelta(days=365))
    assert len(codes.normalise(code)) == codes.CODE_LENGTH
    stored = every_stored_text(database)
    assert not any(codes.normalise(code) in value or code in value for value in stored)
    assert card.code_hash in stored
    assert codes.find_gift_card(code.lower().replace("-", " ")).id == card.id
    assert codes.find_gift_card(codes.new_code()) is None


def test_an_access_code_may_be_chosen_and_is_still_stored_only_as_a_hash(database):
    plan = commerce.priced_plan()
    row, code = codes.issue_access_code(plan, max_activations=100, code="Spring-2027")
    assert code == "Spring-2027" and codes.find_access_code("SPRING 2027").id == row.id
    assert not any("SPRING2027" in value.upper().replace("-", "") for value in every_stored_text(database))
    with pytest.raises(CodeRejected) as refused:
        codes.issue_access_code(plan, max_activations=5, code="spring2027")
    assert refused.value.code == codes.CODE_TAKEN
    for kwargs, code_ in [({"code": "ab-1"}, codes.INVALID_CODE), ({"max_activations": 0}, "invalid_activation_limit")]:
        with pytest.raises(CodeRejected) as refused:
            codes.issue_access_code(plan, **{"max_activations": 5, **kwargs})
        assert refused.value.code == code_
    assert AccessCode.select().count() == 1


def test_an_access_code_activates_once_per_customer_and_never_past_its_limit(database):
    plan = commerce.priced_plan()
    row, _ = codes.issue_access_code(plan, max_activations=1)
    customer = commerce.customer()
    first = Order.create(customer=customer, plan=plan, operation="code", amount_minor=0)
    AccessCodeActivation.create(access_code=row, customer=customer, order=first)
    again = Order.create(customer=customer, plan=plan, operation="code", amount_minor=0)
    with pytest.raises(IntegrityError):
        with db.atomic():
            AccessCodeActivation.create(access_code=row, customer=customer, order=again)
    AccessCode.update(activation_count=1).where(AccessCode.id == row.id).execute()
    with pytest.raises(IntegrityError):
        with db.atomic():
            AccessCode.update(activation_count=2).where(AccessCode.id == row.id).execute()
    assert AccessCode.get_by_id(row.id).activation_count == 1


def test_a_redeemed_gift_card_records_who_and_when_together(database):
    card, _ = codes.issue_gift_card(commerce.priced_plan(), utcnow() + datetime.timedelta(days=30))
    with pytest.raises(IntegrityError):
        with db.atomic():
            GiftCard.update(status="redeemed").where(GiftCard.id == card.id).execute()
    customer = commerce.customer()
    GiftCard.update(status="redeemed", redeemed_by=customer, redeemed_at=utcnow()).where(
        GiftCard.id == card.id
    ).execute()
    assert GiftCard.get_by_id(card.id).redeemed_by_id == customer.id
