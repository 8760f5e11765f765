"""cached_select (models/transactions.py): a hot select's SQL built once per dialect, run again with
each call's values, on both databases; a parameter order that is not the query's fails at once."""

import pytest

from models import transactions
from models.commerce import Customer
from models.transactions import cached_select


@pytest.fixture(autouse=True)
def fresh_cache(monkeypatch):
    monkeypatch.setattr(transactions, "_COMPILED", {})


def _customer(customer_id):
    return cached_select(
        "test.customer", lambda: Customer.select().where(Customer.id == customer_id).limit(1), (customer_id, 1)
    )


def test_each_call_reads_its_own_row_with_the_sql_built_once(database):
    for name in ("alice", "bob"):
        Customer.create(id=name, display_name=name.title())
    assert [c.display_name for c in _customer("alice")] == ["Alice"]
    assert [c.display_name for c in _customer("bob")] == ["Bob"]  # the cached text, bob's values
    assert _customer("nobody") == []
    assert len(transactions._COMPILED) == 1


def test_parameters_in_another_order_than_the_query_takes_are_refused(database):
    with pytest.raises(RuntimeError, match="parameters"):
        cached_select("test.wrong", lambda: Customer.select().where(Customer.id == "alice").limit(1), (1, "alice"))
    assert transactions._COMPILED == {}
