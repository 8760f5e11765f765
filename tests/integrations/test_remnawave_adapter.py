"""SPEC 2.5, 2.22, 12.2: the Remnawave adapter classifies every failure, sends both limits, leaks nothing.

The panel is simulated with `responses`; tests/integrations/test_fake_remnawave.py
drives the same adapter against a real HTTP server, and test_transport.py its
transport (keep-alive, TLS, proxies) against real servers.
"""

import datetime
import json

import pytest
import requests
import responses

from integrations.remnawave import (
    MAX_BODY_BYTES,
    REMNAWAVE_UNAVAILABLE,
    REMOTE_USER_NOT_FOUND,
    RemnawaveClient,
    RemnawaveError,
    RemoteUser,
)
from security.redactor import redact

BASE = "https://panel.example.test"
TOKEN = "rw-api-token-7f3c9a1e5b2d4c6f8a0b"
SQUAD_A = "6f1c2d3e-4a5b-4c6d-8e7f-9a0b1c2d3e4f"
SQUAD_B = "0a1b2c3d-4e5f-4a6b-9c8d-7e6f5a4b3c2d"
SHORT_UUID = "sHoRtUuId1234567"
EXPIRE_AT = datetime.datetime(2031, 5, 17, 12, 30, 45, 123456, tzinfo=datetime.timezone.utc)


def user_json(**overrides):
    user = {
        "id": 42,
        "shortUuid": SHORT_UUID,
        "username": "omniflow_0123456789abcdef",
        "status": "ACTIVE",
        "trafficLimitBytes": 0,
        "trafficLimitStrategy": "NO_RESET",
        "expireAt": "2031-05-17T12:30:45.123Z",
        "telegramId": None,
        "email": None,
        "description": None,
        "tag": None,
        "hwidDeviceLimit": None,
        "externalSquadUuid": None,
        "trojanPassword": "trojan-password",
        "vlessUuid": "9b2f0c3a-1d4e-4f5a-8b6c-7d8e9f0a1b2c",
        "ssPassword": "ss-password-0123456789",
        "lastTriggeredThreshold": 0,
        "subRevokedAt": None,
        "lastTrafficResetAt": None,
        "createdAt": "2030-01-01T00:00:00.000Z",
        "updatedAt": "2030-01-01T00:00:00.000Z",
        "subscriptionUrl": f"https://sub.example.test/api/sub/{SHORT_UUID}",
        "activeInternalSquads": [{"uuid": SQUAD_A, "name": "main"}],
        "userTraffic": {
            "usedTrafficBytes": 1234,
            "lifetimeUsedTrafficBytes": 5678,
            "onlineAt": None,
            "firstConnectedAt": None,
            "lastConnectedNodeUuid": None,
        },
    }
    user.update(overrides)
    return {"response": user}


def panel_error(code, message="panel says no"):
    return {"timestamp": "2030-01-01T00:00:00.000Z", "path": "/api/users", "message": message, "errorCode": code}


@pytest.fixture
def client():
    return RemnawaveClient(BASE, TOKEN)


@pytest.fixture
def panel():
    # The client sends through its own transport adapter (integrations/transport.py),
    # so that adapter's send is the one `responses` stands in for.
    with responses.RequestsMock(
        assert_all_requests_are_fired=False, target="integrations.transport.KeepAliveAdapter.send"
    ) as mock:
        yield mock


def sent_json(call):
    return json.loads(call.request.body)


def raised(fn, *args, **kwargs):
    with pytest.raises(RemnawaveError) as info:
        fn(*args, **kwargs)
    return info.value


# --- classification ----------------------------------------------------------


def test_404_on_a_write_is_remote_user_not_found_with_the_panel_code(client, panel):
    panel.patch(f"{BASE}/api/users", status=404, json=panel_error("A025", "User not found"))
    error = raised(client.update_user, 42, EXPIRE_AT, 0, None, [])
    assert (error.code, error.status, error.panel_error_code) == (REMOTE_USER_NOT_FOUND, 404, "A025")


def test_reads_answer_none_when_the_panel_says_the_user_does_not_exist(client, panel):
    panel.get(f"{BASE}/api/users/by-username/omniflow_x", status=404, json=panel_error("A063"))
    panel.get(f"{BASE}/api/users/42", status=404, json=panel_error("A063"))
    assert client.get_user_by_username("omniflow_x") is None
    assert client.get_user(42) is None


