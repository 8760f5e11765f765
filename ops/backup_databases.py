"""What a backup needs from each database: a consistent dump, a restore, and row counts and checksums.

PostgreSQL: the manifest's counts and checksum are read in a REPEATABLE READ
transaction whose snapshot `pg_dump -Fc --snapshot` then dumps, so the
manifest describes exactly the rows in the dump; the dump is read from
pg_dump's stdout as it is written. A restore streams the dump into
`pg_restore` on stdin, in one transaction. pg_dump and pg_restore must be at
least the server's major version: they are looked for in
/usr/lib/postgresql/<major>/bin, then on PATH. The password never appears on
a command line (it goes in PGPASSWORD).

SQLite: the online backup API needs a database to write to, which is pages
written in any order, not a stream; so the copy is made into a private
temporary directory (mode 0700, outside APP_BACKUP_DIR), switched to a
single-file journal, counted, streamed out and deleted. A restore writes the
file next to the target and renames it into place.

Both read the same way for counts and checksums (DB-API connections, one
query per table); the checksum hashes every row of the given tables in a
total order (by every column), so it is equal exactly when the rows are.
"""

import contextlib
import hashlib
import os
import re
import shutil
import sqlite3
import subprocess
import tempfile
import uuid
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

from ops.backup_stream import BackupError
from security.redactor import redact

SCRATCH_PREFIX = "omniflow_verify_"

READ_SIZE = 1 << 20
PG_LOCK_WAIT = "60s"  # pg_dump gives up instead of queueing behind an exclusive lock for ever
STDERR_LINES = 5


def _quoted(name):
    return '"' + name.replace('"', '""') + '"'


def _value(value):
    if value is None:
        return "\\N"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "x" + bytes(value).hex()
    return str(value)


def table_counts(connection, tables):
    cursor = connection.cursor()
    counts = {}
    for table in tables:
        cursor.execute(f"SELECT COUNT(*) FROM {_quoted(table)}")
        counts[table] = cursor.fetchone()[0]
    return counts


def tables_checksum(connection, tables):
    """SHA-256 over every row of `tables` (in the order given), rows ordered by all their columns."""
    digest = hashlib.sha256()
    cursor = connection.cursor()
    for table in tables:
        cursor.execute(f"SELECT * FROM {_quoted(table)} LIMIT 0")
        columns = len(cursor.description)
        order = ", ".join(str(position) for position in range(1, columns + 1))
        cursor.execute(f"SELECT * FROM {_quoted(table)} ORDER BY {order}")
        digest.update(f"table {table}\x1e".encode())
        while True:
            rows = cursor.fetchmany(1000)
            if not rows:
                break
            for row in rows:
                digest.update("\x1f".join(_value(value) for value in row).encode() + b"\x1e")
    return digest.hexdigest()


def _stderr_tail(stream):
    stream.seek(0)
    lines = [line for line in stream.read().decode(errors="replace").splitlines() if line.strip()]
    return redact(" | ".join(lines[-STDERR_LINES:])) or "no message"


# -- PostgreSQL ------------------------------------------------------------------------------


