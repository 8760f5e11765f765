"""The panel API for operators signed in with a session (SPEC 4.2, 4.5, 12.1).

POST   /v1/panel/session                          sign in {username, password}: session cookie
DELETE /v1/panel/session                          sign out
GET    /v1/panel/session                          who is signed in, with which permissions
GET    /v1/panel/system/jobs                      fulfillment operations (system.read)
GET    /v1/panel/system/jobs/{id}/history         their attempts (system.read)
POST   /v1/panel/system/jobs/{id}/retry|cancel    (system.write, X-Operator-Reason)
POST   /v1/panel/customers/{c}/subscriptions/{s}/operations   an operator change (subscriptions.write, SPEC 2.19)
GET    /v1/panel/system/maintenance               the maintenance switch (system.read)
POST   /v1/panel/system/maintenance {active}      turn it on or off (system.write, X-Operator-Reason)
GET    /v1/panel/system/outbox/destinations       where events are published, with undelivered counts (system.read)
POST   /v1/panel/system/outbox/destinations {url, topics, secret}   add one (system.write, X-Operator-Reason)
DELETE /v1/panel/system/outbox/destinations/{id}  remove one (system.write, X-Operator-Reason)
GET    /v1/panel/system/blocklists                blocklist sources: refresh, status, counts (system.read)
POST   /v1/panel/system/blocklists {url, token?}  add one (system.write, X-Operator-Reason)
DELETE /v1/panel/system/blocklists/{id}           remove one (system.write, X-Operator-Reason)

The shop's back office (customers, orders, payments, wallets, refunds, pause and
resume, Home) is web/backoffice.py, built on `signed_in` and `operator_reason` here.

The session cookie is HttpOnly and SameSite=Strict, so another site can
neither read it nor send it; a change must also come from the panel's own
origin and a JSON body be sent as application/json (web/guards.py). Every
mutation but a support reply needs the `X-Operator-Reason` header, and each
writes its audit event in the mutation's own transaction. Rows carry what an
operator acts on (times, operation, attempts, error code, correlation id),
never the request or response summaries or the desired state. A
destination's signing secret goes in once, sealed, and never comes out; its
URL is shown by origin only (a path may carry a token). A blocklist
source's token is the same: sealed, never shown, its URL by origin only.
"""

import base64
import datetime
from functools import wraps

import bottle

from fulfillment import changes, repair
from fulfillment.enqueue import FulfillmentRequestRejected
from models.base import db
from models.fulfillment import OPERATION_STATUSES, OPERATIONS, FulfillmentHistory, FulfillmentOperation
from ops import blocklists, maintenance, operators, outbox, sealing
from web import problems
from web.admin import maintenance_json
from web.answers import (
    answered,
    bad_cursor,
    client_address,
    cursor_text,
    id_param,
    iso,
    json_answer,
    json_body,
    limit_param,
    parsed_id,
    require_schema,
)
from web.problems import Problem
from web.reasons import REASON_HEADER, header_reason

SESSION_COOKIE = "omniflow_session"
IDLE_CONFIG = "omniflow.operator_idle"
DEFAULT_PAGE = 25
MAX_PAGE = 200
DEFAULT_STATUS = "failed"


def operation_json(op):
    return {
        "id": op.id,
        "entitlementId": op.entitlement_id,
        "operation": op.operation,
        "status": op.status,
        "attemptCount": op.attempt_count,
        "errorCode": op.last_error_code,
        "correlationId": op.correlation_id,
        "createdAt": iso(op.created_at),
        "nextAttemptAt": iso(op.next_attempt_at),
        "completedAt": iso(op.completed_at),
    }


def history_json(row):
    return {
        "id": row.id,
        "attempt": row.attempt,
        "status": row.status,
        "errorCode": row.error_code,
        "correlationId": row.correlation_id,
        "createdAt": iso(row.created_at),
    }


