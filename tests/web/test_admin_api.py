"""SPEC 4.1, 4.3, 11, 12: health, and the admin API over the operator token,
with its parameters, limits, error codes and redaction."""

import json

import pytest
import requests

from jobs import insert
from models.base import utcnow
from models.jobs import Job
from models.ops import AuditEvent, OutboxEvent
from tests.web.conftest import OPERATOR_TOKEN

AUTH = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}


def get(web, path, headers=AUTH, **params):
    return requests.get(web + path, headers=headers, params=params, timeout=10)


def post(web, path, headers=AUTH):
    return requests.post(web + path, headers=headers, timeout=10)


def in_state(state, errors=None):
    job_id = insert("t_record", {"n": 1, "secret": "do-not-echo"}).job_id
    final = state in ("completed", "discarded", "cancelled")
    Job.update(
        state=state,
        attempt=1,
        finalized_at=utcnow() if final else None,
        errors=json.dumps(errors or []),
    ).where(Job.id == job_id).execute()
    return job_id


def assert_problem(response, status, code):
    assert response.status_code == status
    assert response.headers["Content-Type"].startswith("application/problem+json")
    body = response.json()
    assert body["code"] == code and body["status"] == status and body["requestId"]
    assert response.headers["X-Request-ID"] == body["requestId"]


def test_healthz_and_readyz(web):
    assert requests.get(web + "/healthz", timeout=5).json() == {"status": "ok"}
    ready = requests.get(web + "/readyz", timeout=5)
    assert ready.status_code == 200 and ready.json()["status"] == "ready"


@pytest.mark.parametrize(
    "headers", [{}, {"Authorization": "Bearer wrong-token-0123456789abcdef"}, {"Authorization": OPERATOR_TOKEN}]
)
@pytest.mark.parametrize(
    "method, path",
    [
        ("GET", "/v1/admin/jobs"),
        ("POST", "/v1/admin/jobs/1/retry"),
        ("POST", "/v1/admin/jobs/1/cancel"),
        ("GET", "/v1/admin/outbox"),
    ],
)
def test_admin_routes_refuse_a_missing_or_wrong_token(web, headers, method, path):
    job_id = in_state("discarded")
    response = requests.request(method, web + path, headers=headers, timeout=10)
    assert_problem(response, 401, "unauthorized")
    assert Job.get_by_id(job_id).state == "discarded"


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER", "bEaReR", "Bearer  "])
def test_the_bearer_scheme_is_case_insensitive(web, scheme):
    assert get(web, "/v1/admin/jobs", headers={"Authorization": f"{scheme} {OPERATOR_TOKEN}"}).status_code == 200


@pytest.mark.parametrize("header", [f"Basic {OPERATOR_TOKEN}", f"Bearer{OPERATOR_TOKEN}", OPERATOR_TOKEN, "bearer "])
def test_another_scheme_or_no_scheme_is_refused(web, header):
    assert_problem(get(web, "/v1/admin/jobs", headers={"Authorization": header}), 401, "unauthorized")


def test_default_listing_is_the_dead_letter_view_with_summarised_args_and_redacted_errors(web):
    secret_error = [
        {"at": "x", "attempt": 1, "error": "panel said https://vpn.example/api/sub/AbC123xyz token=s3cr3t-value"}
    ]
    dead = {in_state("discarded", secret_error), in_state("cancelled")}
    in_state("available")
    in_state("completed")
    response = get(web, "/v1/admin/jobs")
    assert response.status_code == 200
    body = response.json()
    assert body["state"] == "dead_letter" and body["limit"] == 50
    assert {row["id"] for row in body["jobs"]} == dead
    row = next(r for r in body["jobs"] if r["errorCount"] == 1)
    assert set(row) == {
        "id",
        "kind",
        "queue",
        "state",
        "attempt",
        "maxAttempts",
        "createdAt",
        "attemptedAt",
        "errorCount",
        "lastError",
        "args",
    }
    assert row["args"] == {"keys": ["n", "secret"]}
    for leaked in ("do-not-echo", "AbC123xyz", "s3cr3t-value"):
        assert leaked not in response.text


