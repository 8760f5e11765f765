"""A PgBouncer in transaction mode in front of the test PostgreSQL server, started by the test itself.

It listens on a free loopback port, lets every database of the server
through (`* =`: the suite's test databases are created per session), trusts
its clients and logs in to the server as they do. `pooled(url)` is the same
URL through it. PgBouncer refuses to run as root, so as root it runs as the
server's `postgres` user. Where it is not installed or does not start, the
test is skipped with the reason (scripts/test.sh installs it).
"""

import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg2
import pytest

from tests.support.pgcluster import free_port

START_TIMEOUT_S = 10
DEFAULT_POOL_SIZE = 20  # server connections per database and user: fewer than the clients the tests open
MAX_CLIENT_CONN = 1000
RUN_AS = "postgres"  # as root: PgBouncer will not run as root

CONFIG = """\
[databases]
* = host={host} port={port}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {listen_port}
unix_socket_dir =
auth_type = trust
auth_file = {directory}/userlist.txt
pool_mode = transaction
default_pool_size = {pool_size}
max_client_conn = {max_client_conn}
server_reset_query = DISCARD ALL
logfile = {directory}/pgbouncer.log
pidfile = {directory}/pgbouncer.pid
stats_users = {user}
"""


class PgBouncer:
    def __init__(self, server_url):
        self.server = urlsplit(server_url)
        self.port = None
        self.directory = None
        self.process = None

    def pooled(self, url):
        """`url` (a database on the server) through the pooler."""
        parts = urlsplit(url)
        credentials = parts.netloc.rpartition("@")[0]
        netloc = f"{credentials}@127.0.0.1:{self.port}" if credentials else f"127.0.0.1:{self.port}"
        return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))

    def transactions(self, url):
        """How many transactions PgBouncer has passed on to `url`'s database (its SHOW STATS)."""
        name = urlsplit(url).path.lstrip("/")
        console = psycopg2.connect(self.pooled(urlunsplit(self.server._replace(path="/pgbouncer"))))
        console.autocommit = True  # the console takes no BEGIN
        try:
            cursor = console.cursor()
            cursor.execute("SHOW STATS")
            columns = [column.name for column in cursor.description]
            rows = [dict(zip(columns, row)) for row in cursor.fetchall()]
        finally:
            console.close()
        return sum(row["total_xact_count"] for row in rows if row["database"] == name)

    def log(self):
        path = Path(self.directory or "", "pgbouncer.log")
        return path.read_text()[-4000:] if path.is_file() else ""

    def start(self):
        """Start it; the reason it could not start, or None."""
        binary = shutil.which("pgbouncer") or next(
            (path for path in ("/usr/sbin/pgbouncer", "/usr/bin/pgbouncer") if os.path.exists(path)), None
        )
        if binary is None:
            return "pgbouncer is not installed (scripts/test.sh installs it: apt-get install pgbouncer)"
        self.directory = tempfile.mkdtemp(prefix="omniflow-pgbouncer-")
        self.port = free_port()
        user = self.server.username or "postgres"
        Path(self.directory, "userlist.txt").write_text(f'"{user}" ""\n')
        Path(self.directory, "pgbouncer.ini").write_text(
            CONFIG.format(
                host=self.server.hostname or "127.0.0.1",
                port=self.server.port or 5432,
                listen_port=self.port,
                directory=self.directory,
                pool_size=DEFAULT_POOL_SIZE,
                max_client_conn=MAX_CLIENT_CONN,
                user=user,
            )
        )
        argv = [binary, str(Path(self.directory, "pgbouncer.ini"))]
        if os.geteuid() == 0:
            try:
                account = pwd.getpwnam(RUN_AS)
            except KeyError:
                return f"running as root and there is no {RUN_AS} user for pgbouncer to run as"
            for path in (self.directory, *Path(self.directory).iterdir()):
                os.chown(path, account.pw_uid, account.pw_gid)
            argv[1:1] = ["-u", RUN_AS]
        self.process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        return self._wait_ready()

    def _wait_ready(self):
        probe_url = self.pooled(urlunsplit(self.server._replace(path="/postgres")))
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if self.process.poll() is not None:
                return f"pgbouncer exited with {self.process.returncode}: {self.log()[-500:]}"
            try:
                psycopg2.connect(probe_url, connect_timeout=2).close()
                return None
            except psycopg2.OperationalError as error:
                if time.monotonic() > deadline:
                    return f"pgbouncer did not answer within {START_TIMEOUT_S} s: {error}"
            time.sleep(0.1)

    def stop(self):
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)  # PgBouncer's immediate shutdown
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.directory:
            shutil.rmtree(self.directory, ignore_errors=True)


def started(server_url):
    """A running PgBouncer in front of `server_url`'s server, or the test is skipped with the reason."""
    bouncer = PgBouncer(server_url)
    reason = bouncer.start()
    if reason is not None:
        bouncer.stop()
        pytest.skip(reason)
    return bouncer
