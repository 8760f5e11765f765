"""SPEC 7: the retention sweep deletes disposable rows outside their windows, in bounded
batches, step by step, and never anything of the records that must be kept."""

import dataclasses
import datetime
import hashlib
import logging
import os
import sqlite3
import threading

import psycopg2
import pytest

from commerce import ledger
from commerce.settlement import settle_order
from config.settings import load_settings
from models.base import db
from models.fulfillment import EntitlementDrift
from models.ledger import LedgerEntry
from models.operators import OperatorSession
from models.ops import OutboxEvent
from models.support import SupportAttachment
from models.telemetry import TelemetryEvent
from ops import operators, retention
from ops.attachments import path_for
from tests.support import commerce

NOW = datetime.datetime(2026, 12, 1, 12, 0, 0)
DAY = datetime.timedelta(days=1)

# Every table of the migrated schema, and whether retention may delete from it.
# A new table fails test_every_table_is_classified until it is put in one list.
# The disposable ones are SPEC 7's, whether or not their migrations have landed.
DISPOSABLE = {
    "bot_sessions", "bot_shop_reviews", "bot_checkout_sessions", "provider_webhook_events",
    "support_attachments", "outbox_events", "telemetry_events", "entitlement_drifts", "bot_updates",
    "operator_sessions",
}  # fmt: skip
KEPT = {
    # financial and entitlement history: catalogue, orders, payments, the ledger, codes
    "customers", "plans", "subscriptions", "orders", "entitlements",
    "fulfillment_operations", "fulfillment_history",
    "plan_prices", "addons", "addon_prices", "gift_cards", "access_codes", "access_code_activations",
    "personal_offers", "trial_activations", "payment_intents", "refunds",
    "ledger_accounts", "ledger_transactions", "ledger_entries",
    # where the outbox is published (configuration, with sealed secrets); the bot's forum topics; each
    # customer's channel membership (their current state, one row each)
    "outbox_destinations", "bot_forum_topics", "bot_channel_members",
    # blocklist sources and their current lists (configuration and its state); this installation's telemetry id
    "blocklist_sources", "blocklist_entries", "telemetry_installation",
    # audit, operators (identity), notices, the maintenance switch
    "audit_events", "operator_notices", "customer_notices", "operators",
    "operator_login_failures", "maintenance_state",
    # anomaly rules (configuration) and their samples (pruned after a week by the anomaly pass itself);
    # the customers' ratings of the shop, one per order
    "anomaly_rules", "anomaly_samples", "shop_ratings",
    # digital goods: the catalogue, its providers (sealed tokens) and each paid order's delivery (what is owed)
    "goods", "goods_prices", "goods_providers", "goods_deliveries",
    # bulk actions and their frozen items: what operators changed, kept with the audit
    "bulk_actions", "bulk_action_items",
    # what operators sent through the bot, and the support conversations (attachments expire on their own)
    "campaigns", "campaign_recipients", "support_tickets", "support_messages",
    # the queue (its own cleaner, SPEC 1.8) and the migration history
    "jobs", "job_workers", "job_leader", "job_periodic", "huey_kv", "huey_counters", "schema_migrations",
}  # fmt: skip
# Rows that go with a disposable row (ON DELETE CASCADE), never swept by a step of their own.
DELETED_WITH = {"outbox_deliveries": "outbox_events"}
TEST_TABLES = {"test_executions", "test_orders"}  # tests/support/backends.py


def user_tables(database):
    """Every table of the migrated schema (not the tests' own, not SQLite's internal ones)."""
    return {table for table in database.get_tables() if not table.startswith("sqlite_")} - TEST_TABLES


def settings(**overrides):
    return dataclasses.replace(load_settings(environ={}), **overrides)


def entitlement():
    order = commerce.order(commerce.customer(), commerce.plan())
    return settle_order(order.id, "provider_webhook").entitlement_id


