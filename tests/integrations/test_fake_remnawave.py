"""The real adapter against the fake panel over real HTTP: lifecycle, panel rules, every fault classified."""

import concurrent.futures
import datetime
import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import requests

from fakes.remnawave import FakeRemnawave
from integrations.remnawave import (
    REMNAWAVE_UNAVAILABLE,
    REMOTE_USER_NOT_FOUND,
    ROUTE_CREATE,
    ROUTE_GET_BY_ID,
    ROUTE_GET_BY_USERNAME,
    ROUTE_UPDATE,
    RemnawaveClient,
    RemnawaveError,
)
from tests.integrations.conftest import CLIENT_TIMEOUT_S, HOLD_SECONDS, PANEL_TOKEN

ROOT = Path(__file__).resolve().parents[2]
GIB = 2**30
FORWARDED = {"x-forwarded-for": "127.0.0.1", "x-forwarded-proto": "https"}
MISSING = object()


def later(days=30):
    return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0) + datetime.timedelta(days=days)


def squad():
    return str(uuid.uuid4())


def raised(fn, *args, **kwargs):
    with pytest.raises(RemnawaveError) as info:
        fn(*args, **kwargs)
    return info.value


def api(panel, method, path, body=None, headers=None, token=PANEL_TOKEN):
    """A raw call, for the panel rules the adapter never breaks on purpose."""
    all_headers = {"Authorization": f"Bearer {token}", **FORWARDED, **(headers or {})}
    return requests.request(method, panel.base_url + path, json=body, headers=all_headers, timeout=5)


# --- lifecycle -----------------------------------------------------------------


def test_full_user_lifecycle_through_the_adapter(panel, client):
    username = "omniflow_0123456789abcdef"
    squads = [squad(), squad()]
    assert client.get_user_by_username(username) is None

    created = client.create_user(username, later(30), 0, None, squads)
    assert (created.username, created.status, created.traffic_limit_bytes) == (username, "ACTIVE", 0)
    assert created.hwid_device_limit == 0 and created.squad_uuids == tuple(squads)
    assert created.subscription_url.endswith(f"/api/sub/{created.short_uuid}")
    assert client.get_user_by_username(username) == created
    assert client.get_user(created.id) == created

    limited = client.update_user(created.id, later(60), 10 * GIB, 3, squads[:1])
    assert (limited.traffic_limit_bytes, limited.hwid_device_limit, limited.squad_uuids) == (10 * GIB, 3, (squads[0],))
    assert limited.expire_at == later(60)

    panel.set_used_traffic(username, 10 * GIB)
    assert client.get_user(created.id).status == "LIMITED"
    reset = client.reset_traffic(created.id)
    assert (reset.status, reset.used_traffic_bytes) == ("ACTIVE", 0)

    assert client.disable_user(created.id).status == "DISABLED"
    assert client.disable_user(created.id).status == "DISABLED"  # A029: already disabled is success
    assert client.enable_user(created.id).status == "ACTIVE"
    assert client.enable_user(created.id).status == "ACTIVE"  # A030: already enabled is success

    unlimited = client.update_user(created.id, later(90), 0, None, [])
    assert (unlimited.traffic_limit_bytes, unlimited.hwid_device_limit, unlimited.squad_uuids) == (0, 0, ())
    assert panel.user(username)["hwidDeviceLimit"] == 0

    client.delete_user(created.id)
    assert client.get_user(created.id) is None
    assert client.get_user_by_username(username) is None
    assert raised(client.enable_user, created.id).code == REMOTE_USER_NOT_FOUND
    stats = panel.stats()
    assert stats["creates_applied"] == {username: 1}
    assert stats["users"] == 0


def test_update_can_disable_and_reactivate_through_status(panel, client):
    user = client.create_user("omniflow_status", later(), 0, None, [])
    assert client.update_user(user.id, later(), 0, None, [], status="DISABLED").status == "DISABLED"
    assert client.update_user(user.id, later(), 0, None, [], status="ACTIVE").status == "ACTIVE"


def test_expired_user_comes_back_active_with_a_later_expiry(panel, client):
    past = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(days=1)
    panel.seed_user("omniflow_expired", past)
    user = client.get_user_by_username("omniflow_expired")
    assert user.status == "EXPIRED"
    assert client.update_user(user.id, later(), 0, None, []).status == "ACTIVE"


