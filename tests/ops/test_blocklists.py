"""SPEC 15.8, 5.2: blocklist sources refreshed by lifecycle_sweep with conditional GET against a real HTTP
server; a failing source keeps its last good list; customers blocked and unblocked by the lists only."""

import json
import logging

import pytest

from commerce.passes import lifecycle_sweep
from fakes.blocklist_server import FakeBlocklist
from models.blocklists import BlocklistEntry, BlocklistSource
from models.commerce import Customer
from models.ops import AuditEvent
from ops import blocklists

ACTOR = "operator:ann"


@pytest.fixture
def source_server():
    fake = FakeBlocklist([101, 102]).start()
    yield fake
    fake.stop()


def customer(telegram_id, **fields):
    return Customer.create(display_name=f"user {telegram_id}", telegram_id=telegram_id, **fields)


def blocked_ids():
    rows = Customer.select(Customer.telegram_id).where(Customer.blocked == True)  # noqa: E712
    return sorted(row.telegram_id for row in rows)


def listed(source):
    rows = BlocklistEntry.select(BlocklistEntry.telegram_id).where(BlocklistEntry.source == source.id)
    return sorted(row.telegram_id for row in rows)


def fresh(source):
    return BlocklistSource.get_by_id(source.id)


def test_a_failing_source_keeps_its_last_good_list_and_its_failure_is_recorded(
    database, data_key, source_server, monkeypatch
):
    monkeypatch.setattr(blocklists, "READ_TIMEOUT_S", 0.3)
    source_server.hold_seconds = 1.0
    source = blocklists.add_source(source_server.url, None, ACTOR, "spam accounts")
    for telegram_id in (101, 102, 103):
        customer(telegram_id)

    assert lifecycle_sweep.sweep()["blocklists"] == 2
    assert listed(source) == [101, 102] and blocked_ids() == [101, 102]
    first = fresh(source)
    assert (first.status, first.entry_count, first.etag, first.failure_count) == ("ok", 2, source_server.etag, 0)

    source_server.script("500", "garbage", "hold")
    for code in ("http_500", "invalid_list", "timeout"):
        lifecycle_sweep.sweep()
        failed = fresh(source)
        assert (failed.status, failed.last_error.split(":")[0]) == ("failed", code)
        assert listed(source) == [101, 102] and blocked_ids() == [101, 102]
    assert fresh(source).failure_count == 3 and fresh(source).last_success_at == first.last_success_at

    lifecycle_sweep.sweep()  # unchanged: 304
    assert source_server.requests[-1]["if_none_match"] == first.etag
    assert (fresh(source).status, fresh(source).failure_count, fresh(source).last_error) == ("ok", 0, None)
    assert fresh(source).list_changed_at == first.list_changed_at


def test_a_customer_no_list_names_any_more_is_unblocked_and_one_blocked_by_hand_never_is(
    database, data_key, source_server
):
    source = blocklists.add_source(source_server.url, None, ACTOR, "spam accounts")
    customer(101)
    customer(102)
    customer(104, blocked=True, blocked_reason="chargebacks")
    lifecycle_sweep.sweep()
    assert blocked_ids() == [101, 102, 104]

    source_server.set_list([102, 103], comment="a new version")
    lifecycle_sweep.sweep()
    assert listed(source) == [102, 103]
    assert blocked_ids() == [102, 104]
    assert Customer.get(Customer.telegram_id == 104).blocked_reason == "chargebacks"

    blocklists.remove_source(source.id, ACTOR, "no longer trusted")
    assert listed(source) == [] and blocked_ids() == [104]
    assert [event.action for event in AuditEvent.select().order_by(AuditEvent.id)] == [
        "blocklist.source.added",
        "blocklist.source.removed",
    ]
    assert json.loads(AuditEvent.select().order_by(AuditEvent.id.desc()).get().details) == {"unblocked": 1}


def test_the_token_is_sealed_sent_as_a_bearer_and_never_stored_in_the_clear(database, data_key):
    with FakeBlocklist([7], token="list-token-123") as server:
        source = blocklists.add_source(server.url, "list-token-123", ACTOR, "partner list")
        customer(7)
        lifecycle_sweep.sweep()
        assert server.requests[-1]["authorization"] == "Bearer list-token-123"
    assert blocked_ids() == [7]
    stored = Customer._meta.database.execute_sql("SELECT token FROM blocklist_sources").fetchone()[0]
    assert stored.startswith("v1:") and "list-token-123" not in stored
    assert fresh(source).token == "list-token-123"
    details = AuditEvent.get().details
    assert "list-token-123" not in details and json.loads(details)["token"] is True


def test_without_the_key_gift_and_offer_expiry_run_and_the_blocklist_refresh_is_skipped_with_a_reason(
    database, source_server, caplog, monkeypatch
):
    BlocklistSource.create(url=source_server.url)
    customer(101)
    monkeypatch.setattr(lifecycle_sweep, "_skip_logged", False)
    with caplog.at_level(logging.INFO, logger="omniflow.passes.lifecycle"):
        assert set(lifecycle_sweep.sweep()) == {"gift_cards", "personal_offers"}
    assert lifecycle_sweep.BLOCKLIST_SKIPPED in caplog.text
    assert source_server.requests == [] and blocked_ids() == []


def test_a_bad_source_or_a_twenty_first_is_refused_with_a_code_and_nothing_is_written(database, data_key):
    for url, token, code in (
        ("ftp://lists.example/ids", None, "invalid_url"),
        ("https://", None, "invalid_url"),
        ("https://lists.example:99999/ids", None, "invalid_url"),
        ("http://[::1/ids", None, "invalid_url"),
        ("https://lists.example/ids", "two words", "invalid_token"),
        ("https://lists.example/ids", "line\nbreak", "invalid_token"),
    ):
        with pytest.raises(blocklists.SourceRejected) as refused:
            blocklists.add_source(url, token, ACTOR, "r")
        assert refused.value.code == code
    assert BlocklistSource.select().count() == 0
    for n in range(blocklists.MAX_SOURCES):
        BlocklistSource.create(url=f"https://lists.example/{n}")
    with pytest.raises(blocklists.SourceRejected) as refused:
        blocklists.add_source("https://lists.example/one-more", None, ACTOR, "r")
    assert refused.value.code == blocklists.TOO_MANY_SOURCES
    assert BlocklistSource.select().count() == blocklists.MAX_SOURCES and AuditEvent.select().count() == 0


def test_a_list_is_one_id_per_line_with_comments_and_anything_else_is_refused():
    assert blocklists.parse_list(b"# spam\n101\n\n 102  # a note\n101\n") == {101, 102}
    assert blocklists.parse_list(b"# nobody is listed today\n") == frozenset()
    for body, code in (
        (b"", "empty_list"),
        (b"101\nabc\n", "invalid_list"),
        (b"-5\n", "invalid_list"),
        (b"\xff", "invalid_list"),
    ):
        with pytest.raises(blocklists.ListRefused) as refused:
            blocklists.parse_list(body)
        assert refused.value.code == code
