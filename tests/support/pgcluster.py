"""A PostgreSQL server of a test's own (initdb + pg_ctl), so the test can stop
and start it without touching the shared server the rest of the suite uses.

The server binaries come from the machine's PostgreSQL packages
(/usr/lib/postgresql/<version>/bin, the newest one). initdb refuses to run as
root, so under root the cluster belongs to the `postgres` system user and
lives in a directory of its own under the system temp dir (pytest's tmp_path
is private to root).
"""

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile

import psycopg2

BIN_GLOB = "/usr/lib/postgresql/*/bin"
SERVER_USER = "postgres"
DATABASE = "omniflow"
# A throwaway cluster: no durability, few resources, only TCP on 127.0.0.1.
SERVER_OPTIONS = (
    "-c listen_addresses=127.0.0.1 -c unix_socket_directories='' -c fsync=off "
    "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200 -c shared_buffers=32MB"
)


def server_binaries():
    """The newest PostgreSQL bin directory with initdb and pg_ctl, or None."""
    candidates = [
        path
        for path in glob.glob(BIN_GLOB)
        if os.access(os.path.join(path, "initdb"), os.X_OK) and os.access(os.path.join(path, "pg_ctl"), os.X_OK)
    ]
    if not candidates:
        return None
    return max(candidates, key=lambda path: int(os.path.basename(os.path.dirname(path)).split(".")[0]))


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class OwnCluster:
    """initdb'd on creation; `start()`, `stop()` (fast shutdown) and `remove()`."""

    def __init__(self, bin_dir):
        self.bin_dir = bin_dir
        self.port = free_port()
        self.as_user = os.geteuid() == 0
        self.base = tempfile.mkdtemp(prefix="omniflow-pg-")
        if self.as_user:
            account = pwd.getpwnam(SERVER_USER)
            os.chown(self.base, account.pw_uid, account.pw_gid)
        self.data = os.path.join(self.base, "data")
        self.log = os.path.join(self.base, "server.log")
        try:
            self._run("initdb", "-D", self.data, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8")
        except BaseException:
            shutil.rmtree(self.base, ignore_errors=True)
            raise

    def _run(self, tool, *args):
        command = [os.path.join(self.bin_dir, tool), *args]
        if self.as_user:
            command = ["runuser", "-u", SERVER_USER, "--", *command]
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=60)

    def start(self):
        self._run("pg_ctl", "-D", self.data, "-l", self.log, "-w", "-o", f"-p {self.port} {SERVER_OPTIONS}", "start")

    def stop(self):
        """What a restart or failover does to clients: every connection is cut at once."""
        self._run("pg_ctl", "-D", self.data, "-m", "fast", "-w", "stop")

    def url(self, database=DATABASE):
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def create_database(self, name=DATABASE):
        connection = psycopg2.connect(self.url("postgres"))
        connection.autocommit = True
        try:
            connection.cursor().execute(f'CREATE DATABASE "{name}"')
        finally:
            connection.close()
        return self.url(name)

    def remove(self):
        try:
            self._run("pg_ctl", "-D", self.data, "-m", "immediate", "-w", "stop")
        except subprocess.CalledProcessError:
            pass  # already stopped
        shutil.rmtree(self.base, ignore_errors=True)