def destination_json(destination, counts):
    undelivered = counts.get(destination.id, dict.fromkeys(outbox.COUNTED, 0))
    topics = outbox.topics_of(destination.topics)
    return {
        "id": destination.id,
        "url": outbox.display_url(destination.url),
        "topics": [outbox.ALL_TOPICS] if topics == outbox.ALL_TOPICS else topics,
        "active": bool(destination.active),
        "createdAt": iso(destination.created_at),
        **undelivered,
    }


def blocklist_source_json(source, blocked):
    return {
        "id": source.id,
        "url": outbox.display_url(source.url),
        "hasToken": bool(getattr(source, "has_token", False)),
        "active": bool(source.active),
        "status": source.status,
        "lastRefreshAt": iso(source.last_refresh_at),
        "lastSuccessAt": iso(source.last_success_at),
        "listChangedAt": iso(source.list_changed_at),
        "lastError": source.last_error,
        "failureCount": source.failure_count,
        "entryCount": source.entry_count,
        "blockedCustomers": blocked.get(source.id, 0),
        "createdAt": iso(source.created_at),
    }


def blocklist_sources_json():
    blocked = blocklists.blocked_counts()
    return [blocklist_source_json(source, blocked) for source in blocklists.active_sources()]


def encode_cursor(last_id):
    return base64.urlsafe_b64encode(f"id:{last_id}".encode()).decode().rstrip("=")


def decode_cursor(raw):
    """The row id a keyset cursor names, or a 400 invalid_cursor (a number no row id can be included)."""
    text = cursor_text(raw)
    row_id = parsed_id(text[3:]) if text.startswith("id:") else None
    if row_id is None:
        raise bad_cursor()
    return row_id


def operations_page(status, operation, entitlement_id, cursor, limit):
    """One keyset page of operations, newest first: (rows, the next page's cursor or None)."""
    rows = FulfillmentOperation.select().where(FulfillmentOperation.status == status)
    if operation:
        rows = rows.where(FulfillmentOperation.operation == operation)
    if entitlement_id:
        rows = rows.where(FulfillmentOperation.entitlement == entitlement_id)
    if cursor:
        rows = rows.where(FulfillmentOperation.id < decode_cursor(cursor))
    page = list(rows.order_by(FulfillmentOperation.id.desc()).limit(limit + 1))
    return page[:limit], encode_cursor(page[limit - 1].id) if len(page) > limit else None


def operator_reason():
    """The X-Operator-Reason of a mutation, or a 400 reason_required."""
    reason = header_reason()
    if not reason:
        raise Problem(400, problems.REASON_REQUIRED, f"the {REASON_HEADER} header is required for every change")
    return reason


def require_database():
    """503 database_unavailable, like the admin API's 503, when the database is unreachable or not migrated."""
    require_schema(problems.DATABASE_UNAVAILABLE, "the database")


def session_idle():
    """How long a session lasts unused: APP_OPERATOR_IDLE_MINUTES, which web/app.py puts in the app's config."""
    return bottle.request.app.config.get(IDLE_CONFIG, operators.SESSION_IDLE)


def current_operator():
    """The operator of the request's live session (this use keeps it alive), or None."""
    return operators.session_operator(bottle.request.get_cookie(SESSION_COOKIE), idle=session_idle())


def signed_in(permission=None):
    """The route needs a live session, and `permission` when given (403 otherwise)."""

    def decorate(route):
        @wraps(route)
        def wrapper(*args, **kwargs):
            def run():
                require_database()
                operator = current_operator()
                if operator is None:
                    raise Problem(401, problems.UNAUTHORIZED, "sign in first (the session is missing or expired)")
                if permission and permission not in operator.permission_set:
                    raise Problem(403, problems.FORBIDDEN, f"this needs the {permission} permission")
                return route(operator, *args, **kwargs)

            return answered(run)

        return wrapper

    return decorate