def drift(entitlement_id, status, resolved_at, kind="expiry"):
    return EntitlementDrift.create(
        entitlement=entitlement_id, kind=kind, status=status, expected="{}", observed="{}",
        detected_at=NOW - 400 * DAY, resolved_at=resolved_at,
    ).id  # fmt: skip


def outbox(published_at, created_at=None):
    return OutboxEvent.create(
        topic="order.paid", payload="{}", created_at=created_at or NOW - 400 * DAY, published_at=published_at
    ).id


def attachment(digest, expires_at):
    return SupportAttachment.create(
        digest=digest, size_bytes=3, content_type="image/png", expires_at=expires_at, created_at=NOW - 10 * DAY
    ).id


def stored_file(directory, content):
    digest = hashlib.sha256(content).hexdigest()
    with open(path_for(directory, digest), "wb") as out:
        out.write(content)
    return digest


def ids(model):
    return {row.id for row in model.select(model.id)}


def records(caplog, message):
    return [record for record in caplog.records if record.getMessage() == message]


@pytest.fixture
def attachment_dir(tmp_path):
    directory = tmp_path / "attachments"
    directory.mkdir()
    return str(directory)


@pytest.fixture
def caplog_info(caplog):
    caplog.set_level(logging.DEBUG, logger="omniflow.retention")
    return caplog


def test_published_outbox_events_go_after_their_window_and_unpublished_ones_stay(database, caplog_info):
    old = outbox(NOW - 8 * DAY)
    recent = outbox(NOW - 6 * DAY)
    unpublished = outbox(None, created_at=NOW - 400 * DAY)
    results = retention.sweep(settings(), now=NOW)
    assert ids(OutboxEvent) == {recent, unpublished}
    assert old not in ids(OutboxEvent)
    removed = [(r.table, r.count) for r in records(caplog_info, "retention sweep removed rows")]
    assert ("outbox_events", 1) in removed
    assert {result.table: result.removed for result in results}["outbox_events"] == 1


def test_an_applied_updates_record_goes_once_it_is_past_the_bots_repeat_window(database):
    from models.bot import UPDATE_REPEAT_WINDOW, BotUpdate

    minute = datetime.timedelta(minutes=1)
    BotUpdate.create(update_id=7, kind="message", applied_at=NOW - UPDATE_REPEAT_WINDOW - minute)
    BotUpdate.create(update_id=8, kind="message", applied_at=NOW - UPDATE_REPEAT_WINDOW + minute)
    retention.sweep(settings(), now=NOW)
    assert [row.update_id for row in BotUpdate.select()] == [8]
    assert UPDATE_REPEAT_WINDOW <= DAY  # well under the week after which Telegram may number updates anew


def test_the_outbox_window_comes_from_its_setting(database):
    eight_days = outbox(NOW - 8 * DAY)
    retention.sweep(settings(retention_outbox_days=10), now=NOW)
    assert ids(OutboxEvent) == {eight_days}


def test_resolved_drifts_go_after_their_window_and_open_ones_stay(database):
    entitlement_id = entitlement()
    old = drift(entitlement_id, "resolved", NOW - 91 * DAY, kind="expiry")
    recent = drift(entitlement_id, "resolved", NOW - 89 * DAY, kind="traffic")
    still_open = drift(entitlement_id, "open", None, kind="squads")
    open_with_a_stamp = drift(entitlement_id, "open", NOW - 300 * DAY, kind="status")
    retention.sweep(settings(), now=NOW)
    assert ids(EntitlementDrift) == {recent, still_open, open_with_a_stamp}
    assert old not in ids(EntitlementDrift)


def test_a_rejected_webhook_delivery_goes_after_days_and_an_accepted_one_stays_its_month(database):
    from commerce import webhooks
    from models.base import utcnow
    from models.payments import ProviderWebhookEvent

    rejected = webhooks.reject("cryptobot", b"x" * 5000, {}, "203.0.113.9", "bad_signature")
    accepted = ProviderWebhookEvent.create(
        provider="cryptobot",
        signature_ok=True,
        outcome="settled",
        retain_until=utcnow() + webhooks.RETENTION,
        body=b"{}",
    ).id
    retention.sweep(settings(), now=utcnow() + webhooks.REJECTED_RETENTION + datetime.timedelta(minutes=1))
    assert ids(ProviderWebhookEvent) == {accepted}
    assert rejected != accepted and webhooks.REJECTED_RETENTION <= 7 * DAY


