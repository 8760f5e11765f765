"""SPEC 4.5: operators' sessions end when unused, and an operator can be disabled, given a new password or signed
out everywhere without SQL, from the panel (operators.write) and from `omniflow.py operators`, each audited with
its reason; a disabled operator's sessions end at once and it cannot sign in."""

import datetime
import json
import os
import subprocess
import sys
from pathlib import Path

import requests

from models.operators import Operator, OperatorSession
from models.ops import AuditEvent
from ops import operators
from tests.web import test_panel_api as api
from tests.web.conftest import serving
from tests.web.test_admin_api import assert_problem

ROOT = Path(__file__).resolve().parents[2]
T0 = datetime.datetime(2026, 12, 1, 9, 0, 0)
MINUTE = datetime.timedelta(minutes=1)
IDLE = 30 * MINUTE
NEW_PASSWORD = "a brand new passphrase 42"


def post(web, path, headers, **body):
    return requests.post(web + path, headers=headers, json=body or None, timeout=10)


def test_a_session_ends_after_its_idle_time_unused_and_use_keeps_it_alive_up_to_twelve_hours(database):
    alice = api.operator()
    unused = operators.open_session(alice, now=T0, idle=IDLE)
    assert operators.session_operator(unused, now=T0 + IDLE + MINUTE, idle=IDLE) is None
    used = operators.open_session(alice, now=T0, idle=IDLE)
    moment = T0
    while moment < T0 + operators.SESSION_TTL - 20 * MINUTE:
        moment += 20 * MINUTE  # used every 20 minutes: never idle for 30
        assert operators.session_operator(used, now=moment, idle=IDLE) is not None, moment
    assert operators.session_operator(used, now=T0 + operators.SESSION_TTL + MINUTE, idle=IDLE) is None


def test_a_session_signed_in_through_the_web_lasts_app_operator_idle_minutes_without_use(database):
    api.operator()
    with serving({"APP_OPERATOR_IDLE_MINUTES": "5"}) as base:
        assert api.sign_in(base).status_code == 200
    session = OperatorSession.get()
    assert session.expires_at - session.created_at == 5 * MINUTE


