"""SPEC 4.2, 4.5, 12.1: operators sign in with a session; the panel's fulfillment
routes, their parameters and error codes, permissions, and what never leaks."""

import datetime
import json

import pytest
import requests

import commerce.provider_refund  # noqa: F401  (registers the refund job kind a refund through the provider inserts)
import jobs
import jobs.fulfillment  # noqa: F401  (registers the fulfillment job kind the retry inserts)
from commerce.settlement import settle_order
from fulfillment import rules
from models.base import utcnow
from models.campaigns import Campaign
from models.catalogue import AccessCode, GiftCard
from models.commerce import Customer, Order, Subscription
from models.fulfillment import Entitlement, FulfillmentHistory, FulfillmentOperation
from models.jobs import Job
from models.operators import OperatorSession
from models.ops import AuditEvent
from models.support import SupportMessage
from ops import operators
from ops.campaigns import create_campaign
from ops.support import customer_writes
from tests.support import commerce
from tests.web.test_admin_api import assert_problem

PASSWORD = "correct horse battery staple"
REASON = {"X-Operator-Reason": "customer paid, panel was down"}
EVERYTHING = list(operators.PERMISSIONS)

SUBSCRIPTION_URL = "https://sub.example.net/api/sub/8d5b1c2a9f7e4d3c"
SQUAD_UUID = "0f4a1c2e-5b6d-4e7f-8a9b-0c1d2e3f4a5b"
BEARER = "Bearer eyJhbGciOiJIUzI1NiJ9.leaky-token-value"


def operator(name="alice", permissions=EVERYTHING):
    return operators.create_operator(name, PASSWORD, permissions)


def sign_in(web, name="alice", password=PASSWORD):
    return requests.post(web + "/v1/panel/session", json={"username": name, "password": password}, timeout=10)


def session_of(web, name="alice", permissions=EVERYTHING):
    """Cookie headers of a signed-in operator (sent by hand: the cookie is Secure, the test server is http)."""
    operator(name, permissions)
    answer = sign_in(web, name)
    assert answer.status_code == 200
    return {"Cookie": f"omniflow_session={answer.cookies['omniflow_session']}"}


def get(web, path, headers, **params):
    return requests.get(web + path, headers=headers, params=params, timeout=10)


def post(web, path, headers):
    return requests.post(web + path, headers=headers, timeout=10)


def operation_in(status, error_code="remnawave_unavailable"):
    settlement = settle_order(
        commerce.order(commerce.customer(), commerce.limited_plan(code=f"p{utcnow().timestamp()}")).id,
        "provider_webhook",
    )
    FulfillmentOperation.update(
        status=status,
        last_error_code=None if status == "succeeded" else error_code,
        completed_at=utcnow() if status in ("succeeded", "failed", "cancelled") else None,
        attempt_count=3,
    ).where(FulfillmentOperation.id == settlement.operation_id).execute()
    return settlement.operation_id


def with_secrets(op_id):
    """Give an operation summaries, a desired state and a history row full of what must never be shown."""
    FulfillmentOperation.update(
        request_summary=json.dumps({"squads": [SQUAD_UUID], "auth": BEARER}),
        response_summary=json.dumps({"subscriptionUrl": SUBSCRIPTION_URL}),
        desired_state=json.dumps({"squadIds": [SQUAD_UUID], "link": SUBSCRIPTION_URL}),
    ).where(FulfillmentOperation.id == op_id).execute()
    FulfillmentHistory.create(
        operation=op_id,
        attempt=1,
        status="retrying",
        error_code="remnawave_unavailable",
        correlation_id="c",
        request_summary=json.dumps({"squads": [SQUAD_UUID], "auth": BEARER}),
        response_summary=json.dumps({"subscriptionUrl": SUBSCRIPTION_URL}),
    )
    return op_id


# -- sessions -------------------------------------------------------------------------------


def test_sign_in_sets_an_httponly_strict_secure_session_cookie_and_sign_out_ends_it(web):
    operator(permissions=["system.read"])
    answer = sign_in(web)
    assert answer.status_code == 200
    assert answer.json() == {"username": "alice", "permissions": ["system.read"]}
    cookie = answer.headers["Set-Cookie"]
    assert "omniflow_session=" in cookie
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie.replace("strict", "Strict") and "Secure" in cookie
    headers = {"Cookie": f"omniflow_session={answer.cookies['omniflow_session']}"}
    assert get(web, "/v1/panel/session", headers).json()["username"] == "alice"
    assert requests.delete(web + "/v1/panel/session", headers=headers, timeout=10).status_code == 204
    assert_problem(get(web, "/v1/panel/session", headers), 401, "unauthorized")


def test_with_app_cookie_secure_false_the_session_cookie_is_not_secure_and_otherwise_the_same(database):
    from tests.web.conftest import serving

    operator(permissions=["system.read"])
    with serving({"APP_COOKIE_SECURE": "false"}) as base:
        cookie = sign_in(base).headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie.replace("strict", "Strict")
    assert "secure" not in cookie.lower()


def test_a_wrong_password_and_an_unknown_name_get_the_same_401(web):
    operator()
    assert_problem(sign_in(web, password="wrong password!"), 401, "invalid_credentials")
    assert_problem(sign_in(web, name="mallory"), 401, "invalid_credentials")
    assert OperatorSession.select().count() == 0


