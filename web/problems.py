"""Errors as application/problem+json with a machine-readable code and the request id.

Every error answer of every route goes through `problem()`, so no route can
answer with a stack trace, a provider body or a secret (SPEC 12.4).
"""

import json
import uuid

import bottle

from security.redactor import redact

UNAUTHORIZED = "unauthorized"
NOT_FOUND = "not_found"
METHOD_NOT_ALLOWED = "method_not_allowed"
INVALID_STATE = "invalid_state"
INVALID_LIMIT = "invalid_limit"
INVALID_JOB_ID = "invalid_job_id"
JOB_NOT_FOUND = "job_not_found"
JOB_MUTATION_REJECTED = "job_mutation_rejected"
JOBS_UNAVAILABLE = "jobs_unavailable"
DATABASE_UNAVAILABLE = "database_unavailable"
INVALID_BODY = "invalid_body"
REASON_REQUIRED = "reason_required"
REASON_TOO_LONG = "reason_too_long"
INTERNAL_ERROR = "internal_error"
INVALID_CREDENTIALS = "invalid_credentials"
FORBIDDEN = "forbidden"
INVALID_STATUS = "invalid_status"
BODY_TOO_LARGE = "body_too_large"
INVALID_OPERATION = "invalid_operation"
INVALID_ENTITLEMENT_ID = "invalid_entitlement_id"
INVALID_CURSOR = "invalid_cursor"
INVALID_OPERATION_ID = "invalid_operation_id"
OPERATION_NOT_FOUND = "operation_not_found"
STATE_CONFLICT = "state_conflict"
METRICS_UNAVAILABLE = "metrics_unavailable"
REQUEST_ID_REQUIRED = "request_id_required"
TOO_MANY_ATTEMPTS = "too_many_attempts"
TOO_MANY_REQUESTS = "too_many_requests"
INVALID_DESTINATION_ID = "invalid_destination_id"
DESTINATION_NOT_FOUND = "destination_not_found"
INVALID_SOURCE_ID = "invalid_source_id"
BLOCKLIST_SOURCE_NOT_FOUND = "blocklist_source_not_found"
TELEMETRY_COLLECTOR_OFF = "telemetry_collector_off"
SEALING_UNAVAILABLE = "sealing_unavailable"
INVALID_CUSTOMER_ID = "invalid_customer_id"
CUSTOMER_NOT_FOUND = "customer_not_found"
INVALID_SUBSCRIPTION_ID = "invalid_subscription_id"
SUBSCRIPTION_NOT_FOUND = "subscription_not_found"
INVALID_ORDER_ID = "invalid_order_id"
ORDER_NOT_FOUND = "order_not_found"
INVALID_PAYMENT_ID = "invalid_payment_id"
PAYMENT_NOT_FOUND = "payment_not_found"
INVALID_SEARCH = "invalid_search"
INVALID_FILTER = "invalid_filter"
INVALID_TIME_ZONE = "invalid_time_zone"
INVALID_REFUND_AMOUNT = "invalid_refund_amount"
ORDER_NOT_REFUNDABLE = "order_not_refundable"
INVALID_REFUND_DESTINATION = "invalid_refund_destination"
PARTIAL_REFUND_UNSUPPORTED = "partial_refund_unsupported"
REFUND_EXCEEDS_WALLET = "refund_exceeds_wallet"
INVALID_PLAN_ID = "invalid_plan_id"
PLAN_NOT_FOUND = "plan_not_found"
INVALID_VALIDITY = "invalid_validity"
INVALID_CAMPAIGN_ID = "invalid_campaign_id"
INVALID_BULK_ACTION_ID = "invalid_bulk_action_id"
INVALID_TICKET_ID = "invalid_ticket_id"
INVALID_TICKET_STATUS = "invalid_ticket_status"
ATTACHMENT_NOT_FOUND = "attachment_not_found"
UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type"
CROSS_ORIGIN_REFUSED = "cross_origin_refused"
INVALID_OPERATOR_ID = "invalid_operator_id"
OPERATOR_NOT_FOUND = "operator_not_found"
WEAK_PASSWORD = "weak_password"

REQUEST_ID_HEADER = "X-Request-ID"


class Problem(Exception):
    """Raise from a route to answer with a problem document."""

    def __init__(self, status, code, detail):
        super().__init__(detail)
        self.status = status
        self.code = code
        self.detail = detail


def request_id():
    """The caller's X-Request-ID when it is sane, else one made for this request."""
    environ = bottle.request.environ
    if "omniflow.request_id" not in environ:
        given = bottle.request.get_header(REQUEST_ID_HEADER, "")
        environ["omniflow.request_id"] = (
            given if given and len(given) <= 64 and given.isprintable() else str(uuid.uuid4())
        )
    return environ["omniflow.request_id"]


def problem(status, code, detail):
    bottle.response.status = status
    bottle.response.content_type = "application/problem+json"
    bottle.response.set_header(REQUEST_ID_HEADER, request_id())
    return json.dumps(
        {
            "type": "about:blank",
            "title": bottle.HTTP_CODES.get(status, "Error"),
            "status": status,
            "code": code,
            "detail": redact(detail),
            "requestId": request_id(),
        }
    )


def install(app):
    """Make every error answer a problem document."""

    def handler(status, code, detail):
        def handle(error):
            return problem(status, code, detail)

        return handle

    app.error_handler[404] = handler(404, NOT_FOUND, "no such route")
    app.error_handler[405] = handler(405, METHOD_NOT_ALLOWED, "method not allowed on this route")
    app.error_handler[500] = handler(500, INTERNAL_ERROR, "internal error; see the server log with this request id")