def test_drift_made_behind_omniflows_back_is_what_the_adapter_reads(panel, client):
    user = client.create_user("omniflow_drift", later(30), 5 * GIB, 2, [])
    panel.edit_user("omniflow_drift", expireAt=later(3), trafficLimitBytes=0, hwidDeviceLimit=None, status="DISABLED")
    drifted = client.get_user(user.id)
    assert (drifted.expire_at, drifted.traffic_limit_bytes, drifted.hwid_device_limit) == (later(3), 0, None)
    assert drifted.status == "DISABLED"
    assert panel.stats()["writes_applied"] == {ROUTE_CREATE: 1}  # edits are not Omniflow's writes
    assert panel.delete_user("omniflow_drift") is True
    assert client.get_user(user.id) is None


# --- the panel's rules ---------------------------------------------------------


@pytest.mark.parametrize(
    "body, field",
    [
        ({"username": "ab"}, "username"),
        ({"username": "x" * 37}, "username"),
        ({"username": "has space"}, "username"),
        ({"expireAt": MISSING}, "expireAt"),
        ({"expireAt": "2031-01-01"}, "expireAt"),
        ({"trafficLimitBytes": -1}, "trafficLimitBytes"),
        ({"hwidDeviceLimit": None}, "hwidDeviceLimit"),
        ({"hwidDeviceLimit": 1.5}, "hwidDeviceLimit"),
        ({"activeInternalSquads": ["not-a-uuid"]}, "activeInternalSquads"),
        ({"status": "PAUSED"}, "status"),
    ],
)
def test_create_refuses_what_the_contract_refuses(panel, body, field):
    sent = {"username": "omniflow_ok", "expireAt": "2031-01-01T00:00:00.000Z", **body}
    answer = api(panel, "POST", "/api/users", {key: value for key, value in sent.items() if value is not MISSING})
    assert answer.status_code == 400
    payload = answer.json()
    assert (payload["statusCode"], payload["message"]) == (400, "Validation failed")
    assert [issue["path"][0] for issue in payload["errors"]] == [field]
    assert panel.stats()["users"] == 0


@pytest.mark.parametrize(
    "body, field",
    [
        ({"status": "LIMITED"}, "status"),
        ({"status": "EXPIRED"}, "status"),
        ({"expireAt": "2001-01-01T00:00:00.000Z"}, "expireAt"),
        ({"trafficLimitBytes": -5}, "trafficLimitBytes"),
        ({"hwidDeviceLimit": -1}, "hwidDeviceLimit"),
        ({"activeInternalSquads": "not-a-list"}, "activeInternalSquads"),
    ],
)
def test_update_refuses_what_the_contract_refuses(panel, client, body, field):
    user = client.create_user("omniflow_patch", later(), 0, None, [])
    answer = api(panel, "PATCH", "/api/users", {"id": user.id, **body})
    assert answer.status_code == 400
    assert [issue["path"][0] for issue in answer.json()["errors"]] == [field]


def test_update_needs_an_id_or_a_username_and_accepts_either(panel, client):
    user = client.create_user("omniflow_by_name", later(), 0, None, [])
    assert api(panel, "PATCH", "/api/users", {"trafficLimitBytes": 1}).status_code == 400
    by_name = api(panel, "PATCH", "/api/users", {"username": "omniflow_by_name", "trafficLimitBytes": 7})
    assert by_name.status_code == 200 and by_name.json()["response"]["trafficLimitBytes"] == 7
    missing = api(panel, "PATCH", "/api/users", {"id": user.id + 100, "trafficLimitBytes": 7})
    assert (missing.status_code, missing.json()["errorCode"]) == (404, "A025")


def test_a_taken_username_is_a019_and_a_missing_user_is_a404(panel, client):
    client.create_user("omniflow_taken", later(), 0, None, [])
    error = raised(client.create_user, "omniflow_taken", later(), 0, None, [])
    assert (error.code, error.panel_error_code) == ("remnawave_http_400", "A019")
    answer = api(panel, "GET", "/api/users/by-username/omniflow_nobody")
    assert (answer.status_code, answer.json()["errorCode"]) == (404, "A063")
    assert set(answer.json()) == {"timestamp", "path", "message", "errorCode"}
    assert api(panel, "POST", "/api/users/999/actions/enable").json()["errorCode"] == "A025"
    assert api(panel, "DELETE", "/api/users/999").json()["errorCode"] == "A025"