def test_on_an_unmigrated_database_sign_in_the_panel_routes_and_pages_answer_503(backend, tmp_path):
    from tests.support import backends
    from tests.web.conftest import serving
    from tests.web.test_openapi import check

    url = f"sqlite:///{tmp_path / 'empty.sqlite3'}" if backend == "sqlite" else backends.create_pg_database()
    database = backends.bind(url)  # never migrated
    try:
        with serving() as base:
            answer = requests.post(base + "/v1/panel/session", json={"username": "a", "password": "b"}, timeout=10)
            assert_problem(answer, 503, "database_unavailable")
            check(answer, "/v1/panel/session", "post")  # as described
            assert "not migrated" in answer.json()["detail"]
            for method, path in [("DELETE", "/v1/panel/session"), *SESSION_ROUTES] + [
                (method, paths(template)) for method, template, _ in ROUTES
            ]:
                answer = requests.request(method, base + path, headers=REASON, timeout=10)
                assert_problem(answer, 503, "database_unavailable")
            page = requests.get(base + "/panel/system/queue", allow_redirects=False, timeout=10)
            assert page.status_code == 503 and "not migrated" in page.text
    finally:
        database.close()
        if backend == "postgres":
            database.close_all()
            backends.drop_pg_database(url)


@pytest.mark.parametrize("body", [None, "[]", '{"username": "alice"}', '{"username": 1, "password": "x"}', "{bad"])
def test_a_malformed_sign_in_is_a_400(web, body):
    json_type = {"Content-Type": "application/json"}
    answer = requests.post(web + "/v1/panel/session", data=body, headers=json_type, timeout=10)
    assert_problem(answer, 400, "invalid_body")


def test_an_expired_session_is_refused(web):
    headers = session_of(web)
    OperatorSession.update(expires_at=utcnow() - datetime.timedelta(seconds=1)).execute()
    assert_problem(get(web, "/v1/panel/system/jobs", headers), 401, "unauthorized")


def test_a_disabled_operator_loses_its_sessions(web):
    headers = session_of(web)
    operators.Operator.update(disabled_at=utcnow()).execute()
    assert_problem(get(web, "/v1/panel/system/jobs", headers), 401, "unauthorized")


def test_five_wrong_passwords_from_one_address_throttle_the_name_there_known_or_not(web):
    operator()
    for name in ("alice", "mallory"):
        for _ in range(operators.MAX_FAILURES):
            assert_problem(sign_in(web, name=name, password="wrong password!"), 401, "invalid_credentials")
        throttled = sign_in(web, name=name)  # even the right password waits
        assert_problem(throttled, 429, "too_many_attempts")
        assert int(throttled.headers["Retry-After"]) == 900
    assert OperatorSession.select().count() == 0


HOME, ELSEWHERE = "198.51.100.4", "203.0.113.9"


def test_a_success_clears_the_failures_and_the_window_ends_the_throttle(database):
    operator()
    for _ in range(operators.MAX_FAILURES - 1):
        assert operators.authenticate("alice", "wrong password!", HOME) is None
    assert operators.authenticate("alice", PASSWORD, HOME) is not None
    for _ in range(operators.MAX_FAILURES):
        assert operators.authenticate("alice", "wrong password!", HOME) is None
    with pytest.raises(operators.TooManyAttempts):
        operators.authenticate("alice", PASSWORD, HOME)
    later = utcnow() + operators.FAILURE_WINDOW + datetime.timedelta(seconds=1)
    assert operators.authenticate("alice", PASSWORD, HOME, now=later) is not None


def test_failures_elsewhere_never_lock_the_operator_out_and_a_success_does_not_reset_them(database):
    operator()
    for _ in range(operators.MAX_FAILURES):
        assert operators.authenticate("alice", "wrong password!", ELSEWHERE) is None
    with pytest.raises(operators.TooManyAttempts):
        operators.authenticate("alice", PASSWORD, ELSEWHERE)
    assert operators.authenticate("alice", PASSWORD, HOME) is not None  # the operator, from home
    with pytest.raises(operators.TooManyAttempts):
        operators.authenticate("alice", PASSWORD, ELSEWHERE)  # the count elsewhere stands


def test_an_ipv6_client_is_counted_by_its_64_network(database):
    operator()
    for host in range(operators.MAX_FAILURES):
        assert operators.authenticate("alice", "wrong password!", f"2001:db8:1:2::{host + 1}") is None
    with pytest.raises(operators.TooManyAttempts):
        operators.authenticate("alice", PASSWORD, "2001:db8:1:2:ffff::1")  # same /64, fresh address
    assert operators.authenticate("alice", PASSWORD, "2001:db8:1:3::1") is not None
    assert operators.throttle_address("::ffff:192.0.2.7") == "192.0.2.7"


def test_behind_the_trusted_proxy_five_failures_lock_that_client_address_and_no_other(database):
    from tests.web.conftest import serving

    operator()
    with serving({"APP_TRUSTED_PROXY": "127.0.0.1"}) as base:

        def from_address(address, password):
            return requests.post(
                base + "/v1/panel/session",
                json={"username": "alice", "password": password},
                headers={"X-Forwarded-For": address},
                timeout=10,
            )

        for _ in range(operators.MAX_FAILURES):
            assert_problem(from_address(ELSEWHERE, "wrong password!"), 401, "invalid_credentials")
        assert_problem(from_address(ELSEWHERE, PASSWORD), 429, "too_many_attempts")
        assert from_address(HOME, PASSWORD).status_code == 200


def test_x_forwarded_for_is_ignored_unless_a_trusted_proxy_is_configured(web):
    operator()
    for n in range(operators.MAX_FAILURES):
        answer = requests.post(
            web + "/v1/panel/session",
            json={"username": "alice", "password": "wrong password!"},
            headers={"X-Forwarded-For": f"192.0.2.{n + 1}"},  # a client naming a new address each time
            timeout=10,
        )
        assert_problem(answer, 401, "invalid_credentials")
    answer = requests.post(
        web + "/v1/panel/session",
        json={"username": "alice", "password": PASSWORD},
        headers={"X-Forwarded-For": HOME},
        timeout=10,
    )
    assert_problem(answer, 429, "too_many_attempts")