@pytest.mark.parametrize("state", ["retryable", "running", "available", "scheduled", "completed"])
def test_each_listable_state_lists_only_that_state(web, state):
    wanted = in_state(state)
    in_state("discarded")
    body = get(web, "/v1/admin/jobs", state=state).json()
    assert [row["id"] for row in body["jobs"]] == [wanted]


@pytest.mark.parametrize("state", ["bogus", "pending", "discarded", "DEAD_LETTER"])
def test_unknown_state_is_invalid_state(web, state):
    assert_problem(get(web, "/v1/admin/jobs", state=state), 400, "invalid_state")


@pytest.mark.parametrize(
    "limit, ok",
    [
        ("0", False),
        ("1", True),
        ("200", True),
        ("201", False),
        ("abc", False),
        ("-1", False),
        ("1.5", False),
        ("²", False),
    ],
)
def test_limit_must_be_one_to_two_hundred(web, limit, ok):
    for _ in range(3):
        in_state("discarded")
    response = get(web, "/v1/admin/jobs", limit=limit)
    if ok:
        assert response.status_code == 200 and len(response.json()["jobs"]) == min(int(limit), 3)
    else:
        assert_problem(response, 400, "invalid_limit")


def test_retry_and_cancel_follow_the_state_rules(web):
    dead = in_state("discarded")
    retried = post(web, f"/v1/admin/jobs/{dead}/retry")
    assert retried.status_code == 200 and retried.json()["job"]["state"] == "available"
    running = in_state("running")
    assert_problem(post(web, f"/v1/admin/jobs/{running}/retry"), 422, "job_mutation_rejected")
    cancelled = post(web, f"/v1/admin/jobs/{running}/cancel")
    assert cancelled.status_code == 200 and cancelled.json()["job"]["state"] == "cancelled"
    assert_problem(post(web, f"/v1/admin/jobs/{running}/cancel"), 422, "job_mutation_rejected")
    assert Job.get_by_id(running).state == "cancelled"


def audit_trail():
    events = AuditEvent.select().order_by(AuditEvent.id)
    return [(a.action, a.actor, a.reason, a.subject_type, a.subject_id) for a in events]


def test_retry_and_cancel_are_audited_with_the_token_as_actor_and_a_refusal_writes_none(web):
    dead, running = in_state("discarded"), in_state("running")
    why = {**AUTH, "X-Operator-Reason": "panel is back"}
    assert post(web, f"/v1/admin/jobs/{dead}/retry", why).status_code == 200
    assert post(web, f"/v1/admin/jobs/{running}/cancel").status_code == 200
    assert audit_trail() == [
        ("job.retried", "token", "panel is back", "job", str(dead)),
        ("job.cancelled", "token", None, "job", str(running)),
    ]
    assert_problem(post(web, f"/v1/admin/jobs/{running}/cancel", why), 422, "job_mutation_rejected")
    assert_problem(post(web, "/v1/admin/jobs/999999/retry", why), 404, "job_not_found")
    assert len(audit_trail()) == 2


@pytest.mark.parametrize(
    "job_id, status, code",
    [
        ("999999", 404, "job_not_found"),
        ("abc", 400, "invalid_job_id"),
        ("-3", 400, "invalid_job_id"),
        ("1e3", 400, "invalid_job_id"),
        ("0", 400, "invalid_job_id"),
        ("²", 400, "invalid_job_id"),
        ("٣", 400, "invalid_job_id"),
        ("1" * 19, 400, "invalid_job_id"),
    ],
)
def test_malformed_or_unknown_job_ids(web, job_id, status, code):
    assert_problem(post(web, f"/v1/admin/jobs/{job_id}/retry"), status, code)
    assert_problem(post(web, f"/v1/admin/jobs/{job_id}/cancel"), status, code)


def test_outbox_reports_pending_count_and_oldest_age(web):
    assert get(web, "/v1/admin/outbox").json() == {"pendingCount": 0, "oldestAgeSeconds": 0}
    import datetime

    OutboxEvent.create(topic="order.paid", payload="{}", created_at=utcnow() - datetime.timedelta(seconds=90))
    OutboxEvent.create(topic="order.paid", payload="{}", created_at=utcnow())
    OutboxEvent.create(
        topic="order.paid", payload="{}", created_at=utcnow() - datetime.timedelta(hours=5), published_at=utcnow()
    )
    body = get(web, "/v1/admin/outbox").json()
    assert body["pendingCount"] == 2 and 89 <= body["oldestAgeSeconds"] <= 100