def test_an_operator_disabled_from_the_panel_is_signed_out_at_once_cannot_sign_in_and_it_is_audited(web):
    admin = api.session_of(web)
    bob_cookie = api.session_of(web, "bob", ["system.read"])
    bob = Operator.get(Operator.username == "bob")
    path = f"/v1/panel/operators/{bob.id}/disable"
    assert_problem(post(web, path, admin), 400, "reason_required")
    assert_problem(post(web, path, {**bob_cookie, **api.REASON}), 403, "forbidden")
    answer = post(web, path, {**admin, "X-Operator-Reason": "left the company"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["operator"]["disabledAt"] and answer.json()["operator"]["liveSessions"] == 0
    assert_problem(api.get(web, "/v1/panel/session", bob_cookie), 401, "unauthorized")
    assert_problem(api.sign_in(web, "bob"), 401, "invalid_credentials")
    audit = AuditEvent.get(AuditEvent.action == "operator.disabled")
    assert (audit.actor, audit.reason, audit.subject_id) == ("operator:alice", "left the company", str(bob.id))
    assert_problem(post(web, path, {**admin, **api.REASON}), 409, "state_conflict")
    assert post(web, f"/v1/panel/operators/{bob.id}/enable", {**admin, **api.REASON}).status_code == 200
    assert api.sign_in(web, "bob").status_code == 200


def test_a_password_reset_and_a_revocation_from_the_panel_end_the_operators_sessions(web):
    admin = api.session_of(web)
    bob_cookie = api.session_of(web, "bob", ["system.read"])
    bob = Operator.get(Operator.username == "bob")
    reset = f"/v1/panel/operators/{bob.id}/password"
    assert_problem(post(web, reset, {**admin, **api.REASON}, password="short"), 400, "weak_password")
    assert api.get(web, "/v1/panel/session", bob_cookie).status_code == 200
    assert post(web, reset, {**admin, **api.REASON}, password=NEW_PASSWORD).status_code == 200
    assert_problem(api.get(web, "/v1/panel/session", bob_cookie), 401, "unauthorized")
    assert_problem(api.sign_in(web, "bob"), 401, "invalid_credentials")
    again = api.sign_in(web, "bob", NEW_PASSWORD)
    assert again.status_code == 200
    audit = AuditEvent.get(AuditEvent.action == "operator.password_reset")
    assert NEW_PASSWORD not in audit.details and audit.reason == api.REASON["X-Operator-Reason"]
    cookie = {"Cookie": f"omniflow_session={again.cookies['omniflow_session']}"}
    answer = post(web, f"/v1/panel/operators/{bob.id}/revoke-sessions", {**admin, **api.REASON})
    assert answer.status_code == 200 and answer.json()["operator"]["liveSessions"] == 0
    assert_problem(api.get(web, "/v1/panel/session", cookie), 401, "unauthorized")
    assert json.loads(AuditEvent.get(AuditEvent.action == "operator.sessions_revoked").details) == {"sessionsEnded": 1}
    assert_problem(post(web, "/v1/panel/operators/424242/disable", {**admin, **api.REASON}), 404, "operator_not_found")


def test_the_operators_page_is_for_operators_write_and_offers_each_change_with_a_reason(web):
    admin = api.session_of(web)
    api.operator("bob", ["system.read"])
    text = requests.get(web + "/panel/operators", headers=admin, timeout=10).text
    bob = Operator.get(Operator.username == "bob")
    for action in ("disable", "revoke-sessions", "password"):
        assert f'data-action="/v1/panel/operators/{bob.id}/{action}"' in text
    assert text.count('name="reason"') == 2 * Operator.select().count()
    reader = api.session_of(web, "carol", ["system.read", "system.write"])
    assert requests.get(web + "/panel/operators", headers=reader, timeout=10).status_code == 403
    assert_problem(api.get(web, "/v1/panel/operators", reader), 403, "forbidden")
    for change in ("disable", "enable", "revoke-sessions", "password"):
        path = f"/v1/panel/operators/{bob.id}/{change}"
        assert_problem(post(web, path, {**reader, **api.REASON}, password=NEW_PASSWORD), 403, "forbidden")
        assert_problem(post(web, path, api.REASON, password=NEW_PASSWORD), 401, "unauthorized")
    assert Operator.get_by_id(bob.id).disabled_at is None


def cli(database_url, *args, password=None):
    env = dict(os.environ, DATABASE_URL=database_url)
    env.pop("OMNIFLOW_OPERATOR_PASSWORD", None)
    if password:
        env["OMNIFLOW_OPERATOR_PASSWORD"] = password
    return subprocess.run(
        [sys.executable, "omniflow.py", "operators", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def test_the_cli_disables_resets_and_revokes_with_a_reason_and_ends_sessions_at_once(database, database_url):
    bob = api.operator("bob", ["system.read"])
    token = operators.open_session(bob)
    assert cli(database_url, "disable", "bob").returncode == 2  # --reason is required
    done = cli(database_url, "disable", "bob", "--reason", "laptop stolen")
    assert done.returncode == 0, done.stderr
    assert operators.session_operator(token) is None and OperatorSession.select().count() == 0
    assert operators.authenticate("bob", api.PASSWORD, "127.0.0.1") is None
    assert AuditEvent.get(AuditEvent.action == "operator.disabled").reason == "laptop stolen"
    assert cli(database_url, "enable", "bob", "--reason", "laptop found").returncode == 0
    reset = cli(database_url, "reset-password", "bob", "--reason", "forgot it", password=NEW_PASSWORD)
    assert reset.returncode == 0, reset.stderr
    assert operators.authenticate("bob", NEW_PASSWORD, "127.0.0.1") is not None
    operators.open_session(bob)
    revoked = cli(database_url, "revoke-sessions", "bob", "--reason", "shared screen")
    assert revoked.returncode == 0 and "1 session" in revoked.stdout and OperatorSession.select().count() == 0
    listed = cli(database_url, "list")
    assert listed.returncode == 0 and "bob" in listed.stdout and "active" in listed.stdout
    unknown = cli(database_url, "disable", "nobody", "--reason", "x")
    assert unknown.returncode == 2 and "no operator is named 'nobody'" in unknown.stderr


def test_upgrading_gives_operators_write_only_to_operators_who_held_every_earlier_permission(database):
    import importlib

    from models.base import db

    upgrade = importlib.import_module("migrations.0033_operators_write")
    everyone = api.operator("root", sorted(upgrade.EARLIER))
    reader = api.operator("reader", ["system.read", "system.write"])
    upgrade.up(None, db)
    assert operators.OPERATORS_WRITE in Operator.get_by_id(everyone.id).permission_set
    assert Operator.get_by_id(reader.id).permission_set == {"system.read", "system.write"}
    upgrade.down(None, db)
    assert Operator.get_by_id(everyone.id).permission_set == upgrade.EARLIER
