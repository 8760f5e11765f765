"""SPEC 15.3: encrypted backups round-trip on both databases, a damaged file is refused,
a restore never overwrites a database by accident, and pruning keeps 7 daily and 4 weekly."""

import dataclasses
import datetime
import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from commerce.settlement import settle_order
from config.settings import load_settings, parse_database_url
from models.base import utcnow
from models.fulfillment import EntitlementDrift
from models.ops import AuditEvent, OutboxEvent
from models.support import SupportAttachment
from ops import backups
from ops.backup_databases import SCRATCH_PREFIX, for_url, table_counts, tables_checksum
from ops.backup_stream import MAGIC, WORD, BackupDamaged
from tests.conftest import TEST_DATA_KEY
from tests.ops.test_backup_stream import chunk_offsets
from tests.support import backends, commerce

ROOT = Path(__file__).resolve().parents[2]
# Verifying creates and drops scratch databases on the shared PostgreSQL server; each
# is named after the test process's pid, so the check that none is left behind counts
# only this process's and parallel test processes do not disturb it.

KEY = TEST_DATA_KEY
MARKER = "Zebediah-Quartermaine"  # a customer name that must not appear in a backup file


def settings_for(database_url, backup_dir, key=KEY):
    return dataclasses.replace(
        load_settings(environ={}),
        database=parse_database_url(database_url),
        backup_dir=str(backup_dir),
        data_encryption_key=key,
    )


@pytest.fixture
def backup_dir(tmp_path):
    directory = tmp_path / "backups"
    directory.mkdir()
    return directory


@pytest.fixture
def populated(database):
    """Rows in the commerce, fulfillment, queue and ops tables."""
    for index, name in enumerate((MARKER, "Bob", "Carol")):
        order = commerce.order(commerce.customer(name), commerce.plan(f"plan{index}"))
        settlement = settle_order(order.id, "provider_webhook")
        EntitlementDrift.create(
            entitlement=settlement.entitlement_id, kind="expiry", status="resolved", expected="{}", observed="{}",
            resolved_at=utcnow(),
        )  # fmt: skip
    OutboxEvent.update(published_at=utcnow()).where(OutboxEvent.id == 1).execute()
    AuditEvent.create(category="system", action="test", actor="tests", details='{"note": "é ü"}')
    SupportAttachment.create(
        digest=hashlib.sha256(b"x").hexdigest(), size_bytes=1, content_type="text/plain", expires_at=utcnow()
    )
    return database


@pytest.fixture
def fresh_target(backend, tmp_path):
    """The URL of a database with nothing in it, of the test's dialect."""
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'restored' / 'omniflow.sqlite3'}"
        return
    url = backends.create_pg_database()
    yield url
    backends.drop_pg_database(url)


def everything(url):
    """(row count of every table, checksum of every table) as read over a connection of its own."""
    side = for_url(url)
    connection = side.connect()
    try:
        tables = side.tables(connection)
        return table_counts(connection, tables), tables_checksum(connection, tables)
    finally:
        connection.close()


def scratch_databases():
    """Scratch databases this process made (other test processes verify on the same server)."""
    connection = backends.admin_connection()
    try:
        cursor = connection.cursor()
        cursor.execute("SELECT datname FROM pg_database WHERE datname LIKE %s", [f"{SCRATCH_PREFIX}{os.getpid()}_%"])
        return {name for (name,) in cursor.fetchall()}
    finally:
        connection.close()


def test_backup_verify_restore_keeps_every_table_count_and_checksum(populated, database_url, backup_dir, fresh_target):
    settings = settings_for(database_url, backup_dir)
    counts, checksum = everything(database_url)
    backup = backups.take(settings)

    assert os.listdir(backup_dir) == [os.path.basename(backup.path)], "a temporary or plaintext file was left"
    content = Path(backup.path).read_bytes()
    assert content.startswith(MAGIC)
    assert MARKER.encode() not in content and b"CREATE TABLE" not in content and b"SQLite format" not in content
    assert backup.manifest["tables"] == counts
    checksummed = backup.manifest["checksum"]["tables"]  # the ledger's, else orders and entitlements
    assert checksummed and checksummed == backups.checksum_tables(list(counts))

    verification = backups.verify(settings, backup.path)
    assert verification.ok, verification.problems
    assert verification.counts == counts and counts["orders"] == 3 and counts["entitlement_drifts"] == 3

    backups.restore(settings, backup.path, fresh_target)
    assert everything(fresh_target) == (counts, checksum)


