"""The admin API over the operator bearer token (SPEC 4.1, 4.3).

GET  /v1/admin/jobs?state=&limit=       queue rows (default: the dead letters)
POST /v1/admin/jobs/{jobID}/retry       back to available (River's rules), audited (actor `token`)
POST /v1/admin/jobs/{jobID}/cancel      audited (actor `token`); X-Operator-Reason, when sent, is the audit's reason
GET  /v1/admin/outbox                   {pendingCount, oldestAgeSeconds}
GET  /v1/admin/maintenance              the maintenance switch (SPEC 9)
POST /v1/admin/maintenance              {"active": bool, "reason": "..."}: turn it on or off (audited)

Job args are summarised (their keys), never echoed; the last error is
redacted; the token is compared in constant time.
"""

import datetime
from functools import wraps

import bottle
from peewee import fn

from jobs import JobMutationRejected, JobNotFound, client
from jobs.engine.states import DEAD_LETTER_STATES
from models.base import db, utcnow
from models.ops import MaintenanceState, OutboxEvent
from ops import maintenance, queue_changes
from web import problems
from web.answers import (
    answered,
    bearer_refusal,
    id_param,
    iso,
    json_answer,
    json_body,
    limit_param,
    require_schema,
)
from web.problems import Problem
from web.reasons import header_reason, within_limit

LISTABLE_STATES = {
    "dead_letter": DEAD_LETTER_STATES,
    "retryable": ("retryable",),
    "running": ("running",),
    "available": ("available",),
    "scheduled": ("scheduled",),
    "completed": ("completed",),
}
DEFAULT_LIMIT = 50
MAX_LIMIT = 200
ACTOR = "token"  # who the audit names for a change made with the operator token


def job_json(view):
    return {
        "id": view.id,
        "kind": view.kind,
        "queue": view.queue,
        "state": view.state,
        "attempt": view.attempt,
        "maxAttempts": view.max_attempts,
        "createdAt": iso(view.created_at),
        "attemptedAt": iso(view.attempted_at),
        "errorCount": view.error_count,
        "lastError": view.last_error,
        "args": {"keys": sorted(view.args)},
    }


def _parse_job_id(raw):
    return id_param(raw, problems.INVALID_JOB_ID, "a job id")


def build(operator_token):
    app = bottle.Bottle()
    problems.install(app)

    def guarded(route):
        @wraps(route)
        def wrapper(*args, **kwargs):
            refusal = bearer_refusal(operator_token)
            if refusal is not None:
                return refusal

            def run():
                require_schema(problems.JOBS_UNAVAILABLE, "the job queue")
                return route(*args, **kwargs)

            return answered(run)

        return wrapper

    @app.get("/v1/admin/jobs")
    @guarded
    def list_jobs():
        state = bottle.request.query.get("state") or "dead_letter"
        if state not in LISTABLE_STATES:
            raise Problem(400, problems.INVALID_STATE, f"state must be one of {', '.join(LISTABLE_STATES)}")
        limit = limit_param(bottle.request.query.get("limit"), DEFAULT_LIMIT, MAX_LIMIT)
        views = client.list(LISTABLE_STATES[state], limit=limit)
        return json_answer(200, {"state": state, "limit": limit, "jobs": [job_json(v) for v in views]})

    @app.post("/v1/admin/jobs/<job_id>/retry")
    @guarded
    def retry_job(job_id):
        return _mutate(_parse_job_id(job_id), queue_changes.retry_job)

    @app.post("/v1/admin/jobs/<job_id>/cancel")
    @guarded
    def cancel_job(job_id):
        return _mutate(_parse_job_id(job_id), queue_changes.cancel_job)

    @app.get("/v1/admin/outbox")
    @guarded
    def outbox():
        pending = OutboxEvent.select().where(OutboxEvent.published_at.is_null())
        oldest = pending.select(fn.MIN(OutboxEvent.created_at)).scalar()
        if isinstance(oldest, str):  # SQLite answers an aggregate as text
            oldest = datetime.datetime.fromisoformat(oldest)
        age = max(0, int((utcnow() - oldest).total_seconds())) if oldest else 0
        return json_answer(200, {"pendingCount": pending.count(), "oldestAgeSeconds": age})

    @app.get("/v1/admin/maintenance")
    @guarded
    def maintenance_state():
        return json_answer(200, maintenance_json())

    @app.post("/v1/admin/maintenance")
    @guarded
    def set_maintenance():
        body = json_body()
        active, reason = body.get("active"), body.get("reason")
        if not isinstance(active, bool):
            raise Problem(400, problems.INVALID_BODY, "active must be true or false")
        if not isinstance(reason, str) or not reason.strip():
            raise Problem(400, problems.REASON_REQUIRED, "a reason is required to change maintenance mode")
        reason = within_limit(reason.strip())
        with db.atomic():
            maintenance.set_mode(active, reason, actor=ACTOR)
        return json_answer(200, maintenance_json())

    return app


def maintenance_json():
    state = MaintenanceState.get_by_id(maintenance.MAINTENANCE_ROW)
    return {"active": bool(state.active), "since": iso(state.since), "reason": state.reason}


def _mutate(job_id, change):
    reason = header_reason() or None
    try:
        with db.atomic():
            view = change(job_id, ACTOR, reason)
    except JobNotFound:
        raise Problem(404, problems.JOB_NOT_FOUND, f"job {job_id} does not exist") from None
    except JobMutationRejected as rejected:
        raise Problem(422, problems.JOB_MUTATION_REJECTED, str(rejected)) from None
    return json_answer(200, {"job": job_json(view)})