def test_an_unlimited_create_is_stored_with_zero_for_both_limits_and_enforces_no_device_limit(panel, client):
    client.create_user("omniflow_unlimited", later(), 0, None, [])
    stored = panel.user("omniflow_unlimited")
    assert (stored["trafficLimitBytes"], stored["hwidDeviceLimit"]) == (0, 0)
    assert panel.effective_device_limit("omniflow_unlimited") is None


def test_a_null_device_limit_is_the_panels_fallback_limit_as_on_the_real_panel(panel):
    """The panel's checkHwidDeviceLimit: 0 is no limit, null or absent is HWID_FALLBACK_DEVICE_LIMIT."""
    created = api(panel, "POST", "/api/users", {"username": "omniflow_absent", "expireAt": "2031-01-01T00:00:00Z"})
    assert created.status_code == 201
    assert panel.user("omniflow_absent")["hwidDeviceLimit"] is None
    assert panel.effective_device_limit("omniflow_absent") == panel.fallback_device_limit
    user_id = created.json()["response"]["id"]
    assert api(panel, "PATCH", "/api/users", {"id": user_id, "hwidDeviceLimit": 4}).status_code == 200
    assert panel.effective_device_limit("omniflow_absent") == 4
    assert api(panel, "PATCH", "/api/users", {"id": user_id, "hwidDeviceLimit": None}).status_code == 200
    assert panel.effective_device_limit("omniflow_absent") == panel.fallback_device_limit
    assert FakeRemnawave(fallback_device_limit=5).fallback_device_limit == 5


def test_requests_about_one_user_are_timed_in_order_of_arrival(panel, client):
    created = client.create_user("omniflow_timed", later(), 0, None, [])
    client.get_user(created.id)
    client.update_user(created.id, later(40), 0, 2, [])
    client.disable_user(created.id)
    client.get_user_by_username("omniflow_other")
    timeline = panel.requests_of("omniflow_timed")
    assert [entry["route"] for entry in timeline] == [
        ROUTE_CREATE,
        "GET /api/users/{id}",
        "PATCH /api/users",
        "POST /api/users/{id}/actions/disable",
    ]
    assert all(entry["arrived"] <= entry["done"] for entry in timeline)
    assert all(a["done"] <= b["arrived"] for a, b in zip(timeline, timeline[1:]))
    other = panel.requests_of("omniflow_other")
    assert [entry["route"] for entry in other] == ["GET /api/users/by-username/{username}"]


# --- faults --------------------------------------------------------------------


@pytest.mark.parametrize(
    "fault, code, detail, status",
    [
        ("fail_rate", "remnawave_http_500", None, 500),
        ("drop_rate", REMNAWAVE_UNAVAILABLE, "transport", None),
        ("oversized_rate", REMNAWAVE_UNAVAILABLE, "oversized", 200),
        ("redirect_rate", "remnawave_http_302", "redirect", 302),
        ("timeout_rate", REMNAWAVE_UNAVAILABLE, "timeout", None),
    ],
)
def test_each_fault_reaches_the_adapter_classified(panel, client, fault, code, detail, status):
    panel.set_faults(**{fault: 1.0})
    started = time.monotonic()
    error = raised(client.create_user, "omniflow_fault", later(), 0, None, [])
    assert (error.code, error.detail, error.status) == (code, detail, status)
    assert time.monotonic() - started < HOLD_SECONDS  # a held call is given up at the client's deadline
    assert panel.stats()["faults_injected"] == {fault.removesuffix("_rate"): 1}
    if fault != "timeout_rate":  # a held call is processed after the hold, like a slow panel
        assert panel.stats()["users"] == 0


def test_a_timed_out_write_may_still_land_after_the_client_gave_up(panel, client):
    panel.set_faults(timeout_rate=1.0, hold_seconds=CLIENT_TIMEOUT_S + 0.3)
    assert raised(client.create_user, "omniflow_slow", later(), 0, None, []).code == REMNAWAVE_UNAVAILABLE
    panel.clear_faults()
    deadline = time.monotonic() + 5
    while client.get_user_by_username("omniflow_slow") is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert panel.stats()["creates_applied"] == {"omniflow_slow": 1}