def test_unknown_routes_and_methods_answer_problems_and_the_request_id_is_echoed(web):
    assert_problem(get(web, "/v1/nothing-here"), 404, "not_found")
    response = requests.get(web + "/v1/admin/jobs", headers={**AUTH, "X-Request-ID": "req-abc-1"}, timeout=5)
    assert response.headers["X-Request-ID"] == "req-abc-1"


def test_a_process_without_a_migrated_queue_answers_jobs_unavailable(tmp_path):
    import threading

    import waitress

    from config.settings import load_settings
    from tests.support import backends
    from web.app import create_app

    database = backends.bind(f"sqlite:///{tmp_path / 'empty.sqlite3'}")  # never migrated
    server = waitress.create_server(
        create_app(load_settings({"APP_OPERATOR_TOKEN": OPERATOR_TOKEN})), host="127.0.0.1", port=0, threads=2
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.effective_port}"
    try:
        assert_problem(get(base, "/v1/admin/jobs"), 503, "jobs_unavailable")
        assert_problem(post(base, "/v1/admin/jobs/1/retry"), 503, "jobs_unavailable")
        assert requests.get(base + "/readyz", timeout=5).status_code == 503
        assert requests.get(base + "/healthz", timeout=5).status_code == 200
    finally:
        server.close()
        thread.join(5)
        database.close()


def test_maintenance_switch_needs_a_reason_is_audited_and_holds_fulfillment(web):
    from models.ops import AuditEvent
    from ops import maintenance

    assert get(web, "/v1/admin/maintenance").json() == {"active": False, "since": None, "reason": None}
    for body in ({"active": True}, {"active": True, "reason": "  "}, {"active": "yes", "reason": "x"}, [1]):
        response = requests.post(web + "/v1/admin/maintenance", headers=AUTH, json=body, timeout=5)
        assert response.status_code == 400 and response.json()["code"] in ("reason_required", "invalid_body")
    not_json = requests.post(
        web + "/v1/admin/maintenance", headers={**AUTH, "Content-Type": "application/json"}, data="{not", timeout=5
    )
    assert_problem(not_json, 400, "invalid_body")
    assert not maintenance.is_active() and AuditEvent.select().count() == 0

    on = requests.post(
        web + "/v1/admin/maintenance", headers=AUTH, json={"active": True, "reason": "panel upgrade"}, timeout=5
    )
    assert on.status_code == 200 and on.json()["active"] is True and on.json()["reason"] == "panel upgrade"
    assert maintenance.is_active()
    audit = AuditEvent.get()
    assert (audit.action, audit.reason, audit.category) == ("maintenance.enabled", "panel upgrade", "system")
    off = requests.post(
        web + "/v1/admin/maintenance", headers=AUTH, json={"active": False, "reason": "done"}, timeout=5
    )
    assert off.json()["active"] is False and not maintenance.is_active()
    assert_problem(
        requests.post(web + "/v1/admin/maintenance", json={"active": True, "reason": "x"}, timeout=5),
        401,
        "unauthorized",
    )


def test_a_dead_fulfillment_job_of_a_failed_operation_is_not_retried_by_its_row_and_the_answer_says_what_to_retry(web):
    from models.fulfillment import FulfillmentOperation
    from tests.web.test_panel_api import operation_in

    failed = operation_in("failed", "invalid_desired_state")
    job = Job.select().where(Job.kind == "fulfillment").order_by(Job.id.desc()).first()
    assert job.args_dict["operationId"] == failed
    Job.update(state="discarded", finalized_at=utcnow()).where(Job.id == job.id).execute()

    answer = post(web, f"/v1/admin/jobs/{job.id}/retry")

    assert_problem(answer, 422, "job_mutation_rejected")
    assert f"/v1/panel/system/jobs/{failed}/retry" in answer.json()["detail"]
    assert Job.get_by_id(job.id).state == "discarded"  # still in the dead letters, where an operator sees it
    assert FulfillmentOperation.get_by_id(failed).status == "failed"
    assert audit_trail() == []