def test_passwords_are_stored_as_slow_salted_hashes(database):
    first, second = operator("one"), operator("two")
    assert PASSWORD not in first.password_hash
    assert first.password_hash.startswith("scrypt$16384$8$1$")
    assert first.password_hash != second.password_hash  # salted
    assert operators.authenticate("one", PASSWORD, HOME).id == first.id
    assert operators.authenticate("one", PASSWORD + "x", HOME) is None


def test_the_cli_creates_the_first_operator(database, monkeypatch, capsys):
    import omniflow

    monkeypatch.setenv("OMNIFLOW_OPERATOR_PASSWORD", PASSWORD)
    monkeypatch.setattr(omniflow, "bootstrap", lambda *a, **k: None)
    omniflow.main(["operators", "create", "root", "--permissions", "system.read,system.write"])
    assert "operator root created with system.read, system.write" in capsys.readouterr().out
    assert operators.authenticate("root", PASSWORD, HOME).permission_set == {"system.read", "system.write"}
    with pytest.raises(SystemExit):
        omniflow.main(["operators", "create", "root2", "--permissions", "everything"])


# -- listing ------------------------------------------------------------------------------------


def test_jobs_lists_failed_operations_by_default_newest_first(web):
    headers = session_of(web)
    failed = [operation_in("failed") for _ in range(2)]
    operation_in("retrying")
    operation_in("succeeded")
    body = get(web, "/v1/panel/system/jobs", headers).json()
    assert body["status"] == "failed" and body["limit"] == 25
    assert [row["id"] for row in body["operations"]] == sorted(failed, reverse=True)
    row = body["operations"][0]
    assert set(row) == {
        "id",
        "entitlementId",
        "operation",
        "status",
        "attemptCount",
        "errorCode",
        "correlationId",
        "createdAt",
        "nextAttemptAt",
        "completedAt",
    }
    assert row["errorCode"] == "remnawave_unavailable" and row["attemptCount"] == 3


def test_jobs_filters_by_status_operation_and_entitlement(web):
    headers = session_of(web)
    retrying = operation_in("retrying")
    operation_in("retrying")
    entitlement_id = FulfillmentOperation.get_by_id(retrying).entitlement_id
    rows = get(web, "/v1/panel/system/jobs", headers, status="retrying", entitlementId=entitlement_id).json()
    assert [row["id"] for row in rows["operations"]] == [retrying]
    assert get(web, "/v1/panel/system/jobs", headers, status="retrying", operation="extend").json()["operations"] == []
    assert (
        len(get(web, "/v1/panel/system/jobs", headers, status="retrying", operation="create").json()["operations"]) == 2
    )


def test_the_cursor_pages_through_every_row_once(web):
    headers = session_of(web)
    made = {operation_in("failed") for _ in range(5)}
    seen, cursor = [], None
    while True:
        params = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        body = get(web, "/v1/panel/system/jobs", headers, **params).json()
        seen += [row["id"] for row in body["operations"]]
        cursor = body["nextCursor"]
        if cursor is None:
            break
    assert seen == sorted(made, reverse=True)


@pytest.mark.parametrize(
    "params, code",
    [
        ({"limit": "0"}, "invalid_limit"),
        ({"limit": "201"}, "invalid_limit"),
        ({"limit": "abc"}, "invalid_limit"),
        ({"limit": "-1"}, "invalid_limit"),
        ({"limit": "²"}, "invalid_limit"),
        ({"entitlementId": "٣"}, "invalid_entitlement_id"),
        ({"status": "stuck"}, "invalid_status"),
        ({"operation": "delete"}, "invalid_operation"),
        ({"entitlementId": "x1"}, "invalid_entitlement_id"),
        ({"entitlementId": "0"}, "invalid_entitlement_id"),
        ({"cursor": "not-a-cursor"}, "invalid_cursor"),
        ({"cursor": "aWQ6LTE"}, "invalid_cursor"),
    ],
)
def test_bad_listing_parameters_are_400s(web, params, code):
    headers = session_of(web)
    assert_problem(get(web, "/v1/panel/system/jobs", headers, **params), 400, code)


@pytest.mark.parametrize("limit, rows", [("1", 1), ("200", 3)])
def test_limit_boundaries_are_accepted(web, limit, rows):
    headers = session_of(web)
    for _ in range(3):
        operation_in("failed")
    assert len(get(web, "/v1/panel/system/jobs", headers, limit=limit).json()["operations"]) == rows


def test_history_lists_attempts_without_summaries(web):
    headers = session_of(web)
    op_id = operation_in("retrying")
    FulfillmentHistory.create(
        operation=op_id,
        attempt=1,
        status="retrying",
        error_code="remnawave_unavailable",
        correlation_id="c-1",
        request_summary=json.dumps({"squads": [SQUAD_UUID]}),
        response_summary=json.dumps({"url": SUBSCRIPTION_URL}),
    )
    body = get(web, f"/v1/panel/system/jobs/{op_id}/history", headers).json()
    assert body["operationId"] == op_id
    assert [(row["attempt"], row["status"], row["errorCode"]) for row in body["history"]] == [
        (1, "retrying", "remnawave_unavailable")
    ]
    assert set(body["history"][0]) == {"id", "attempt", "status", "errorCode", "correlationId", "createdAt"}
    assert_problem(get(web, "/v1/panel/system/jobs/999999/history", headers), 404, "operation_not_found")
    assert_problem(get(web, "/v1/panel/system/jobs/abc/history", headers), 400, "invalid_operation_id")


# -- retry and cancel --------------------------------------------------------------------------