def test_expired_operator_sessions_go_and_live_ones_stay(database):
    operator = operators.create_operator("alice", "correct horse battery staple", [operators.SYSTEM_READ])
    ended = operators.open_session(operator, now=NOW - 2 * DAY)
    live = operators.open_session(operator, now=NOW - datetime.timedelta(minutes=1))
    [result] = [r for r in retention.sweep(settings(), now=NOW) if r.table == "operator_sessions"]
    assert result.removed == 1
    assert [row.token_hash for row in OperatorSession.select()] == [operators._digest(live)]
    assert operators.session_operator(live, now=NOW) is not None and operators.session_operator(ended, now=NOW) is None


def test_expired_attachment_rows_go_and_unexpired_ones_stay(database, attachment_dir):
    directory = attachment_dir
    expired = attachment(stored_file(directory, b"old"), NOW - DAY)
    current = attachment(stored_file(directory, b"new"), NOW + DAY)
    retention.sweep(settings(support_attachment_dir=directory), now=NOW)
    assert ids(SupportAttachment) == {current}
    assert expired not in ids(SupportAttachment)
    assert sorted(os.listdir(directory)) == [hashlib.sha256(b"new").hexdigest()]


def test_a_shared_attachment_file_stays_until_its_last_row_expires(database, attachment_dir):
    directory = attachment_dir
    digest = stored_file(directory, b"one screenshot sent twice")
    first = attachment(digest, NOW - DAY)
    second = attachment(digest, NOW + DAY)
    retention.sweep(settings(support_attachment_dir=directory), now=NOW)
    assert ids(SupportAttachment) == {second} and first not in ids(SupportAttachment)
    assert os.path.exists(path_for(directory, digest)), "the file of a surviving row was removed"

    retention.sweep(settings(support_attachment_dir=directory), now=NOW + 2 * DAY)
    assert ids(SupportAttachment) == set()
    assert not os.path.exists(path_for(directory, digest))


def test_two_expiring_rows_of_one_file_in_one_batch_remove_it_once(database, attachment_dir):
    directory = attachment_dir
    digest = stored_file(directory, b"same bytes")
    attachment(digest, NOW - 2 * DAY)
    attachment(digest, NOW - DAY)
    [result] = [r for r in retention.sweep(settings(support_attachment_dir=directory), now=NOW)
                if r.table == "support_attachments"]  # fmt: skip
    assert (result.removed, result.files_removed, result.files_kept) == (2, 1, 0)
    assert not os.path.exists(path_for(directory, digest))


def test_a_file_that_cannot_be_removed_is_logged_and_skipped(database, attachment_dir, caplog_info):
    directory = attachment_dir
    removable = stored_file(directory, b"removable")
    stuck = hashlib.sha256(b"stuck").hexdigest()
    os.mkdir(path_for(directory, stuck))  # unlink() of a directory fails, whoever runs the test
    open(os.path.join(path_for(directory, stuck), "inside"), "w").close()
    attachment(stuck, NOW - DAY)
    attachment(removable, NOW - DAY)
    [result] = [r for r in retention.sweep(settings(support_attachment_dir=directory), now=NOW)
                if r.table == "support_attachments"]  # fmt: skip
    assert ids(SupportAttachment) == set()
    assert (result.files_removed, result.files_kept, result.error) == (1, 1, None)
    assert not os.path.exists(path_for(directory, removable))
    assert os.path.isdir(path_for(directory, stuck))
    [warning] = records(caplog_info, "retention could not remove an attachment file; left in place")
    assert warning.table == "support_attachments" and warning.levelno == logging.WARNING