def test_a_lost_response_applied_the_write_and_a_lookup_finds_the_user(panel, client):
    panel.set_faults(lost_response_rate=1.0, writes_only=True)
    error = raised(client.create_user, "omniflow_lost", later(), 5 * GIB, 2, [])
    assert error.code == REMNAWAVE_UNAVAILABLE
    found = client.get_user_by_username("omniflow_lost")  # a read: not faulted
    assert found is not None and found.traffic_limit_bytes == 5 * GIB
    assert panel.stats()["creates_applied"] == {"omniflow_lost": 1}


def test_faults_can_be_limited_to_routes(panel, client):
    user = client.create_user("omniflow_routes", later(), 0, None, [])
    panel.set_faults(fail_rate=1.0, routes=[ROUTE_UPDATE])
    assert client.get_user(user.id) is not None
    assert raised(client.update_user, user.id, later(), 0, None, []).code == "remnawave_http_500"


def test_faults_can_be_limited_to_writes(panel, client):
    panel.set_faults(drop_rate=1.0, writes_only=True)
    assert client.get_user_by_username("omniflow_reads") is None
    assert raised(client.create_user, "omniflow_reads", later(), 0, None, []).code == REMNAWAVE_UNAVAILABLE


def test_latency_is_added_to_every_call(panel, client):
    panel.set_faults(latency_ms=150)
    started = time.monotonic()
    client.get_user_by_username("omniflow_latency")
    assert time.monotonic() - started >= 0.15


def outcomes(seed, n=40):
    with FakeRemnawave(token=PANEL_TOKEN, seed=seed) as fake:
        fake.set_faults(fail_rate=0.5)
        client = RemnawaveClient(fake.base_url, PANEL_TOKEN)
        results = []
        for _ in range(n):
            try:
                client.get_user_by_username("omniflow_seeded")
                results.append("ok")
            except RemnawaveError as error:
                results.append(error.code)
        return results


def test_seeded_faults_are_reproducible():
    first, second, other = outcomes(7), outcomes(7), outcomes(8)
    assert first == second
    assert 5 < first.count("ok") < 35  # about half
    assert first != other


def test_fault_settings_are_validated(panel):
    with pytest.raises(ValueError):
        panel.set_faults(fail_rate=0.7, drop_rate=0.7)
    with pytest.raises(ValueError):
        panel.set_faults(explode_rate=1.0)
    with pytest.raises(ValueError):
        panel.set_faults(fail_rate=1.5)


# --- counting, headers, token, concurrency -------------------------------------


def test_calls_are_counted_per_route_template(panel, client):
    client.get_user_by_username("omniflow_count")
    user = client.create_user("omniflow_count", later(), 0, None, [])
    client.get_user(user.id)
    client.get_user(user.id)
    client.update_user(user.id, later(), 0, None, [])
    calls = panel.stats()["calls"]
    assert calls == {ROUTE_GET_BY_USERNAME: 1, ROUTE_CREATE: 1, ROUTE_GET_BY_ID: 2, ROUTE_UPDATE: 1}


@pytest.mark.parametrize(
    "headers",
    [{}, {"x-forwarded-for": "127.0.0.1"}, {"x-forwarded-proto": "https"}, {**FORWARDED, "x-forwarded-proto": "http"}],
    ids=["none", "no-proto", "no-for", "http-proto"],
)
def test_missing_forwarded_headers_close_the_socket(panel, headers):
    with pytest.raises(requests.ConnectionError):
        requests.get(
            panel.base_url + "/api/users/by-username/omniflow_x",
            headers={"Authorization": f"Bearer {PANEL_TOKEN}", **headers},
            timeout=5,
        )
    assert panel.stats()["rejected"] == {"no_forwarded_headers": 1}


def test_dev_mode_does_not_need_forwarded_headers():
    with FakeRemnawave(token=PANEL_TOKEN, require_forwarded=False) as fake:
        answer = requests.get(fake.base_url + "/api/system/health", headers={"Authorization": f"Bearer {PANEL_TOKEN}"})
        assert answer.status_code == 200