def test_retry_requeues_the_same_operation_with_its_job_and_an_audit_event(web):
    headers = {**session_of(web), **REASON}
    op_id = operation_in("failed")
    key = FulfillmentOperation.get_by_id(op_id).idempotency_key
    # Its job ran and completed (it found the operation finished), keeping the unique key.
    Job.update(state="completed", finalized_at=utcnow()).where(Job.kind == "fulfillment").execute()
    answer = post(web, f"/v1/panel/system/jobs/{op_id}/retry", headers)
    assert answer.status_code == 200 and answer.json()["operation"]["status"] == "pending"
    op = FulfillmentOperation.get_by_id(op_id)
    assert op.idempotency_key == key and op.completed_at is None and op.next_attempt_at is not None
    live = [j for j in Job.select().where(Job.kind == "fulfillment", Job.state == "available")]
    assert [j.args_dict["operationId"] for j in live] == [op_id]
    audit = AuditEvent.get(AuditEvent.action == "panel.fulfillment.retried")
    assert (audit.category, audit.actor, audit.reason, audit.subject_id) == (
        "system",
        "operator:alice",
        "customer paid, panel was down",
        str(op_id),
    )


def test_retry_of_an_operation_whose_job_was_cancelled_queues_a_new_job(web):
    headers = {**session_of(web), **REASON}
    op_id = operation_in("failed")
    (old,) = Job.select().where(Job.kind == "fulfillment")
    jobs.client.cancel(old.id)
    assert post(web, f"/v1/panel/system/jobs/{op_id}/retry", headers).status_code == 200
    live = list(Job.select().where(Job.kind == "fulfillment", Job.state == "available"))
    assert len(live) == 1 and live[0].id != old.id and live[0].args_dict["operationId"] == op_id


def test_retry_leaves_a_job_still_waiting_for_the_operation_alone(web):
    headers = {**session_of(web), **REASON}
    op_id = operation_in("retrying")
    before = [(j.id, j.state) for j in Job.select().where(Job.kind == "fulfillment")]
    assert post(web, f"/v1/panel/system/jobs/{op_id}/retry", headers).status_code == 200
    assert [(j.id, j.state) for j in Job.select().where(Job.kind == "fulfillment")] == before


def test_cancel_ends_the_operation_with_a_history_row_and_an_audit_event(web):
    headers = {**session_of(web), **REASON}
    op_id = operation_in("retrying")
    answer = post(web, f"/v1/panel/system/jobs/{op_id}/cancel", headers)
    assert answer.status_code == 200
    op = FulfillmentOperation.get_by_id(op_id)
    assert (op.status, op.last_error_code) == ("cancelled", rules.OPERATOR_CANCELLED)
    last = (
        FulfillmentHistory.select()
        .where(FulfillmentHistory.operation == op_id)
        .order_by(FulfillmentHistory.id.desc())
        .first()
    )
    assert (last.status, last.error_code) == ("cancelled", rules.OPERATOR_CANCELLED)
    assert AuditEvent.select().where(AuditEvent.action == "panel.fulfillment.cancelled").count() == 1


@pytest.mark.parametrize("action", ["retry", "cancel"])
def test_a_succeeded_operation_is_a_409_state_conflict_and_stays_succeeded(web, action):
    headers = {**session_of(web), **REASON}
    op_id = operation_in("succeeded")
    assert_problem(post(web, f"/v1/panel/system/jobs/{op_id}/{action}", headers), 409, "state_conflict")
    assert FulfillmentOperation.get_by_id(op_id).status == "succeeded"
    assert AuditEvent.select().where(AuditEvent.action.startswith("panel.")).count() == 0


@pytest.mark.parametrize("action", ["retry", "cancel"])
def test_a_mutation_without_a_reason_is_refused_and_writes_nothing(web, action):
    headers = session_of(web)
    op_id = operation_in("failed")
    for reason in (None, ""):
        sent = {**headers, **({"X-Operator-Reason": reason} if reason is not None else {})}
        assert_problem(post(web, f"/v1/panel/system/jobs/{op_id}/{action}", sent), 400, "reason_required")
    assert FulfillmentOperation.get_by_id(op_id).status == "failed"
    assert AuditEvent.select().where(AuditEvent.action.startswith("panel.")).count() == 0


@pytest.mark.parametrize("action", ["retry", "cancel"])
def test_unknown_and_malformed_operation_ids(web, action):
    headers = {**session_of(web), **REASON}
    assert_problem(post(web, f"/v1/panel/system/jobs/424242/{action}", headers), 404, "operation_not_found")
    for bad in ("abc", "0", "1" * 19, "²"):
        assert_problem(post(web, f"/v1/panel/system/jobs/{bad}/{action}", headers), 400, "invalid_operation_id")


# -- subscription changes (SPEC 2.19) -----------------------------------------------------------


def provisioned():
    """A paid, provisioned subscription: (customer id, subscription id)."""
    op_id = operation_in("succeeded")
    entitlement = Entitlement.get_by_id(FulfillmentOperation.get_by_id(op_id).entitlement_id)
    Entitlement.update(status="active").where(Entitlement.id == entitlement.id).execute()
    Subscription.update(remote_user_id="42", remote_username="sub_x").where(
        Subscription.id == entitlement.subscription_id
    ).execute()
    return Subscription.get_by_id(entitlement.subscription_id).customer_id, entitlement.subscription_id


def change(web, headers, customer_id, subscription_id, body):
    url = f"{web}/v1/panel/customers/{customer_id}/subscriptions/{subscription_id}/operations"
    return requests.post(url, headers=headers, json=body, timeout=10)