def test_the_checksum_covers_the_tables_it_is_given(populated, database_url):
    side = for_url(database_url)
    connection = side.connect()
    try:
        before = tables_checksum(connection, ["orders", "entitlements"])
        other_tables = tables_checksum(connection, ["customers"])
    finally:
        connection.close()
    populated.execute_sql("UPDATE orders SET amount_minor = amount_minor + 1 WHERE id = 1")
    connection = side.connect()
    try:
        assert tables_checksum(connection, ["orders", "entitlements"]) != before
        assert tables_checksum(connection, ["customers"]) == other_tables
    finally:
        connection.close()
    assert backups.checksum_tables(["ledger_entries", "orders", "ledger_accounts"]) == [
        "ledger_accounts",
        "ledger_entries",
    ]


def tampered(path, how):
    content = bytearray(Path(path).read_bytes())
    offsets, _ = chunk_offsets(bytes(content))
    if how == "flipped_byte":
        content[offsets[len(offsets) // 2] + WORD.size + 5] ^= 0x01
    elif how == "truncated":
        del content[len(content) - 100 :]
    elif how == "truncated_at_a_chunk":
        del content[offsets[-1] :]
    elif how == "flipped_key_id":
        content[len(MAGIC) + 1] ^= 0x01  # the key id follows the magic and the version
    Path(path).write_bytes(bytes(content))
    return how


@pytest.mark.parametrize("how", ["flipped_byte", "truncated", "truncated_at_a_chunk", "flipped_key_id"])
def test_verify_refuses_a_tampered_backup_and_leaves_no_scratch_database(
    populated, backend, database_url, backup_dir, how
):
    settings = settings_for(database_url, backup_dir)
    backup = backups.take(settings, chunk_size=4096)
    assert len(chunk_offsets(Path(backup.path).read_bytes())[0]) > 3
    scratch_before = scratch_databases() if backend == "postgres" else set()
    tampered(backup.path, how)
    with pytest.raises(BackupDamaged):  # damaged key-id bytes too: the header check catches them
        backups.verify(settings, backup.path)
    if backend == "postgres":
        assert scratch_databases() == scratch_before


def test_restore_refuses_a_non_empty_target_unless_forced(populated, database_url, backup_dir, fresh_target):
    settings = settings_for(database_url, backup_dir)
    backup = backups.take(settings)
    expected = everything(database_url)
    backups.restore(settings, backup.path, fresh_target)
    settle_order(commerce.order(commerce.customer("Dave"), commerce.plan("later")).id, "provider_webhook")
    source_now = everything(database_url)

    with pytest.raises(backups.RestoreTargetNotEmpty):
        backups.restore(settings, backup.path, database_url)
    assert everything(database_url) == source_now, "a refused restore changed the target"

    backups.restore(settings, backup.path, fresh_target, force=True)
    assert everything(fresh_target) == expected


def test_a_damaged_backup_never_touches_the_target_even_when_forced(populated, database_url, backup_dir):
    settings = settings_for(database_url, backup_dir)
    backup = backups.take(settings, chunk_size=4096)
    before = everything(database_url)
    tampered(backup.path, "truncated_at_a_chunk")
    with pytest.raises(BackupDamaged):
        backups.restore(settings, backup.path, database_url, force=True)
    assert everything(database_url) == before


def cli(env, *args):
    return subprocess.run(
        [sys.executable, "omniflow.py", "backup", *args],
        cwd=ROOT, env=dict(os.environ, **env), capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_the_backup_commands_take_list_verify_and_refuse_with_a_code(populated, database_url, backup_dir):
    env = {"DATABASE_URL": database_url, "APP_BACKUP_DIR": str(backup_dir), "APP_DATA_ENCRYPTION_KEY": KEY}
    taken = cli(env, "now")
    assert taken.returncode == 0, taken.stderr
    [name] = os.listdir(backup_dir)
    listed = cli(env, "list")
    assert listed.returncode == 0 and name in listed.stdout and "kept" in listed.stdout
    path = str(backup_dir / name)
    verified = cli(env, "verify", path)
    assert verified.returncode == 0 and "verified" in verified.stdout, verified.stderr
    assert "checksum of " in verified.stdout and ": equal" in verified.stdout

    refused = cli(env, "restore", path, "--into", database_url)
    assert refused.returncode == 1 and "[restore_target_not_empty]" in refused.stderr
    tampered(path, "flipped_byte")
    damaged = cli(env, "verify", path)
    assert damaged.returncode == 1 and "[backup_damaged]" in damaged.stderr
    no_key = cli(dict(env, APP_DATA_ENCRYPTION_KEY=""), "now")
    assert no_key.returncode == 1 and "APP_DATA_ENCRYPTION_KEY is not set" in no_key.stderr
    for result in (refused, damaged, no_key):
        assert "Traceback" not in result.stderr and KEY not in result.stderr + result.stdout


def backup_named(directory, when):
    name = f"omniflow-{when:%Y%m%dT%H%M%SZ}-{hashlib.sha256(str(when).encode()).hexdigest()[:6]}.backup"
    (directory / name).write_bytes(b"sealed")
    return name


def test_pruning_keeps_the_newest_backup_of_seven_days_and_of_four_weeks(tmp_path):
    start = datetime.datetime(2026, 10, 1, 3, 0)  # a Thursday
    taken = {}
    for day in range(60):
        for hour in (3, 15):
            when = start + datetime.timedelta(days=day, hours=hour - 3)
            taken[backup_named(tmp_path, when)] = when
    (tmp_path / "notes.txt").write_text("not a backup")
    stale = tmp_path / ".omniflow-20260101T000000Z-abcdef.backup.partial"
    stale.write_bytes(b"half")
    os.utime(stale, (0, 0))
    fresh = tmp_path / ".omniflow-20261130T000000Z-abcdef.backup.partial"
    fresh.write_bytes(b"being written")

    backups.prune(str(tmp_path))

    left = {name for name in os.listdir(tmp_path) if name in taken}
    newest_of_day, newest_of_week = {}, {}
    for name, when in taken.items():
        for groups, group in ((newest_of_day, when.date()), (newest_of_week, when.isocalendar()[:2])):
            if group not in groups or when > taken[groups[group]]:
                groups[group] = name
    expected = {newest_of_day[day] for day in sorted(newest_of_day)[-7:]}
    expected |= {newest_of_week[week] for week in sorted(newest_of_week)[-4:]}
    assert left == expected
    assert len(left) == 7 + 3  # the last 7 days are one ISO week (Monday to Sunday); three weeks before it
    assert (tmp_path / "notes.txt").exists() and fresh.exists() and not stale.exists()


def test_the_postgres_password_goes_to_pg_dump_in_its_environment_never_on_its_command_line():
    from ops.backup_databases import _libpq

    url, env = _libpq("postgresql://omniflow:s3cr%40t@db.internal:5432/omniflow?sslmode=require")
    assert url == "postgresql://omniflow@db.internal:5432/omniflow?sslmode=require"
    assert env["PGPASSWORD"] == "s3cr@t"


def test_behind_a_pooler_a_backup_is_read_and_verified_through_the_direct_url(pg_database, pg_url, backup_dir):
    # pg_dump sets session settings before its transaction; through a transaction pooler they would
    # land on a server connection the application then uses. DATABASE_URL here answers nothing at all.
    settings = dataclasses.replace(
        settings_for("postgresql://postgres@127.0.0.1:1/unreachable", backup_dir),
        direct_database=parse_database_url(pg_url),
    )
    backup = backups.take(settings)
    assert backup.manifest["tables"] == everything(pg_url)[0]
    assert backups.verify(settings, backup.path).ok