def test_a_404_without_a_panel_error_code_is_not_taken_for_a_missing_user(client, panel):
    # A wrong base URL or a proxy answers 404 for every path: "no user" there
    # would make the worker create users it can never see.
    panel.get(
        f"{BASE}/api/users/by-username/omniflow_x",
        status=404,
        json={"message": "Cannot GET /api/users/by-username/omniflow_x", "statusCode": 404},
    )
    error = raised(client.get_user_by_username, "omniflow_x")
    assert error.code == REMOTE_USER_NOT_FOUND and error.panel_error_code is None


def test_400_keeps_status_and_panel_error_code_but_never_the_body(client, panel):
    panel.post(f"{BASE}/api/users", status=400, json=panel_error("A019", "username omniflow_secret_body exists"))
    error = raised(client.create_user, "omniflow_abc", EXPIRE_AT, 0, None, [])
    assert (error.code, error.status, error.panel_error_code) == ("remnawave_http_400", 400, "A019")
    assert str(error) == "remnawave_http_400 (A019)"
    assert "omniflow_secret_body" not in str(error) + repr(error)


def test_validation_error_is_http_400_without_panel_code(client, panel):
    panel.post(
        f"{BASE}/api/users",
        status=400,
        json={"statusCode": 400, "message": "Validation failed", "errors": [{"path": ["expireAt"]}]},
    )
    error = raised(client.create_user, "omniflow_abc", EXPIRE_AT, 0, None, [])
    assert (error.code, error.panel_error_code) == ("remnawave_http_400", None)


def test_a_panel_error_code_that_is_not_a_code_is_dropped(client, panel):
    panel.post(f"{BASE}/api/users", status=409, json={"errorCode": "https://evil.example/leak?x=1"})
    error = raised(client.create_user, "omniflow_abc", EXPIRE_AT, 0, None, [])
    assert (error.code, error.panel_error_code) == ("remnawave_http_409", None)


def test_500_is_remnawave_http_500(client, panel):
    panel.post(f"{BASE}/api/users/42/actions/reset-traffic", status=500, json=panel_error("A056"))
    error = raised(client.reset_traffic, 42)
    assert (error.code, error.status, error.panel_error_code) == ("remnawave_http_500", 500, "A056")


@pytest.mark.parametrize(
    "failure",
    [requests.exceptions.ReadTimeout(), requests.exceptions.ConnectTimeout()],
    ids=["read", "connect"],
)
def test_timeouts_are_unavailable(client, panel, failure):
    panel.get(f"{BASE}/api/users/42", body=failure)
    error = raised(client.get_user, 42)
    assert (error.code, error.detail) == (REMNAWAVE_UNAVAILABLE, "timeout")


def test_connection_errors_are_unavailable(client, panel):
    panel.post(f"{BASE}/api/users", body=requests.exceptions.ConnectionError("connection refused"))
    error = raised(client.create_user, "omniflow_abc", EXPIRE_AT, 0, None, [])
    assert (error.code, error.detail) == (REMNAWAVE_UNAVAILABLE, "transport")


@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_redirects_are_not_followed_and_are_classified_by_their_status(client, panel, status):
    panel.post(f"{BASE}/api/users", status=status, headers={"Location": "https://elsewhere.example.test/api/users"})
    elsewhere = panel.post("https://elsewhere.example.test/api/users", json=user_json())
    error = raised(client.create_user, "omniflow_abc", EXPIRE_AT, 0, None, [])
    assert (error.code, error.status, error.detail) == (f"remnawave_http_{status}", status, "redirect")
    assert elsewhere.call_count == 0  # the token never went to the other host
    assert len(panel.calls) == 1


def test_a_body_over_1_mib_is_unavailable_while_streaming(client, panel):
    # No Content-Length: the cap is enforced while reading.
    panel.get(f"{BASE}/api/users/42", body=b"x" * (MAX_BODY_BYTES + 1), content_type="application/json")
    error = raised(client.get_user, 42)
    assert (error.code, error.detail) == (REMNAWAVE_UNAVAILABLE, "oversized")