def test_an_operator_change_is_queued_audited_and_a_double_submit_reuses_it(web):
    headers = {**session_of(web), **REASON}
    customer_id, subscription_id = provisioned()
    first = change(web, headers, customer_id, subscription_id, {"operation": "disable", "requestId": "form-1"})
    assert first.status_code == 202
    body = first.json()
    assert body["operation"] == "disable" and body["status"] == "pending"
    again = change(web, headers, customer_id, subscription_id, {"operation": "disable", "requestId": "form-1"})
    assert again.status_code == 202 and again.json()["operationId"] == body["operationId"]
    audits = list(AuditEvent.select().where(AuditEvent.action == "panel.subscription.disable"))
    assert [(a.actor, a.reason, a.subject_id) for a in audits] == [
        ("operator:alice", REASON["X-Operator-Reason"], subscription_id)
    ]
    assert Job.select().where(Job.kind == "fulfillment", Job.state == "available").count() >= 1


def test_extend_and_set_limits_carry_their_parameters(web):
    headers = {**session_of(web), **REASON}
    customer_id, subscription_id = provisioned()
    later = (utcnow() + datetime.timedelta(days=90)).isoformat() + "Z"
    answer = change(
        web, headers, customer_id, subscription_id, {"operation": "extend", "requestId": "r1", "endsAt": later}
    )
    assert answer.status_code == 202
    limits = {"operation": "set_limits", "requestId": "r2", "trafficLimitBytes": None, "deviceLimit": 5}
    limited = change(web, headers, customer_id, subscription_id, limits)
    assert limited.status_code == 202
    desired = json.loads(FulfillmentOperation.get_by_id(limited.json()["operationId"]).desired_state)
    assert (desired["trafficAllowanceBytes"], desired["deviceLimit"]) == (None, 5)
    extended = json.loads(FulfillmentOperation.get_by_id(answer.json()["operationId"]).desired_state)
    assert extended["endsAt"].startswith(later[:19])
    # Queued is not applied: the entitlement changes when the panel has the change (SPEC 2.19).
    entitlement = Entitlement.get(Entitlement.subscription == subscription_id)
    assert (entitlement.traffic_allowance_bytes, entitlement.device_limit) == (100 * commerce.GIB, 3)
    assert entitlement.ends_at < datetime.datetime.fromisoformat(later[:19])


def test_replaying_an_extend_returns_the_first_operation_even_once_it_was_applied(web):
    headers = {**session_of(web), **REASON}
    customer_id, subscription_id = provisioned()
    ends_at = (utcnow() + datetime.timedelta(days=90)).replace(microsecond=0)
    body = {"operation": "extend", "requestId": "form-3", "endsAt": ends_at.isoformat() + "Z"}
    first = change(web, headers, customer_id, subscription_id, body)
    assert first.status_code == 202
    again = change(web, headers, customer_id, subscription_id, body)
    assert (again.status_code, again.json()["operationId"]) == (202, first.json()["operationId"])
    # Applied: the entitlement now ends at endsAt, which a new extend could not ask for.
    Entitlement.update(ends_at=ends_at).where(Entitlement.subscription == subscription_id).execute()
    applied = change(web, headers, customer_id, subscription_id, body)
    assert (applied.status_code, applied.json()["operationId"]) == (202, first.json()["operationId"])
    earlier = {**body, "endsAt": (ends_at - datetime.timedelta(days=1)).isoformat() + "Z"}
    assert_problem(change(web, headers, customer_id, subscription_id, earlier), 409, "idempotency_key_reused")
    assert FulfillmentOperation.select().where(FulfillmentOperation.operation == "extend").count() == 1
    assert AuditEvent.select().where(AuditEvent.action == "panel.subscription.extend").count() == 1


@pytest.mark.parametrize(
    "body, other",
    [
        ({"operation": "set_limits", "deviceLimit": 5}, {"deviceLimit": 6}),
        ({"operation": "set_squads", "squadIds": [SQUAD_UUID]}, {"squadIds": []}),
        ({"operation": "disable"}, None),
        ({"operation": "enable"}, None),
        ({"operation": "reset_traffic"}, None),
    ],
    ids=["set_limits", "set_squads", "disable", "enable", "reset_traffic"],
)
def test_every_change_replayed_returns_its_first_operation_and_other_parameters_are_a_409(web, body, other):
    headers = {**session_of(web), **REASON}
    customer_id, subscription_id = provisioned()
    body = {**body, "requestId": "form-4"}
    first = change(web, headers, customer_id, subscription_id, body)
    assert first.status_code == 202
    # The entitlement moves on meanwhile (another change applied): the replay is still the same request.
    entitlement = Entitlement.get(Entitlement.subscription == subscription_id)
    Entitlement.update(ends_at=entitlement.ends_at + datetime.timedelta(days=7)).where(
        Entitlement.id == entitlement.id
    ).execute()
    again = change(web, headers, customer_id, subscription_id, body)
    assert (again.status_code, again.json()["operationId"]) == (202, first.json()["operationId"])
    if other is not None:
        assert_problem(
            change(web, headers, customer_id, subscription_id, {**body, **other}), 409, "idempotency_key_reused"
        )
    assert FulfillmentOperation.select().where(FulfillmentOperation.operation == body["operation"]).count() == 1


