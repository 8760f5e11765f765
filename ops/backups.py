"""Backups (SPEC 15.3): take, prune, list, verify and restore encrypted database backups.

A backup is one file in APP_BACKUP_DIR, `omniflow-<UTC time>-<6 hex>.backup`,
in the format of ops/backup_stream.py sealed with the newest key of
APP_DATA_ENCRYPTION_KEY. Its plaintext is a manifest (dialect, the time, the
applied migrations, every table's row count and a checksum of the ledger
tables, all read from the same snapshot as the dump) followed by the
database's own dump (ops/backup_databases.py). Nothing unencrypted is written
into the directory, and nothing half-written is seen there: a backup is
written under a hidden `.….partial` name and renamed into place when
complete (several workers share the directory, and the `backup` pass runs
once per interval across the installation).

Pruning keeps the newest backup of each of the KEEP_DAILY most recent days
that have one, and of each of the KEEP_WEEKLY most recent ISO weeks; partial
files left by a process that died are removed after two days.

On PostgreSQL a backup is read, and a scratch database made, through
DATABASE_DIRECT_URL when it is set: pg_dump sets session settings
(search_path among them) before its transaction, which a transaction-pooling
PgBouncer would leave on a server connection the application then uses.

`verify` restores into a scratch database (a temporary SQLite file, or a
database created on the PostgreSQL server and dropped) and compares every
table's row count and the checksum with the manifest. `restore` first reads
the whole file to authenticate it, so a damaged backup never touches the
target, and refuses a target that has any table unless told to replace it.
"""

import contextlib
import datetime
import json
import logging
import os
import re
import secrets
import time
from dataclasses import dataclass, field

from models.base import utcnow
from ops import sealing
from ops.backup_databases import Postgres, Sqlite, for_target, for_url, table_counts, tables_checksum
from ops.backup_stream import CHUNK_SIZE, WORD, BackupDamaged, BackupError, BackupKey, SealedWriter, unsealed_chunks

logger = logging.getLogger("omniflow.backups")

MANIFEST_FORMAT = 1
MAX_MANIFEST_BYTES = 1 << 24
NAME = re.compile(r"omniflow-(\d{8}T\d{6}Z)-[0-9a-f]{6}\.backup")
PARTIAL_SUFFIX = ".partial"
STALE_PARTIAL_S = 2 * 86400
KEEP_DAILY = 7
KEEP_WEEKLY = 4
LEDGER_TABLES = ("ledger_accounts", "ledger_transactions", "ledger_entries")
# Checksummed when there is no ledger yet: the financial and entitlement history.
REPRESENTATIVE_TABLES = ("orders", "entitlements")
HISTORY_TABLE = "schema_migrations"


class BackupStopped(BackupError):
    code = "backup_stopped"


class RestoreTargetNotEmpty(BackupError):
    code = "restore_target_not_empty"


@dataclass(frozen=True)
class Backup:
    path: str
    manifest: dict


@dataclass(frozen=True)
class BackupFile:
    name: str
    path: str
    size: int
    taken_at: datetime.datetime


@dataclass
class Verification:
    manifest: dict
    counts: dict
    checksum: str
    problems: list = field(default_factory=list)

    @property
    def ok(self):
        return not self.problems


def never_stop():
    return False


def backup_keys(settings):
    """The keys of APP_DATA_ENCRYPTION_KEY, newest first, in the form sealing reads them (checked at start)."""
    if not sealing.parse_keys(settings.data_encryption_key):
        raise BackupError("APP_DATA_ENCRYPTION_KEY is not set: backups are encrypted with it")
    return [BackupKey.from_secret(entry.strip()) for entry in settings.data_encryption_key.split(",")]


def checksum_tables(tables):
    """The ledger tables if this database has them, else the representative ones."""
    present = set(tables)
    ledger = [table for table in LEDGER_TABLES if table in present]
    return ledger or [table for table in REPRESENTATIVE_TABLES if table in present]


def taken_at(name):
    match = NAME.fullmatch(name)
    return datetime.datetime.strptime(match.group(1), "%Y%m%dT%H%M%SZ") if match else None


# -- taking ---------------------------------------------------------------------------------