def test_a_declared_body_over_1_mib_is_refused_before_reading(client, panel):
    panel.get(
        f"{BASE}/api/users/42",
        body=b"{}",
        headers={"Content-Length": str(MAX_BODY_BYTES + 1)},
        content_type="application/json",
    )
    error = raised(client.get_user, 42)
    assert (error.code, error.detail) == (REMNAWAVE_UNAVAILABLE, "oversized")


def test_a_body_of_exactly_1_mib_is_read(client, panel):
    body = json.dumps(user_json()).encode()
    padded = body[:-1] + b" " * (MAX_BODY_BYTES - len(body)) + b"}"
    assert len(padded) == MAX_BODY_BYTES
    panel.get(f"{BASE}/api/users/42", body=padded, content_type="application/json")
    assert client.get_user(42).id == 42


@pytest.mark.parametrize(
    "body",
    [b"<html>502 Bad Gateway</html>", b'{"response": {"id": 42}}', b"[1, 2]", b"\xff\xfe"],
    ids=["html", "missing-fields", "not-an-object", "not-utf8"],
)
def test_an_undecodable_success_answer_is_unavailable(client, panel, body):
    panel.get(f"{BASE}/api/users/42", body=body, status=200, content_type="application/json")
    error = raised(client.get_user, 42)
    assert (error.code, error.detail) == (REMNAWAVE_UNAVAILABLE, "undecodable")


def test_healthy_is_false_on_any_failure_and_true_on_2xx(client, panel):
    health = panel.get(f"{BASE}/api/system/health", json={"response": {"runtimeMetrics": []}})
    assert client.healthy() is True
    assert health.calls[0].request.headers["Authorization"] == f"Bearer {TOKEN}"
    panel.replace(responses.GET, f"{BASE}/api/system/health", body=requests.exceptions.ConnectionError())
    assert client.healthy() is False
    panel.replace(responses.GET, f"{BASE}/api/system/health", status=401, json={"message": "Unauthorized"})
    assert client.healthy() is False


# --- what is sent ------------------------------------------------------------


def exercise_every_call(client, panel):
    panel.get(f"{BASE}/api/users/by-username/omniflow_abc", json=user_json())
    panel.get(f"{BASE}/api/users/42", json=user_json())
    panel.post(f"{BASE}/api/users", status=201, json=user_json())
    panel.patch(f"{BASE}/api/users", json=user_json())
    for action in ("enable", "disable", "reset-traffic"):
        panel.post(f"{BASE}/api/users/42/actions/{action}", json=user_json())
    panel.delete(f"{BASE}/api/users/42", json={"response": {"isDeleted": True}})
    panel.get(f"{BASE}/api/system/health", json={"response": {"runtimeMetrics": []}})
    client.get_user_by_username("omniflow_abc")
    client.get_user(42)
    client.create_user("omniflow_abc", EXPIRE_AT, 0, None, [])
    client.update_user(42, EXPIRE_AT, 0, None, [])
    client.enable_user(42)
    client.disable_user(42)
    client.reset_traffic(42)
    client.delete_user(42)
    client.healthy()
    return panel.calls


def test_every_call_carries_the_bearer_token_and_forwarded_headers(client, panel):
    calls = exercise_every_call(client, panel)
    assert len(calls) == 9
    for call in calls:
        headers = call.request.headers
        assert headers["Authorization"] == f"Bearer {TOKEN}"
        assert headers["x-forwarded-for"] == "127.0.0.1"
        assert headers["x-forwarded-proto"] == "https"


def test_forwarded_for_is_configurable(panel):
    client = RemnawaveClient(BASE, TOKEN, forwarded_for="10.1.2.3")
    panel.get(f"{BASE}/api/users/42", json=user_json())
    client.get_user(42)
    assert panel.calls[0].request.headers["x-forwarded-for"] == "10.1.2.3"


def test_unlimited_create_sends_zero_for_both_limits(client, panel):
    create = panel.post(f"{BASE}/api/users", status=201, json=user_json())
    client.create_user("omniflow_abc", EXPIRE_AT, 0, None, [])
    body = sent_json(create.calls[0])
    assert body == {
        "username": "omniflow_abc",
        "expireAt": "2031-05-17T12:30:45.123Z",
        "trafficLimitBytes": 0,
        "hwidDeviceLimit": 0,
        "activeInternalSquads": [],
    }


