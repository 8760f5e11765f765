"""SPEC 6 and 9: the web's maintenance controller samples the health of the database
and of the panel (when one is configured) and moves the switch — never an
operator's, never twice across replicas."""

import os
import signal
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import psycopg2
import pytest
import requests

from models.base import db
from models.ops import AuditEvent, MaintenanceState
from ops import maintenance
from ops.maintenance_controller import ACTOR, MaintenanceController
from tests.fulfillment.conftest import PANEL_TOKEN
from tests.support import backends
from tests.support.processes import wait_for

ROOT = Path(__file__).resolve().parents[2]


def controller(panel_server, **options):
    from integrations.remnawave import RemnawaveClient

    return MaintenanceController(RemnawaveClient(panel_server.base_url, PANEL_TOKEN), **options)


def state():
    return MaintenanceState.get_by_id(maintenance.MAINTENANCE_ROW)


def audits():
    return [(a.action, a.actor) for a in AuditEvent.select().order_by(AuditEvent.id)]


def test_a_panel_failing_three_probes_in_a_row_turns_maintenance_on_and_recovery_turns_it_off(panel):
    probe = controller(panel)
    panel.set_faults(fail_rate=1.0, routes=["GET /api/system/health"])
    assert [probe.probe_once() for _ in range(3)] == [None, None, "enabled"]
    assert state().active and state().set_by == ACTOR and "3 health probes" in state().reason
    panel.clear_faults()
    assert [probe.probe_once() for _ in range(2)] == [None, "disabled"]
    assert not state().active
    assert audits() == [("maintenance.enabled", ACTOR), ("maintenance.disabled", ACTOR)]


def test_one_healthy_probe_between_failures_starts_the_count_again(panel):
    probe = controller(panel)
    panel.set_faults(fail_rate=1.0, routes=["GET /api/system/health"])
    probe.probe_once(), probe.probe_once()
    panel.clear_faults()
    probe.probe_once()
    panel.set_faults(fail_rate=1.0, routes=["GET /api/system/health"])
    assert [probe.probe_once() for _ in range(2)] == [None, None]
    assert not state().active


def test_the_controller_never_turns_off_what_an_operator_turned_on(panel):
    maintenance.set_mode(True, "panel upgrade tonight", actor="operator:alice")
    probe = controller(panel)
    assert [probe.probe_once() for _ in range(5)] == [None] * 5
    assert state().active and state().set_by == "operator:alice"


def test_two_replicas_probing_the_same_outage_write_one_change(panel):
    first, second = controller(panel), controller(panel)
    panel.set_faults(fail_rate=1.0, routes=["GET /api/system/health"])
    outcomes = []
    for _ in range(3):
        outcomes += [first.probe_once(), second.probe_once()]
    assert outcomes.count("enabled") == 1
    assert audits() == [("maintenance.enabled", ACTOR)]


def test_a_panel_that_does_not_answer_at_all_counts_as_down(panel):
    from integrations.remnawave import RemnawaveClient

    probe = MaintenanceController(RemnawaveClient("http://127.0.0.1:9", PANEL_TOKEN))  # nothing listens there
    assert [probe.probe_once() for _ in range(3)][-1] == "enabled"


@contextmanager
def database_down(backend, tmp_path):
    """models.db points at a database that fails every query (a file that is not a
    database; a server that refuses connections), then back at the working one."""
    working = db.obj
    if backend == "sqlite":
        garbage = tmp_path / "not-a-database.sqlite3"
        garbage.write_bytes(b"this is not a database " * 100)
        broken = backends.bind(f"sqlite:///{garbage}")
    else:
        broken = backends.bind("postgresql://postgres@127.0.0.1:9/nothing_listens_here")
    try:
        yield
    finally:
        broken.close()
        db.initialize(working)


def test_a_database_failing_three_probes_turns_maintenance_on_once_it_takes_the_write(database, backend, tmp_path):
    probe = MaintenanceController()  # no panel configured: the database is sampled alone
    with database_down(backend, tmp_path):
        assert [probe.probe_once() for _ in range(3)] == [None, None, None]  # nowhere to write the switch
    assert probe.probe_once() == "enabled"
    assert state().active and state().set_by == ACTOR
    assert state().reason == "the database failed 3 health probes in a row"
    assert [probe.probe_once() for _ in range(2)] == [None, "disabled"]  # two healthy probes after the change
    assert audits() == [("maintenance.enabled", ACTOR), ("maintenance.disabled", ACTOR)]


def test_a_database_failing_fewer_than_three_probes_moves_nothing(database, backend, tmp_path):
    probe = MaintenanceController()
    with database_down(backend, tmp_path):
        assert [probe.probe_once() for _ in range(2)] == [None, None]
    assert [probe.probe_once() for _ in range(3)] == [None, None, None]
    assert not state().active and audits() == []


def free_port():
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.processes
def test_a_web_process_without_a_panel_configured_samples_the_database_and_moves_the_switch(tmp_path):
    """PostgreSQL refuses the web process's connections for a few probes (its own
    database, never the shared server), then takes them again."""
    url = backends.create_pg_database()
    name = url.rsplit("/", 1)[1]
    backends.prepare(url, postgres=True).close_all()
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("APP_", "DATABASE_URL"))}
    env.update(DATABASE_URL=url, PORT=str(port), APP_MAINTENANCE_PROBE_SECONDS="1", LOG_LEVEL="INFO")
    log_path = tmp_path / "web.log"
    web = subprocess.Popen(
        [sys.executable, "omniflow.py", "web"],
        cwd=ROOT,
        env=env,
        stdout=open(log_path, "w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    admin = backends.admin_connection()
    watcher = psycopg2.connect(url)
    watcher.autocommit = True

    def ready():
        try:
            return requests.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200
        except requests.ConnectionError:
            return False

    def switch():
        cursor = watcher.cursor()
        cursor.execute("SELECT active, set_by, reason FROM maintenance_state WHERE id = 1")
        return cursor.fetchone()

    try:
        wait_for(ready, timeout=30, message="web ready")
        cursor = admin.cursor()
        cursor.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> %s",
            [name, watcher.get_backend_pid()],
        )
        wait_for(
            lambda: log_path.read_text().count("database health probe failed") >= 3,
            timeout=30,
            message="three failed database probes",
        )
        cursor.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
        wait_for(lambda: switch()[0], timeout=30, message="maintenance on")
        _, set_by, reason = switch()
        assert set_by == ACTOR and reason.startswith("the database failed")
        wait_for(lambda: not switch()[0], timeout=30, message="maintenance off again")
        cursor = watcher.cursor()
        cursor.execute("SELECT action, actor FROM audit_events ORDER BY id")
        assert cursor.fetchall() == [("maintenance.enabled", ACTOR), ("maintenance.disabled", ACTOR)]
        assert "sampling the database every 1 s" in log_path.read_text()
    finally:
        os.killpg(web.pid, signal.SIGTERM)
        web.wait(30)
        watcher.close()
        admin.cursor().execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
        admin.close()
        backends.drop_pg_database(url)
        print(log_path.read_text()[-3000:])