def build(secure_cookies=True):
    app = bottle.Bottle()
    problems.install(app)

    @app.post("/v1/panel/session")
    def sign_in():
        def run():
            require_database()
            body = json_body()
            username, password = body.get("username"), body.get("password")
            if not isinstance(username, str) or not isinstance(password, str) or not username or not password:
                raise Problem(400, problems.INVALID_BODY, "username and password are required strings")
            try:
                operator = operators.authenticate(username[:200], password[:1024], client_address())
            except operators.TooManyAttempts:
                bottle.response.set_header("Retry-After", str(int(operators.FAILURE_WINDOW.total_seconds())))
                raise Problem(
                    429,
                    problems.TOO_MANY_ATTEMPTS,
                    "too many failed sign-ins for this username from this address; try again later",
                ) from None
            if operator is None:
                raise Problem(401, problems.INVALID_CREDENTIALS, "unknown username or wrong password")
            token = operators.open_session(operator, idle=session_idle())
            bottle.response.set_cookie(
                SESSION_COOKIE,
                token,
                path="/",
                httponly=True,
                samesite="strict",
                secure=secure_cookies,
                max_age=int(operators.SESSION_TTL.total_seconds()),
            )
            return json_answer(200, _whoami(operator))

        return answered(run)

    @app.delete("/v1/panel/session")
    def sign_out():
        def run():
            require_database()
            operators.close_session(bottle.request.get_cookie(SESSION_COOKIE))
            bottle.response.delete_cookie(
                SESSION_COOKIE, path="/", httponly=True, samesite="strict", secure=secure_cookies
            )
            bottle.response.status = 204
            bottle.response.set_header(problems.REQUEST_ID_HEADER, problems.request_id())
            return ""

        return answered(run)

    @app.get("/v1/panel/session")
    @signed_in()
    def whoami(operator):
        return json_answer(200, _whoami(operator))

    @app.get("/v1/panel/system/jobs")
    @signed_in(operators.SYSTEM_READ)
    def list_operations(operator):
        query = bottle.request.query
        status = query.get("status") or DEFAULT_STATUS
        if status not in OPERATION_STATUSES:
            raise Problem(400, problems.INVALID_STATUS, f"status must be one of {', '.join(OPERATION_STATUSES)}")
        limit = limit_param(query.get("limit"), DEFAULT_PAGE, MAX_PAGE)
        operation = query.get("operation") or None
        if operation and operation not in OPERATIONS:
            raise Problem(400, problems.INVALID_OPERATION, f"operation must be one of {', '.join(OPERATIONS)}")
        entitlement = query.get("entitlementId")
        entitlement_id = (
            id_param(entitlement, problems.INVALID_ENTITLEMENT_ID, "entitlementId") if entitlement else None
        )
        page, next_cursor = operations_page(status, operation, entitlement_id, query.get("cursor"), limit)
        return json_answer(
            200,
            {
                "status": status,
                "limit": limit,
                "operations": [operation_json(op) for op in page],
                "nextCursor": next_cursor,
            },
        )

    @app.get("/v1/panel/system/jobs/<operation_id>/history")
    @signed_in(operators.SYSTEM_READ)
    def operation_history(operator, operation_id):
        operation_id = id_param(operation_id, problems.INVALID_OPERATION_ID, "an operation id")
        if FulfillmentOperation.get_or_none(FulfillmentOperation.id == operation_id) is None:
            raise Problem(404, problems.OPERATION_NOT_FOUND, f"operation {operation_id} does not exist")
        rows = (
            FulfillmentHistory.select()
            .where(FulfillmentHistory.operation == operation_id)
            .order_by(FulfillmentHistory.id)
            .limit(1000)
        )
        return json_answer(200, {"operationId": operation_id, "history": [history_json(row) for row in rows]})

    def mutation(change):
        def route(operator, operation_id):
            operation_id = id_param(operation_id, problems.INVALID_OPERATION_ID, "an operation id")
            reason = operator_reason()
            try:
                with db.atomic():
                    op = change(operation_id, f"operator:{operator.username}", reason)
            except repair.OperationNotFound:
                raise Problem(404, problems.OPERATION_NOT_FOUND, f"operation {operation_id} does not exist") from None
            except repair.StateConflict:
                raise Problem(
                    409, problems.STATE_CONFLICT, "a succeeded operation can be neither retried nor cancelled"
                ) from None
            return json_answer(200, {"operation": operation_json(op)})

        return route

    app.post("/v1/panel/system/jobs/<operation_id>/retry")(
        signed_in(operators.SYSTEM_WRITE)(mutation(repair.retry_operation))
    )
    app.post("/v1/panel/system/jobs/<operation_id>/cancel")(
        signed_in(operators.SYSTEM_WRITE)(mutation(repair.cancel_operation))
    )

    @app.post("/v1/panel/customers/<customer_id>/subscriptions/<subscription_id>/operations")
    @signed_in(operators.SUBSCRIPTIONS_WRITE)
    def subscription_operation(operator, customer_id, subscription_id):
        reason = operator_reason()
        body = json_body()
        request_id = change_request_id(body)
        operation = body.get("operation")
        if not isinstance(operation, str):
            raise Problem(400, problems.INVALID_BODY, "operation is required")
        options = _change_options(body)
        try:
            queued = changes.request_change(
                customer_id[:64],
                subscription_id[:64],
                operation,
                request_id,
                actor=f"operator:{operator.username}",
                reason=reason,
                **options,
            )
        except changes.ChangeRejected as rejected:
            raise Problem(rejected.http_status, rejected.code, str(rejected)) from None
        except FulfillmentRequestRejected as rejected:
            status = 409 if rejected.code == "idempotency_key_reused" else 400
            raise Problem(status, rejected.code, str(rejected)) from None
        return json_answer(202, queued)

    @app.get("/v1/panel/system/maintenance")
    @signed_in(operators.SYSTEM_READ)
    def maintenance_state(operator):
        return json_answer(200, maintenance_json())

    @app.post("/v1/panel/system/maintenance")
    @signed_in(operators.SYSTEM_WRITE)
    def set_maintenance(operator):
        active = json_body().get("active")
        if not isinstance(active, bool):
            raise Problem(400, problems.INVALID_BODY, "active must be true or false")
        reason = operator_reason()
        with db.atomic():
            maintenance.set_mode(active, reason, actor=f"operator:{operator.username}")
        return json_answer(200, maintenance_json())

    @app.get("/v1/panel/system/outbox/destinations")
    @signed_in(operators.SYSTEM_READ)
    def list_destinations(operator):
        counts = outbox.delivery_counts()
        return json_answer(200, {"destinations": [destination_json(d, counts) for d in outbox.active_destinations()]})

    @app.post("/v1/panel/system/outbox/destinations")
    @signed_in(operators.SYSTEM_WRITE)
    def add_destination(operator):
        reason = operator_reason()
        body = json_body()
        try:
            destination = outbox.add_destination(
                body.get("url"), body.get("topics"), body.get("secret"), f"operator:{operator.username}", reason
            )
        except outbox.DestinationRejected as rejected:
            raise Problem(400, rejected.code, str(rejected)) from None
        except sealing.SealingUnavailable:
            raise Problem(
                503, problems.SEALING_UNAVAILABLE, "secrets cannot be sealed: APP_DATA_ENCRYPTION_KEY is not set"
            ) from None
        return json_answer(201, {"destination": destination_json(destination, {})})

    @app.delete("/v1/panel/system/outbox/destinations/<destination_id>")
    @signed_in(operators.SYSTEM_WRITE)
    def remove_destination(operator, destination_id):
        destination_id = id_param(destination_id, problems.INVALID_DESTINATION_ID, "a destination id")
        reason = operator_reason()
        try:
            destination = outbox.remove_destination(destination_id, f"operator:{operator.username}", reason)
        except outbox.DestinationNotFound as missing:
            raise Problem(404, problems.DESTINATION_NOT_FOUND, str(missing)) from None
        return json_answer(200, {"destination": destination_json(destination, {})})

    @app.get("/v1/panel/system/blocklists")
    @signed_in(operators.SYSTEM_READ)
    def list_blocklist_sources(operator):
        return json_answer(200, {"sources": blocklist_sources_json(), "maxSources": blocklists.MAX_SOURCES})

    @app.post("/v1/panel/system/blocklists")
    @signed_in(operators.SYSTEM_WRITE)
    def add_blocklist_source(operator):
        reason = operator_reason()
        body = json_body()
        try:
            source = blocklists.add_source(body.get("url"), body.get("token"), f"operator:{operator.username}", reason)
        except blocklists.SourceRejected as rejected:
            status = 409 if rejected.code == blocklists.TOO_MANY_SOURCES else 400
            raise Problem(status, rejected.code, str(rejected)) from None
        except sealing.SealingUnavailable:
            raise Problem(
                503, problems.SEALING_UNAVAILABLE, "tokens cannot be sealed: APP_DATA_ENCRYPTION_KEY is not set"
            ) from None
        source.has_token = source.token is not None
        return json_answer(201, {"source": blocklist_source_json(source, {})})

    @app.delete("/v1/panel/system/blocklists/<source_id>")
    @signed_in(operators.SYSTEM_WRITE)
    def remove_blocklist_source(operator, source_id):
        source_id = id_param(source_id, problems.INVALID_SOURCE_ID, "a blocklist source id")
        reason = operator_reason()
        try:
            source = blocklists.remove_source(source_id, f"operator:{operator.username}", reason)
        except blocklists.SourceNotFound as missing:
            raise Problem(404, problems.BLOCKLIST_SOURCE_NOT_FOUND, str(missing)) from None
        source.has_token = source.__data__.get("token") is not None
        return json_answer(200, {"source": blocklist_source_json(source, {})})

    return app