def take(settings, now=None, chunk_size=CHUNK_SIZE, should_stop=never_stop):
    """Write one encrypted backup of the configured database into APP_BACKUP_DIR; returns a Backup."""
    keys = backup_keys(settings)
    directory = backup_directory(settings)
    now = now or utcnow()
    name = f"omniflow-{now:%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}.backup"
    final = os.path.join(directory, name)
    partial = os.path.join(directory, f".{name}{PARTIAL_SUFFIX}")
    database = for_target(_server(settings))
    started = time.monotonic()
    try:
        descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "wb") as out, database.snapshot() as (connection, dump):
            manifest = _manifest(database, connection, now)
            writer = SealedWriter(out, keys[0], chunk_size)
            writer.write(_framed(manifest))
            for data in dump:
                if should_stop():
                    raise BackupStopped("the backup was asked to stop; the partial file is removed")
                writer.write(data)
            writer.close()
            out.flush()
            os.fsync(out.fileno())
        os.replace(partial, final)
        _fsync_directory(directory)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(partial)
    logger.info(
        "backup written",
        extra={
            "count": sum(manifest["tables"].values()),
            "state": f"{os.path.getsize(final)} bytes in {time.monotonic() - started:.1f}s",
        },
    )
    return Backup(final, manifest)


def backup_directory(settings):
    if not settings.backup_dir:
        raise BackupError("APP_BACKUP_DIR is not set: it names the directory backups go to")
    os.makedirs(settings.backup_dir, exist_ok=True)
    return settings.backup_dir


def _manifest(database, connection, now):
    tables = database.tables(connection)
    checksummed = checksum_tables(tables)
    migrations = []
    if HISTORY_TABLE in tables:
        cursor = connection.cursor()
        cursor.execute(f"SELECT name FROM {HISTORY_TABLE} ORDER BY name")
        migrations = [name for (name,) in cursor.fetchall()]
    return {
        "format": MANIFEST_FORMAT,
        "dialect": database.dialect,
        "taken_at": now.isoformat(timespec="seconds") + "Z",
        "migrations": migrations,
        "tables": table_counts(connection, tables),
        "checksum": {"tables": checksummed, "sha256": tables_checksum(connection, checksummed)},
    }


def _framed(manifest):
    encoded = json.dumps(manifest, sort_keys=True).encode()
    return WORD.pack(len(encoded)) + encoded


def _fsync_directory(directory):
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


# -- the directory --------------------------------------------------------------------------


def list_backups(directory):
    """The finished backups in `directory`, newest first."""
    found = []
    for entry in os.scandir(directory):
        when = taken_at(entry.name)
        if when is not None and entry.is_file():
            found.append(BackupFile(entry.name, entry.path, entry.stat().st_size, when))
    return sorted(found, key=lambda backup: (backup.taken_at, backup.name), reverse=True)


def to_keep(backups):
    """Names kept: the newest of each of the KEEP_DAILY latest days and of the KEEP_WEEKLY latest ISO weeks."""
    days, weeks, keep = [], [], set()
    for backup in sorted(backups, key=lambda b: (b.taken_at, b.name), reverse=True):
        day = backup.taken_at.date()
        week = backup.taken_at.isocalendar()[:2]
        if day not in days and len(days) < KEEP_DAILY:
            days.append(day)
            keep.add(backup.name)
        if week not in weeks and len(weeks) < KEEP_WEEKLY:
            weeks.append(week)
            keep.add(backup.name)
    return keep


def prune(directory, now=None):
    """Remove the backups `to_keep` does not keep, and stale partial files; returns the names removed."""
    backups = list_backups(directory)
    keep = to_keep(backups)
    removed = []
    for backup in backups:
        if backup.name not in keep:
            with contextlib.suppress(FileNotFoundError):
                os.remove(backup.path)
            removed.append(backup.name)
    stale_before = time.time() - STALE_PARTIAL_S
    for entry in os.scandir(directory):
        if entry.name.startswith(".") and entry.name.endswith(PARTIAL_SUFFIX) and entry.stat().st_mtime < stale_before:
            with contextlib.suppress(FileNotFoundError):
                os.remove(entry.path)
            removed.append(entry.name)
    if removed:
        logger.info("backups pruned", extra={"count": len(removed)})
    return removed