@pytest.mark.parametrize(
    "body, status, code",
    [
        ({"operation": "create", "requestId": "a"}, 422, "unsupported_operation"),
        ({"operation": "reconcile", "requestId": "a"}, 422, "unsupported_operation"),
        ({"operation": "explode", "requestId": "a"}, 422, "unsupported_operation"),
        ({"operation": "extend", "requestId": "a"}, 400, "ends_at_required"),
        ({"operation": "extend", "requestId": "a", "endsAt": "tomorrow"}, 400, "invalid_body"),
        ({"operation": "extend", "requestId": "a", "endsAt": "2001-01-01T00:00:00Z"}, 400, "invalid_ends_at"),
        ({"operation": "set_limits", "requestId": "a"}, 400, "limits_required"),
        ({"operation": "set_limits", "requestId": "a", "deviceLimit": -1}, 400, "invalid_limit"),
        ({"operation": "set_limits", "requestId": "a", "deviceLimit": "3"}, 400, "invalid_body"),
        ({"operation": "set_squads", "requestId": "a", "squadIds": "x"}, 400, "invalid_body"),
        ({"requestId": "a"}, 400, "invalid_body"),
    ],
)
def test_bad_changes_are_refused_and_queue_nothing(web, body, status, code):
    headers = {**session_of(web), **REASON}
    customer_id, subscription_id = provisioned()
    before = FulfillmentOperation.select().count()
    assert_problem(change(web, headers, customer_id, subscription_id, body), status, code)
    assert FulfillmentOperation.select().count() == before
    assert AuditEvent.select().where(AuditEvent.action.startswith("panel.subscription")).count() == 0


def test_a_change_needs_a_reason_a_request_id_the_right_customer_and_a_provisioned_slot(web):
    cookie = session_of(web)
    customer_id, subscription_id = provisioned()
    body = {"operation": "enable", "requestId": "x"}
    assert_problem(change(web, cookie, customer_id, subscription_id, body), 400, "reason_required")
    no_id = change(web, {**cookie, **REASON}, customer_id, subscription_id, {"operation": "enable"})
    assert_problem(no_id, 400, "request_id_required")
    named = {**cookie, **REASON, "X-Request-ID": "form-7"}
    assert change(web, named, customer_id, subscription_id, {"operation": "enable"}).status_code == 202
    other_customer = commerce.customer("Mallory").id
    assert_problem(
        change(web, {**cookie, **REASON}, other_customer, subscription_id, body), 404, "subscription_not_found"
    )
    Subscription.update(remote_user_id=None).where(Subscription.id == subscription_id).execute()
    assert_problem(change(web, {**cookie, **REASON}, customer_id, subscription_id, body), 409, "not_provisioned")


# -- maintenance ---------------------------------------------------------------------------------


def test_an_operator_turns_maintenance_on_and_off_with_a_reason_audited(web):
    headers = {**session_of(web), **REASON}
    url = web + "/v1/panel/system/maintenance"
    assert requests.get(url, headers=headers, timeout=10).json()["active"] is False
    answer = requests.post(url, headers=headers, json={"active": True}, timeout=10)
    assert answer.status_code == 200 and answer.json()["active"] is True
    assert answer.json()["reason"] == REASON["X-Operator-Reason"]
    assert requests.post(url, headers=headers, json={"active": False}, timeout=10).json()["active"] is False
    assert [
        (a.action, a.actor) for a in AuditEvent.select().order_by(AuditEvent.id) if a.action.startswith("maint")
    ] == [
        ("maintenance.enabled", "operator:alice"),
        ("maintenance.disabled", "operator:alice"),
    ]


@pytest.mark.parametrize(
    "header",
    [
        "UTF-8''%D0%BE%D0%B1%D0%BD%D0%BE%D0%B2%D0%BB%D0%B5%D0%BD%D0%B8%D0%B5%20%D0%BF%D0%B0%D0%BD%D0%B5%D0%BB%D0%B8",
        "обновление панели".encode(),  # plain UTF-8 bytes, as curl -H sends them
    ],
    ids=["rfc8187", "utf8-bytes"],
)
def test_a_reason_in_cyrillic_reaches_the_audit_as_typed(web, header):
    headers = {**session_of(web), "X-Operator-Reason": header}
    answer = requests.post(web + "/v1/panel/system/maintenance", headers=headers, json={"active": True}, timeout=10)
    assert answer.status_code == 200 and answer.json()["reason"] == "обновление панели"
    assert AuditEvent.get(AuditEvent.action == "maintenance.enabled").reason == "обновление панели"


def test_a_reason_over_500_characters_is_refused_rather_than_cut_and_changes_nothing(web):
    headers = {**session_of(web), "X-Operator-Reason": "a" * 501}
    audited = AuditEvent.select().count()  # signing in is audited too
    answer = requests.post(web + "/v1/panel/system/maintenance", headers=headers, json={"active": True}, timeout=10)
    assert_problem(answer, 400, "reason_too_long")
    assert AuditEvent.select().count() == audited
    headers["X-Operator-Reason"] = "a" * 500  # the most there may be, kept whole
    assert requests.post(web + "/v1/panel/system/maintenance", headers=headers, json={"active": True}, timeout=10).ok
    assert AuditEvent.get(AuditEvent.action == "maintenance.enabled").reason == "a" * 500


def test_a_body_over_64_kib_is_a_413_and_changes_nothing(web):
    headers = {**session_of(web), **REASON, "Content-Type": "application/json"}
    huge = json.dumps({"active": True, "padding": "a" * (70 * 1024)})
    answer = requests.post(web + "/v1/panel/system/maintenance", headers=headers, data=huge, timeout=10)
    assert_problem(answer, 413, "body_too_large")
    assert requests.get(web + "/v1/panel/system/maintenance", headers=headers, timeout=10).json()["active"] is False


def test_maintenance_changes_need_a_reason_and_a_boolean(web):
    headers = session_of(web)
    url = web + "/v1/panel/system/maintenance"
    assert_problem(requests.post(url, headers=headers, json={"active": True}, timeout=10), 400, "reason_required")
    for body in ({"active": "yes"}, {}, []):
        answer = requests.post(url, headers={**headers, **REASON}, json=body, timeout=10)
        assert_problem(answer, 400, "invalid_body")
    assert requests.get(url, headers=headers, timeout=10).json()["active"] is False


# -- permissions ---------------------------------------------------------------------------------