class Postgres:
    dialect = "postgres"

    def __init__(self, dsn):
        self.dsn = dsn

    def connect(self, **options):
        import psycopg2

        try:
            return psycopg2.connect(self.dsn, **options)
        except psycopg2.OperationalError as error:
            raise BackupError(f"cannot connect to the PostgreSQL database: {redact(str(error).strip())}") from None

    def tables(self, connection):
        cursor = connection.cursor()
        cursor.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY tablename")
        return [name for (name,) in cursor.fetchall()]

    @contextlib.contextmanager
    def snapshot(self):
        """(connection in a REPEATABLE READ transaction, iterator of the pg_dump -Fc of that snapshot)."""
        connection = self.connect()
        try:
            connection.set_session(isolation_level="REPEATABLE READ", readonly=True)
            cursor = connection.cursor()
            cursor.execute("SELECT pg_export_snapshot()")
            (snapshot,) = cursor.fetchone()
            tool = pg_tool("pg_dump", connection.server_version // 10000)
            url, env = _libpq(self.dsn)
            command = [tool, "--format=custom", "--no-password", f"--lock-wait-timeout={PG_LOCK_WAIT}"]
            command += [f"--snapshot={snapshot}", f"--dbname={url}"]
            dump = _process_output(command, env, "pg_dump")
            try:
                yield connection, dump
            finally:
                dump.close()  # a dump abandoned halfway stops pg_dump
        finally:
            connection.close()

    def is_empty(self):
        connection = self.connect()
        try:
            cursor = connection.cursor()
            cursor.execute(
                "SELECT COUNT(*) FROM pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema')"
            )
            return cursor.fetchone()[0] == 0
        finally:
            connection.close()

    def restore(self, chunks, replace):
        """Load a pg_dump -Fc stream into this (empty, or with `replace`, emptied) database in one transaction."""
        connection = self.connect()
        try:
            major = connection.server_version // 10000
            if replace:
                connection.autocommit = True
                connection.cursor().execute("DROP SCHEMA IF EXISTS public CASCADE; CREATE SCHEMA public")
        finally:
            connection.close()
        url, env = _libpq(self.dsn)
        command = [pg_tool("pg_restore", major), "--no-owner", "--no-privileges", "--no-password"]
        command += ["--single-transaction", "--exit-on-error", f"--dbname={url}"]
        _process_input(command, env, "pg_restore", chunks)

    @contextlib.contextmanager
    def scratch(self):
        """A new empty database on this server, dropped afterwards."""
        name = f"{SCRATCH_PREFIX}{os.getpid()}_{uuid.uuid4().hex[:12]}"  # whose it is, if one is ever left
        admin = self.connect()
        admin.autocommit = True
        try:
            admin.cursor().execute(f"CREATE DATABASE {_quoted(name)} TEMPLATE template0")
        except Exception as error:
            admin.close()
            problem = redact(str(error).strip())
            raise BackupError(f"cannot create a scratch database to verify into: {problem}") from None
        parts = urlsplit(self.dsn)
        try:
            yield Postgres(urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, "")))
        finally:
            cursor = admin.cursor()
            if admin.server_version >= 130000:
                # Ends the sessions still in it (a restore cut short) and waits for them to go.
                cursor.execute(f"DROP DATABASE IF EXISTS {_quoted(name)} WITH (FORCE)")
            else:
                cursor.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE datname = %s AND pid <> pg_backend_pid()",
                    [name],
                )
                cursor.execute(f"DROP DATABASE IF EXISTS {_quoted(name)}")
            admin.close()


def pg_tool(name, server_major):
    """Path of pg_dump / pg_restore of at least the server's major version, or a clear BackupError."""
    versioned = f"/usr/lib/postgresql/{server_major}/bin/{name}"
    if os.access(versioned, os.X_OK):
        return versioned
    found = shutil.which(name)
    if found:
        answer = subprocess.run([found, "--version"], capture_output=True, text=True, timeout=30).stdout
        match = re.search(r"(\d+)(?:\.\d+)?", answer)
        if match and int(match.group(1)) >= server_major:
            return found
        raise BackupError(
            f"{found} is version {answer.strip() or 'unknown'}, older than the PostgreSQL {server_major} server; "
            f"install the PostgreSQL {server_major} client tools"
        )
    raise BackupError(
        f"{name} not found (looked in /usr/lib/postgresql/{server_major}/bin and on PATH): "
        f"install the PostgreSQL {server_major} client tools"
    )


def _libpq(dsn):
    """(the URL without its password, an environment with PGPASSWORD): no secret on a command line."""
    parts = urlsplit(dsn)
    env = dict(os.environ)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        user, has_password, password = userinfo.partition(":")
        if has_password:
            env["PGPASSWORD"] = unquote(password)
            netloc = f"{user}@{host}" if user else host
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, "")), env