def test_without_an_attachment_directory_rows_are_still_deleted(database):
    attachment(hashlib.sha256(b"x").hexdigest(), NOW - DAY)
    [result] = [r for r in retention.sweep(settings(support_attachment_dir=""), now=NOW)
                if r.table == "support_attachments"]  # fmt: skip
    assert (result.removed, result.files_removed, result.error) == (1, 0, None)
    assert ids(SupportAttachment) == set()


def test_steps_delete_in_bounded_batches_and_stop_between_them_when_asked(database):
    for _ in range(10):
        outbox(NOW - 30 * DAY)
    [result] = [r for r in retention.sweep(settings(), now=NOW, batch=3) if r.table == "outbox_events"]
    assert (result.removed, result.batches) == (10, 4)  # 3 + 3 + 3 + 1, each its own transaction

    for _ in range(10):
        outbox(NOW - 30 * DAY)
    # Asked to stop as soon as the outbox step has committed its first batch.
    results = retention.sweep(settings(), now=NOW, batch=3, should_stop=lambda: OutboxEvent.select().count() < 10)
    [result] = [r for r in results if r.table == "outbox_events"]
    assert result.removed == 3 and OutboxEvent.select().count() == 7
    assert "entitlement_drifts" not in [r.table for r in results], "the sweep went on after being asked to stop"


class Locker:
    """Another connection holding a lock until the sweep reports the step it blocked as failed.

    PostgreSQL locks the outbox table alone. SQLite has no table locks: its
    one write lock covers the whole file, so there the first step that
    writes is the one that fails. Without a lock timeout the step would
    wait; the lock is let go after SAFETY_S anyway, so such a sweep ends (and
    the test fails) instead of hanging."""

    SAFETY_S = 10

    def __init__(self, backend, database_url):
        self.backend = backend
        if backend == "postgres":
            self.connection = psycopg2.connect(database_url)
            self.connection.cursor().execute("LOCK TABLE outbox_events IN ACCESS EXCLUSIVE MODE")
        else:
            self.connection = sqlite3.connect(database_url[len("sqlite:///") :], check_same_thread=False)
            self.connection.isolation_level = None
            self.connection.execute("BEGIN IMMEDIATE")
        self.released = False
        self._lock = threading.Lock()
        self._safety = threading.Timer(self.SAFETY_S, self.release)
        self._safety.start()

    def release(self):
        with self._lock:
            if self.released:
                return
            self._safety.cancel()
            if self.backend == "postgres":
                self.connection.rollback()
            else:
                self.connection.execute("ROLLBACK")
            self.connection.close()
            self.released = True


class ReleaseOnFailure(logging.Handler):
    def __init__(self, locker):
        super().__init__()
        self.locker = locker

    def emit(self, record):
        if record.getMessage() == "retention step failed":
            self.locker.release()


def test_a_step_whose_table_is_locked_fails_fast_is_skipped_and_the_later_steps_run(
    database, backend, database_url, caplog_info
):
    entitlement_id = entitlement()
    OutboxEvent.delete().execute()
    event = outbox(NOW - 30 * DAY)
    old_drift = drift(entitlement_id, "resolved", NOW - 100 * DAY)
    locker = Locker(backend, database_url)
    handler = ReleaseOnFailure(locker)
    logging.getLogger("omniflow.retention").addHandler(handler)
    try:
        results = retention.sweep(settings(), now=NOW, lock_timeout_s=0.5)
    finally:
        logging.getLogger("omniflow.retention").removeHandler(handler)
        locker.release()
    failed = [(record.table, record.levelno) for record in records(caplog_info, "retention step failed")]
    # SQLite has one write lock for the whole file: the first step that writes is the one blocked.
    first_writer = next(step.table for step in retention.STEPS if db.table_exists(step.table))
    locked_step = "outbox_events" if backend == "postgres" else first_writer
    assert failed == [(locked_step, logging.WARNING)]
    assert [r.table for r in results if r.error] == [locked_step]
    assert old_drift not in ids(EntitlementDrift), "the step after the locked one did not run"
    if backend == "postgres":
        assert ids(OutboxEvent) == {event}, "the locked table was swept after all"
        retention.sweep(settings(), now=NOW)
        assert ids(OutboxEvent) == set()