ROUTES = [
    ("POST", "/v1/panel/customers/{customer}/subscriptions/{subscription}/operations", "subscriptions.write"),
    ("GET", "/v1/panel/system/maintenance", "system.read"),
    ("POST", "/v1/panel/system/maintenance", "system.write"),
    ("GET", "/v1/panel/system/jobs", "system.read"),
    ("GET", "/v1/panel/system/jobs/{op}/history", "system.read"),
    ("POST", "/v1/panel/system/jobs/{op}/retry", "system.write"),
    ("POST", "/v1/panel/system/jobs/{op}/cancel", "system.write"),
    ("GET", "/v1/panel/customers", "subscriptions.read"),
    ("GET", "/v1/panel/customers/{customer}", "subscriptions.read"),
    ("GET", "/v1/panel/subscriptions/{subscription}", "subscriptions.read"),
    ("GET", "/v1/panel/customers/{customer}/orders", "payments.read"),
    ("GET", "/v1/panel/customers/{customer}/payments", "payments.read"),
    ("GET", "/v1/panel/customers/{customer}/wallet", "payments.read"),
    ("GET", "/v1/panel/orders/{order}", "payments.read"),
    ("GET", "/v1/panel/payments/{payment}", "payments.read"),
    ("GET", "/v1/panel/orders", "payments.read"),
    ("GET", "/v1/panel/payments", "payments.read"),
    ("POST", "/v1/panel/customers/{customer}/subscriptions/{subscription}/pause", "subscriptions.write"),
    ("POST", "/v1/panel/customers/{customer}/subscriptions/{subscription}/resume", "subscriptions.write"),
    ("POST", "/v1/panel/customers/{customer}/subscriptions/{subscription}/reprovision", "subscriptions.write"),
    ("POST", "/v1/panel/orders/{order}/refund", "payments.write"),
    ("POST", "/v1/panel/gift-cards", "payments.write"),
    ("POST", "/v1/panel/access-codes", "payments.write"),
    ("GET", "/v1/panel/plans", "payments.read"),
    ("POST", "/v1/panel/plans", "payments.write"),
    ("POST", "/v1/panel/plans/{plan}", "payments.write"),
    ("POST", "/v1/panel/addons", "payments.write"),
    ("POST", "/v1/panel/gift-cards/1/revoke", "payments.write"),
    ("POST", "/v1/panel/access-codes/1/revoke", "payments.write"),
    ("POST", "/v1/panel/campaigns", "campaigns.write"),
    ("GET", "/v1/panel/campaigns/{campaign}", "campaigns.write"),
    ("POST", "/v1/panel/campaigns/preview", "campaigns.write"),
    ("POST", "/v1/panel/campaigns/{campaign}/start", "campaigns.write"),
    ("POST", "/v1/panel/campaigns/{campaign}/pause", "campaigns.write"),
    ("POST", "/v1/panel/campaigns/{campaign}/resume", "campaigns.write"),
    ("GET", "/v1/panel/support/tickets", "support.read"),
    ("GET", "/v1/panel/support/tickets/{ticket}", "support.read"),
    ("POST", "/v1/panel/support/tickets/{ticket}/replies", "support.write"),
    ("GET", "/v1/panel/operators", "operators.write"),
    ("GET", "/v1/panel/goods", "payments.read"),
    ("POST", "/v1/panel/goods", "payments.write"),
    ("POST", "/v1/panel/goods/999999", "payments.write"),
    ("POST", "/v1/panel/goods/providers", "payments.write"),
]
# What a permitted route answers when the matrix's world cannot take the change: the subscription is
# provisioned, so there is nothing to re-provision (its own tests cover the success).
REFUSALS_WHEN_ALLOWED = {
    "/v1/panel/customers/{customer}/subscriptions/{subscription}/reprovision": (409,),
    "/v1/panel/gift-cards/1/revoke": (404,),  # on PostgreSQL the card issued just before may have another id
    "/v1/panel/access-codes/1/revoke": (404,),
    "/v1/panel/campaigns/{campaign}/start": (409,),  # the campaign is sending already (pause and resume succeed)
    "/v1/panel/goods": (404,),  # no goods provider in this world (tests/web/test_goods_catalogue.py adds one)
    "/v1/panel/goods/999999": (404,),
}
# Bodies of the routes that take more than the operator changes' {operation, requestId}.
BODIES = {
    "/v1/panel/system/maintenance": {"active": True},
    "/v1/panel/campaigns": {"kind": "announcement", "text": "Maintenance tonight at 02:00 UTC."},
    "/v1/panel/support/tickets/{ticket}/replies": {"text": "Try the Helsinki server, please."},
    "/v1/panel/plans": {"code": "quarter", "name": "Quarter", "durationDays": 90, "prices": {"RUB": 49900}},
    "/v1/panel/plans/{plan}": {"graceHours": 48, "prices": {"RUB": 49900}},
    "/v1/panel/addons": {"code": "more-devices", "name": "More devices", "extraDevices": 2, "prices": {"RUB": 9900}},
    "/v1/panel/goods": {"code": "v", "name": "Voucher", "providerId": 999999, "sku": "v-1", "prices": {"RUB": 100}},
    "/v1/panel/goods/999999": {"active": False},
    "/v1/panel/goods/providers": {"name": "p", "url": "https://goods.example", "token": "token-0123456789"},
}
# Routes for any signed-in operator: who one is, Home (its sections follow the permissions), one's own time zone.
SESSION_ROUTES = [
    ("GET", "/v1/panel/session"),
    ("GET", "/v1/panel/overview"),
    ("GET", "/v1/panel/session/time-zone"),
    ("PUT", "/v1/panel/session/time-zone"),
]
PERMISSION_SETS = [
    [],
    ["system.read"],
    ["system.write"],
    ["subscriptions.read", "subscriptions.write"],
    ["subscriptions.write"],
    ["payments.read"],
    ["payments.read", "payments.write"],
    ["campaigns.write"],
    ["support.read"],
    ["support.read", "support.write"],
    ["operators.write"],
    EVERYTHING,
]