def _process_output(command, env, what):
    errors = tempfile.TemporaryFile()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=errors, env=env)
    finished = False
    try:
        while True:
            data = process.stdout.read(READ_SIZE)
            if not data:
                break
            yield data
        if process.wait() != 0:
            raise BackupError(f"{what} failed (exit {process.returncode}): {_stderr_tail(errors)}")
        finished = True
    finally:
        if not finished and process.poll() is None:
            process.kill()
        process.stdout.close()
        process.wait()
        errors.close()


def _process_input(command, env, what, chunks):
    errors = tempfile.TemporaryFile()
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=errors, env=env)
    try:
        try:
            for chunk in chunks:
                process.stdin.write(chunk)
            process.stdin.close()
        except BrokenPipeError:
            pass  # it stopped reading: its exit status and message say why
        except BaseException:
            process.kill()
            raise
        if process.wait() != 0:
            raise BackupError(f"{what} failed (exit {process.returncode}): {_stderr_tail(errors)}")
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
        errors.close()


# -- SQLite -----------------------------------------------------------------------------------


class Sqlite:
    dialect = "sqlite"

    def __init__(self, path):
        self.path = path

    def connect(self):
        return sqlite3.connect(self.path)

    def tables(self, connection):
        cursor = connection.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' "
            "ORDER BY name"
        )
        return [name for (name,) in cursor.fetchall()]

    @contextlib.contextmanager
    def snapshot(self):
        """(connection to a consistent copy, iterator of the copy's bytes); the copy is deleted afterwards."""
        if not os.path.exists(self.path):
            raise BackupError("the SQLite database file does not exist")
        with tempfile.TemporaryDirectory(prefix="omniflow-backup-") as private:
            copy_path = os.path.join(private, "copy.sqlite3")
            source = sqlite3.connect(self.path)
            copy = sqlite3.connect(copy_path)
            try:
                source.backup(copy)  # all pages in one step: one consistent read of the source
                copy.execute("PRAGMA journal_mode = DELETE")  # one self-contained file, no -wal beside it
            finally:
                source.close()
            dump = _file_chunks(copy_path)
            try:
                yield copy, dump
            finally:
                dump.close()
                copy.close()

    def is_empty(self):
        if not os.path.exists(self.path) or os.path.getsize(self.path) == 0:
            return True
        connection = sqlite3.connect(Path(self.path).absolute().as_uri() + "?mode=ro", uri=True)
        try:
            return not self.tables(connection)
        finally:
            connection.close()

    def restore(self, chunks, replace):
        directory = os.path.dirname(os.path.abspath(self.path))
        os.makedirs(directory, exist_ok=True)
        partial = os.path.join(directory, f".{os.path.basename(self.path)}.restoring-{uuid.uuid4().hex[:8]}")
        try:
            descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(descriptor, "wb") as out:
                for chunk in chunks:
                    out.write(chunk)
                out.flush()
                os.fsync(out.fileno())
            check = sqlite3.connect(partial)
            try:
                (verdict,) = check.execute("PRAGMA quick_check").fetchone()
            finally:
                check.close()
            if verdict != "ok":
                raise BackupError(f"the restored SQLite file fails its integrity check: {verdict}")
            if replace:
                # The old file's write-ahead log must not be replayed onto the new file.
                for suffix in ("-wal", "-shm", "-journal"):
                    with contextlib.suppress(FileNotFoundError):
                        os.remove(self.path + suffix)
            os.replace(partial, self.path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.remove(partial)

    @contextlib.contextmanager
    def scratch(self):
        with tempfile.TemporaryDirectory(prefix="omniflow-verify-") as private:
            yield Sqlite(os.path.join(private, "scratch.sqlite3"))


def _file_chunks(path):
    with open(path, "rb") as source:
        while True:
            data = source.read(READ_SIZE)
            if not data:
                return
            yield data


def for_url(url):
    """The backup side of a database URL (the format of DATABASE_URL)."""
    from config.settings import ConfigError, parse_database_url

    try:
        target = parse_database_url(url)
    except ConfigError as error:
        raise BackupError(f"not a database URL: {error.problem}") from None
    return for_target(target)


def for_target(target):
    return Postgres(target.dsn) if target.is_postgres else Sqlite(target.path)