def test_limited_create_sends_both_limits_and_the_squads(client, panel):
    create = panel.post(f"{BASE}/api/users", status=201, json=user_json())
    client.create_user("omniflow_abc", EXPIRE_AT, 50 * 2**30, 3, [SQUAD_A, SQUAD_B])
    body = sent_json(create.calls[0])
    assert body["trafficLimitBytes"] == 50 * 2**30
    assert body["hwidDeviceLimit"] == 3
    assert body["activeInternalSquads"] == [SQUAD_A, SQUAD_B]


def test_unlimited_update_sends_zero_for_both_limits_never_null(client, panel):
    update = panel.patch(f"{BASE}/api/users", json=user_json())
    client.update_user(42, EXPIRE_AT, 0, None, [SQUAD_A])
    body = sent_json(update.calls[0])
    assert body == {
        "id": 42,
        "expireAt": "2031-05-17T12:30:45.123Z",
        "trafficLimitBytes": 0,
        "hwidDeviceLimit": 0,
        "activeInternalSquads": [SQUAD_A],
    }


def test_update_status_is_only_active_or_disabled(client, panel):
    update = panel.patch(f"{BASE}/api/users", json=user_json())
    client.update_user(42, EXPIRE_AT, 10, 2, [], status="DISABLED")
    assert sent_json(update.calls[0])["status"] == "DISABLED"
    for status in ("LIMITED", "EXPIRED", "active"):
        with pytest.raises(ValueError):
            client.update_user(42, EXPIRE_AT, 10, 2, [], status=status)
    assert len(panel.calls) == 1


def test_update_without_expire_at_leaves_it_as_it_is(client, panel):
    update = panel.patch(f"{BASE}/api/users", json=user_json())
    client.update_user(42, None, 0, None, [])
    assert "expireAt" not in sent_json(update.calls[0])


def test_negative_limits_and_bad_ids_never_reach_the_panel(client, panel):
    for call in (
        lambda: client.create_user("omniflow_abc", EXPIRE_AT, -1, None, []),
        lambda: client.create_user("omniflow_abc", EXPIRE_AT, 0, -2, []),
        lambda: client.update_user(42, EXPIRE_AT, True, None, []),
        lambda: client.get_user(0),
        lambda: client.enable_user("42"),
    ):
        with pytest.raises(ValueError):
            call()
    assert len(panel.calls) == 0


def test_expire_at_is_sent_in_utc_with_milliseconds(client, panel):
    create = panel.post(f"{BASE}/api/users", status=201, json=user_json())
    moscow = datetime.timezone(datetime.timedelta(hours=3))
    client.create_user("omniflow_abc", datetime.datetime(2031, 1, 1, 3, 0, 0, 999999, tzinfo=moscow), 0, None, [])
    assert sent_json(create.calls[0])["expireAt"] == "2031-01-01T00:00:00.999Z"


def test_a_user_is_read_into_remote_user(client, panel):
    panel.get(
        f"{BASE}/api/users/42",
        json=user_json(status="LIMITED", trafficLimitBytes=1000, hwidDeviceLimit=5),
    )
    user = client.get_user(42)
    assert user == RemoteUser(
        id=42,
        short_uuid=SHORT_UUID,
        username="omniflow_0123456789abcdef",
        status="LIMITED",
        expire_at=datetime.datetime(2031, 5, 17, 12, 30, 45, 123000, tzinfo=datetime.timezone.utc),
        traffic_limit_bytes=1000,
        hwid_device_limit=5,
        squad_uuids=(SQUAD_A,),
        subscription_url=f"https://sub.example.test/api/sub/{SHORT_UUID}",
        used_traffic_bytes=1234,
    )


# --- already enabled / disabled ----------------------------------------------


def test_already_enabled_a030_is_success_and_returns_the_current_user(client, panel):
    panel.post(f"{BASE}/api/users/42/actions/enable", status=400, json=panel_error("A030"))
    panel.get(f"{BASE}/api/users/42", json=user_json(status="ACTIVE"))
    assert client.enable_user(42).status == "ACTIVE"