def change_request_id(body):
    """What names a change request, so a double submit queues it once: the body's requestId or X-Request-ID."""
    request_id = body.get("requestId") or bottle.request.get_header(problems.REQUEST_ID_HEADER)
    if not isinstance(request_id, str) or not 1 <= len(request_id) <= 64 or not request_id.isprintable():
        raise Problem(
            400, problems.REQUEST_ID_REQUIRED, "requestId (or X-Request-ID) names the request, up to 64 characters"
        )
    return request_id


def _change_options(body):
    """endsAt, trafficLimitBytes, deviceLimit, squadIds of a change, checked; absent ones stay unset."""
    options = {}
    if "endsAt" in body:
        raw = body["endsAt"]
        try:
            ends_at = datetime.datetime.fromisoformat(raw.replace("Z", "+00:00")) if isinstance(raw, str) else None
        except ValueError:
            ends_at = None
        if ends_at is None:
            raise Problem(400, problems.INVALID_BODY, "endsAt must be an ISO 8601 time")
        if ends_at.tzinfo is not None:
            ends_at = ends_at.astimezone(datetime.timezone.utc).replace(tzinfo=None)
        options["ends_at"] = ends_at
    for key, name in (("trafficLimitBytes", "traffic_bytes"), ("deviceLimit", "device_limit")):
        if key in body:
            value = body[key]
            if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
                raise Problem(400, problems.INVALID_BODY, f"{key} must be a whole number or null (unlimited)")
            options[name] = value
    if "squadIds" in body:
        squads = body["squadIds"]
        if not isinstance(squads, list) or not all(isinstance(s, str) and 0 < len(s) <= 64 for s in squads):
            raise Problem(400, problems.INVALID_BODY, "squadIds must be a list of squad ids")
        options["squad_ids"] = squads
    return options


def _whoami(operator):
    return {"username": operator.username, "permissions": sorted(operator.permission_set)}