def run_scheduled(settings, should_stop=never_stop):
    """What the `backup` pass does: one backup, then pruning."""
    backup = take(settings, should_stop=should_stop)
    prune(backup_directory(settings))
    return backup


# -- reading --------------------------------------------------------------------------------


@contextlib.contextmanager
def opened(path, keys):
    """(manifest, iterator of the dump's bytes) of a backup file; every chunk is authenticated as it is read."""
    try:
        source = open(path, "rb")
    except OSError as error:
        raise BackupError(f"cannot open the backup file: {error.strerror}") from None
    with source:
        chunks = unsealed_chunks(source, keys)
        pending = bytearray()
        for chunk in chunks:
            pending += chunk
            if len(pending) >= WORD.size and len(pending) >= WORD.size + WORD.unpack(pending[: WORD.size])[0]:
                break
        if len(pending) < WORD.size:
            raise BackupDamaged("the backup holds no manifest")
        (length,) = WORD.unpack(pending[: WORD.size])
        if length > MAX_MANIFEST_BYTES or len(pending) < WORD.size + length:
            raise BackupDamaged("the backup's manifest is incomplete")
        try:
            manifest = json.loads(bytes(pending[WORD.size : WORD.size + length]))
        except ValueError:
            raise BackupDamaged("the backup's manifest is not readable") from None
        if not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT:
            raise BackupDamaged("the backup's manifest is not one this version reads")
        rest = bytes(pending[WORD.size + length :])

        def dump():
            if rest:
                yield rest
            yield from chunks

        yield manifest, dump()


def authenticate(path, keys):
    """Read the whole file, checking every chunk; returns the manifest or raises BackupDamaged."""
    with opened(path, keys) as (manifest, dump):
        for _ in dump:
            pass
    return manifest


def verify(settings, path):
    """Restore into a scratch database and compare it with the manifest; returns a Verification."""
    keys = backup_keys(settings)
    with opened(path, keys) as (manifest, dump):
        with _scratch_host(settings, manifest["dialect"]).scratch() as scratch:
            scratch.restore(dump, replace=False)
            connection = scratch.connect()
            try:
                counts = table_counts(connection, scratch.tables(connection))
                checksum = tables_checksum(connection, manifest["checksum"]["tables"])
            finally:
                connection.close()
    verification = Verification(manifest, counts, checksum)
    expected = manifest["tables"]
    for table in sorted(set(expected) | set(counts)):
        if table not in counts:
            verification.problems.append(f"{table}: in the backup's manifest, missing after the restore")
        elif table not in expected:
            verification.problems.append(f"{table}: restored, but not in the backup's manifest")
        elif counts[table] != expected[table]:
            verification.problems.append(f"{table}: {counts[table]} rows restored, the manifest says {expected[table]}")
    if checksum != manifest["checksum"]["sha256"]:
        tables = ", ".join(manifest["checksum"]["tables"]) or "no tables"
        verification.problems.append(f"the checksum of {tables} differs from the manifest's")
    return verification


def _scratch_host(settings, dialect):
    if dialect == Sqlite.dialect:
        return Sqlite("")
    if not settings.database.is_postgres:
        raise BackupError(
            "verifying a PostgreSQL backup needs a PostgreSQL server: set DATABASE_URL to one "
            "(a scratch database is created there and dropped)"
        )
    return Postgres(_server(settings).dsn)


def _server(settings):
    """The database a backup reads: the server itself, never a transaction pooler in front of it."""
    return settings.direct_database or settings.database


def restore(settings, path, into_url, force=False):
    """Restore a backup into the database at `into_url`; returns the manifest."""
    keys = backup_keys(settings)
    manifest = authenticate(path, keys)
    target = for_url(into_url)
    if manifest["dialect"] != target.dialect:
        raise BackupError(f"this is a {manifest['dialect']} backup; it restores into a {manifest['dialect']} database")
    if not force and not target.is_empty():
        raise RestoreTargetNotEmpty("the target database is not empty: pass --force to replace what it holds")
    with opened(path, keys) as (_, dump):
        target.restore(dump, replace=force)
    logger.info("backup restored", extra={"count": sum(manifest["tables"].values())})
    return manifest