def body_for(template, index, plan_id):
    """A body each route takes when the operator may use it."""
    if template in BODIES:
        return BODIES[template]
    if template.endswith("/gift-cards"):
        return {"planId": plan_id, "validDays": 30}
    if template.endswith("/access-codes"):
        return {"planId": plan_id, "maxActivations": 3}
    return {"operation": "enable", "requestId": f"r{index}"}


def paths(template, op=1, customer="c", subscription="s", order=1, payment=1, campaign=1, ticket=1, plan=1):
    return template.format(
        op=op, customer=customer, subscription=subscription, order=order, payment=payment, campaign=campaign,
        ticket=ticket, plan=plan,
    )  # fmt: skip


def paid_at_a_provider(order_id):
    from models.payments import PaymentIntent

    order = Order.get_by_id(order_id)
    return PaymentIntent.create(
        order=order_id,
        provider="yookassa",
        provider_payment_id=f"pay-{order_id}",
        amount_minor=order.amount_minor,
        currency=order.currency,
        status="succeeded",
        idempotence_key=f"idem-{order_id}",
    ).id


@pytest.mark.parametrize("permissions", PERMISSION_SETS, ids=lambda p: "+".join(p) or "none")
def test_permission_matrix(web, permissions):
    headers = {**session_of(web, permissions=permissions), **REASON}
    customer_id, subscription_id = provisioned()
    entitlement = Entitlement.get(Entitlement.subscription == subscription_id)
    order_id = entitlement.order_id
    payment_id = paid_at_a_provider(order_id)
    Customer.update(telegram_id=424242).where(Customer.id == customer_id).execute()
    campaign_id = create_campaign("announcement", "Hello", "alice", "matrix").id
    ticket_id = customer_writes(customer_id, 424242, "My VPN is slow")[0].id
    for index, (method, template, needed) in enumerate(ROUTES):
        op_id = operation_in("failed")
        body = body_for(template, index, entitlement.plan_id)
        path = paths(template, op_id, customer_id, subscription_id, order_id, payment_id, campaign_id, ticket_id,
                     entitlement.plan_id)  # fmt: skip
        answer = requests.request(method, web + path, headers=headers, json=body, timeout=10)
        if needed in permissions:
            allowed = (200, 201, 202) + REFUSALS_WHEN_ALLOWED.get(template, ())
            assert answer.status_code in allowed, (method, template, permissions, answer.text)
        else:
            assert_problem(answer, 403, "forbidden")
            assert FulfillmentOperation.get_by_id(op_id).status == "failed"
    for method, template in SESSION_ROUTES:
        answer = requests.request(method, web + template, headers=headers, json={"timeZone": "UTC"}, timeout=10)
        assert answer.status_code == 200, (method, template, permissions)
    if "system.write" not in permissions:
        assert AuditEvent.select().where(AuditEvent.action.startswith("panel.fulfillment.")).count() == 0
        assert AuditEvent.select().where(AuditEvent.action.startswith("maintenance.")).count() == 0
    if "subscriptions.write" not in permissions:
        assert AuditEvent.select().where(AuditEvent.action.startswith("panel.subscription")).count() == 0
        assert Entitlement.get(Entitlement.subscription == subscription_id).paused_at is None
    if "payments.write" not in permissions:
        assert AuditEvent.select().where(AuditEvent.action == "panel.order.refunded").count() == 0
        assert Order.get_by_id(order_id).status != "refunded"
        assert (GiftCard.select().count(), AccessCode.select().count()) == (0, 0)
        assert AuditEvent.select().where(AuditEvent.action.startswith("catalogue.")).count() == 0
    if "campaigns.write" not in permissions:
        assert Campaign.select().count() == 1  # the test's own
        assert Campaign.get_by_id(campaign_id).status == "sending"
        assert AuditEvent.select().where(AuditEvent.action.startswith("campaign.")).count() == 1
    if "support.write" not in permissions:
        assert SupportMessage.select().where(SupportMessage.author == "operator").count() == 0


def test_every_panel_route_needs_a_session(web):
    op_id = operation_in("failed")
    routes = ROUTES + [(method, template, None) for method, template in SESSION_ROUTES]
    for method, template, _ in routes:
        for headers in ({}, {"Cookie": "omniflow_session=forged-token"}):
            answer = requests.request(
                method,
                web + paths(template, op=op_id),
                headers={**headers, **REASON},
                json={"timeZone": "UTC", "requestId": "x"},
                timeout=10,
            )
            assert_problem(answer, 401, "unauthorized")
    assert FulfillmentOperation.get_by_id(op_id).status == "failed"


# -- leaks --------------------------------------------------------------------------------------


def test_no_panel_answer_carries_a_subscription_link_squad_ids_or_a_token(web):
    headers = {**session_of(web), **REASON}
    op_ids = [with_secrets(operation_in(status)) for status in ("failed", "retrying", "cancelled")]
    answers = []
    for status in ("failed", "retrying", "cancelled", "pending"):
        answers.append(get(web, "/v1/panel/system/jobs", headers, status=status))
    for op_id in op_ids:
        answers.append(get(web, f"/v1/panel/system/jobs/{op_id}/history", headers))
    answers.append(post(web, f"/v1/panel/system/jobs/{op_ids[0]}/retry", headers))
    answers.append(post(web, f"/v1/panel/system/jobs/{op_ids[1]}/cancel", headers))
    for answer in answers:
        assert answer.status_code == 200
        for secret in (SUBSCRIPTION_URL, SQUAD_UUID, BEARER, "leaky-token-value"):
            assert secret not in answer.text