def test_a_wrong_token_is_401(panel):
    intruder = RemnawaveClient(panel.base_url, "not-the-panel-token")
    error = raised(intruder.get_user_by_username, "omniflow_x")
    assert (error.code, error.status) == ("remnawave_http_401", 401)
    assert intruder.healthy() is False
    assert panel.stats()["rejected"] == {"unauthorized": 2}


def test_healthy_against_the_panel(panel, client):
    assert client.healthy() is True
    panel.set_faults(fail_rate=1.0)
    assert client.healthy() is False


def test_serves_many_concurrent_requests(panel):
    panel.set_faults(latency_ms=300)
    client = RemnawaveClient(panel.base_url, PANEL_TOKEN)
    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=24) as pool:
        results = list(pool.map(lambda n: client.get_user_by_username(f"omniflow_c{n}"), range(24)))
    elapsed = time.monotonic() - started
    assert results == [None] * 24
    assert panel.stats()["max_in_flight"] >= 16
    assert elapsed < 24 * 0.3 / 4  # concurrent, not one after another


# --- the control surface over HTTP, and the CLI --------------------------------


def test_control_surface_over_http_needs_the_token_but_not_forwarded_headers(panel, client):
    control = panel.base_url + "/_fake"
    auth = {"Authorization": f"Bearer {PANEL_TOKEN}"}
    assert requests.get(control + "/stats", timeout=5).status_code == 401
    client.create_user("omniflow_ctl", later(), 0, None, [])

    assert requests.get(control + "/stats", headers=auth, timeout=5).json()["users"] == 1
    users = requests.get(control + "/users", headers=auth, timeout=5).json()["users"]
    assert [user["username"] for user in users] == ["omniflow_ctl"]

    edited = requests.patch(control + "/users/omniflow_ctl", json={"usedTrafficBytes": 9}, headers=auth, timeout=5)
    assert edited.json()["userTraffic"]["usedTrafficBytes"] == 9

    faults = requests.post(control + "/faults", json={"fail_rate": 1.0}, headers=auth, timeout=5)
    assert faults.status_code == 200 and faults.json()["fail_rate"] == 1.0
    assert raised(client.get_user_by_username, "omniflow_ctl").code == "remnawave_http_500"
    assert requests.post(control + "/faults", json={"fail_rate": 9}, headers=auth, timeout=5).status_code == 400

    assert requests.post(control + "/reset", headers=auth, timeout=5).status_code == 200
    assert panel.stats()["users"] == 0 and panel.faults()["fail_rate"] == 0.0
    assert requests.delete(control + "/users/omniflow_ctl", headers=auth, timeout=5).status_code == 404


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_the_cli_serves_the_fake_panel_without_a_database():
    port = free_port()
    env = dict(os.environ, DATABASE_URL="postgresql://nobody@127.0.0.1:1/no_such_database")
    env.pop("APP_REMNAWAVE_TOKEN", None)
    process = subprocess.Popen(
        [sys.executable, "omniflow.py", "fake-remnawave", "--port", str(port), "--token", "cli-token-123456"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert f"http://127.0.0.1:{port}" in process.stdout.readline()
        client = RemnawaveClient(f"http://127.0.0.1:{port}", "cli-token-123456")
        assert client.healthy() is True
        assert client.create_user("omniflow_cli", later(), 0, None, []).username == "omniflow_cli"
    finally:
        process.terminate()
        out, err = process.communicate(timeout=10)
    assert process.returncode == 0, err
    assert "cli-token-123456" not in out + err  # a given token is never printed


def test_latency_counts_from_the_requests_arrival_with_the_work_inside_it(panel, client, monkeypatch):
    """A panel with 150 ms of latency answers 150 ms after the request arrived, not
    150 ms plus the time it spent on the request (the throughput bench's ideal assumes it)."""
    process = panel._process

    def slow(*args):
        time.sleep(0.1)
        return process(*args)

    monkeypatch.setattr(panel, "_process", slow)
    panel.set_faults(latency_ms=150)
    started = time.monotonic()
    client.get_user_by_username("omniflow_latency")
    elapsed = time.monotonic() - started
    assert 0.15 <= elapsed < 0.23