def test_a_step_whose_table_does_not_exist_yet_is_skipped_with_one_debug_line(database, caplog_info, monkeypatch):
    declared = [step.table for step in retention.STEPS]
    monkeypatch.setattr(retention, "STEPS", retention.STEPS + (retention.Step("not_migrated_yet", "created_at"),))
    results = retention.sweep(settings(), now=NOW)
    skipped = records(caplog_info, "retention step skipped: its table does not exist yet")
    assert [r.table for r in skipped] == ["not_migrated_yet"] and all(r.levelno == logging.DEBUG for r in skipped)
    assert [r.table for r in results] == declared  # every table SPEC 7 names exists now, telemetry_events too


def test_the_steps_are_the_eight_of_the_spec_in_its_order_then_applied_bot_updates_and_operator_sessions():
    assert [step.table for step in retention.STEPS] == [
        "bot_sessions", "bot_shop_reviews", "bot_checkout_sessions", "provider_webhook_events",
        "support_attachments", "outbox_events", "telemetry_events", "entitlement_drifts", "bot_updates",
        "operator_sessions",
    ]  # fmt: skip


def test_every_table_is_classified_and_retention_may_touch_only_the_disposable_ones(database):
    tables = user_tables(database)
    unclassified = tables - DISPOSABLE - KEPT - set(DELETED_WITH)
    assert unclassified == set(), "a new table: decide whether retention may delete from it"
    assert DISPOSABLE & KEPT == set() and set(DELETED_WITH) & (DISPOSABLE | KEPT) == set()
    assert set(DELETED_WITH.values()) <= DISPOSABLE
    assert retention.DISPOSABLE_TABLES == DISPOSABLE


def test_a_sweep_over_ancient_rows_of_every_kind_changes_only_disposable_tables(database, attachment_dir):
    for name in ("Alice", "Bob"):
        order = commerce.order(commerce.customer(name), commerce.plan(name.lower()))
        settlement = settle_order(order.id, "provider_webhook")
        drift(settlement.entitlement_id, "resolved", NOW - 1000 * DAY)
    outbox(NOW - 1000 * DAY)
    attachment(stored_file(attachment_dir, b"a"), NOW - 1000 * DAY)
    TelemetryEvent.create(kind="installation.heartbeat", installation_id="0" * 32, version="1", payload="{}",
                          received_at=NOW - 1000 * DAY)  # fmt: skip
    # Bonus credits long past their expiry, one already expired by commerce_maintenance: ledger entries
    # carry an expires_at, and still are never retention's to delete.
    carol = commerce.customer("Carol")
    with db.atomic():
        ledger.grant_bonus(carol.id, 500, "RUB", expires_at=NOW - 1000 * DAY)
    assert ledger.expire_bonuses() == 1
    with db.atomic():
        ledger.grant_bonus(carol.id, 300, "RUB", expires_at=NOW - 900 * DAY)
    bonuses = {row.id for row in LedgerEntry.select().where(LedgerEntry.expires_at.is_null(False))}
    far_future = NOW + 100 * 365 * DAY  # every window has passed for every dated row
    tables = sorted(user_tables(database))
    before = {table: db.execute_sql(f"SELECT COUNT(*) FROM {table}").fetchone()[0] for table in tables}
    results = retention.sweep(settings(support_attachment_dir=attachment_dir), now=far_future)
    after = {table: db.execute_sql(f"SELECT COUNT(*) FROM {table}").fetchone()[0] for table in tables}
    changed = {table for table in tables if before[table] != after[table]}
    assert changed == {"outbox_events", "entitlement_drifts", "support_attachments", "telemetry_events"}
    assert [result.error for result in results if result.error] == []  # no step tried and failed either
    assert len(bonuses) == 2 and bonuses <= {row.id for row in LedgerEntry.select()}