def test_already_disabled_a029_is_success_and_returns_the_current_user(client, panel):
    panel.post(f"{BASE}/api/users/42/actions/disable", status=400, json=panel_error("A029"))
    panel.get(f"{BASE}/api/users/42", json=user_json(status="DISABLED"))
    assert client.disable_user(42).status == "DISABLED"


def test_the_other_already_code_is_still_an_error(client, panel):
    panel.post(f"{BASE}/api/users/42/actions/enable", status=400, json=panel_error("A029"))
    assert raised(client.enable_user, 42).panel_error_code == "A029"


def test_delete_accepts_an_empty_answer_and_raises_not_found_on_404(client, panel):
    panel.delete(f"{BASE}/api/users/42", status=204)
    assert client.delete_user(42) is None
    panel.replace(responses.DELETE, f"{BASE}/api/users/42", status=404, json=panel_error("A025"))
    assert raised(client.delete_user, 42).code == REMOTE_USER_NOT_FOUND


# --- secrets -----------------------------------------------------------------


def every_failure(client, panel):
    panel.get(f"{BASE}/api/users/1", status=500, json=panel_error("A026", f"token {TOKEN}"))
    panel.get(f"{BASE}/api/users/2", status=302, headers={"Location": f"https://x.test/?t={TOKEN}"})
    panel.get(f"{BASE}/api/users/3", body=requests.exceptions.ConnectionError(f"{BASE}/api/users/3 {TOKEN}"))
    panel.get(f"{BASE}/api/users/4", body=requests.exceptions.ReadTimeout(TOKEN))
    panel.get(f"{BASE}/api/users/5", body=b"x" * (MAX_BODY_BYTES + 10))
    panel.get(f"{BASE}/api/users/6", body=f"<p>{TOKEN}</p>")
    panel.get(f"{BASE}/api/users/7", status=404, body=f"no {TOKEN}")
    panel.get(f"{BASE}/api/users/8", status=401, json={"message": "Unauthorized", "statusCode": 401})
    return [raised(client.get_user, user_id) for user_id in range(1, 9)]


def test_the_token_is_in_no_exception_message_or_repr(client, panel):
    errors = every_failure(client, panel)
    assert {error.code for error in errors} == {
        "remnawave_http_500",
        "remnawave_http_302",
        REMNAWAVE_UNAVAILABLE,
        REMOTE_USER_NOT_FOUND,
        "remnawave_http_401",
    }
    for error in errors:
        text = f"{error} {error!r} {error.args}"
        assert TOKEN not in text
        assert "/api/" not in text  # no URL path either
    assert TOKEN not in repr(client) and TOKEN not in str(client)
    assert TOKEN not in str(client.last_request_summary)


def test_the_token_is_registered_with_the_redactor(client):
    assert TOKEN not in redact(f"something mentioned {TOKEN} in passing")


def test_a_remote_user_repr_hides_the_subscription_link(client, panel):
    panel.get(f"{BASE}/api/users/42", json=user_json())
    text = repr(client.get_user(42))
    assert SHORT_UUID not in text and "sub.example.test" not in text
    assert "omniflow_0123456789abcdef" in text


def test_last_request_summary_names_the_route_not_the_user(client, panel):
    panel.get(f"{BASE}/api/users/by-username/omniflow_abc", json=user_json())
    client.get_user_by_username("omniflow_abc")
    summary = client.last_request_summary
    assert summary["route"] == "GET /api/users/by-username/{username}"
    assert (summary["status"], summary["outcome"]) == (200, "ok")
    assert "omniflow_abc" not in json.dumps(summary)


def test_a_base_url_that_is_not_http_is_refused():
    with pytest.raises(ValueError):
        RemnawaveClient("ftp://panel.example.test", TOKEN)
    with pytest.raises(ValueError):
        RemnawaveClient("https://admin:pw@panel.example.test", TOKEN)
    with pytest.raises(ValueError):
        RemnawaveClient(BASE, "")


def test_a_base_url_with_a_path_prefix_is_kept(panel):
    client = RemnawaveClient("https://proxy.example.test/panel/", TOKEN)
    panel.get("https://proxy.example.test/panel/api/users/42", json=user_json())
    assert client.get_user(42).id == 42
