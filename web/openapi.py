"""The OpenAPI 3.1 description of every /v1/ route, served at GET /v1/openapi.json.

tests/web/test_openapi.py keeps it true: every /v1/ route of the app is
described here and nothing else is, and real answers carry exactly the
documented fields.
"""

import json

import bottle

from commerce import webhooks as webhook_intake
from commerce.orders import ORDERABLE_KINDS
from commerce.providers import PAYMENT_METHODS
from models.fulfillment import OPERATION_STATUSES, OPERATIONS
from web import admin, panel
from web import checkout as web_checkout


def _problem_ref():
    return {"$ref": "#/components/schemas/Problem"}


def _error(description):
    return {"description": description, "content": {"application/problem+json": {"schema": _problem_ref()}}}


def _ok(schema, description="OK"):
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _object(properties, required=None):
    return {
        "type": "object",
        "properties": properties,
        "required": sorted(required if required is not None else properties),
        "additionalProperties": False,
    }


STRING = {"type": "string"}
NULLABLE_STRING = {"type": ["string", "null"]}
INTEGER = {"type": "integer"}
TIME = {"type": ["string", "null"], "format": "date-time"}

JOB = _object(
    {
        "id": INTEGER,
        "kind": STRING,
        "queue": STRING,
        "state": STRING,
        "attempt": INTEGER,
        "maxAttempts": INTEGER,
        "createdAt": TIME,
        "attemptedAt": TIME,
        "errorCount": INTEGER,
        "lastError": NULLABLE_STRING,
        "args": _object({"keys": {"type": "array", "items": STRING}}),
    }
)
OPERATION = _object(
    {
        "id": INTEGER,
        "entitlementId": INTEGER,
        "operation": {"type": "string", "enum": list(OPERATIONS)},
        "status": {"type": "string", "enum": list(OPERATION_STATUSES)},
        "attemptCount": INTEGER,
        "errorCode": NULLABLE_STRING,
        "correlationId": STRING,
        "createdAt": TIME,
        "nextAttemptAt": TIME,
        "completedAt": TIME,
    }
)
HISTORY_ROW = _object(
    {
        "id": INTEGER,
        "attempt": INTEGER,
        "status": STRING,
        "errorCode": NULLABLE_STRING,
        "correlationId": STRING,
        "createdAt": TIME,
    }
)
MAINTENANCE = _object({"active": {"type": "boolean"}, "since": TIME, "reason": NULLABLE_STRING})
WHOAMI = _object({"username": STRING, "permissions": {"type": "array", "items": STRING}})
PROBLEM = _object(
    {
        "type": STRING,
        "title": STRING,
        "status": INTEGER,
        "code": STRING,
        "detail": STRING,
        "requestId": STRING,
    }
)

BEARER = [{"operatorToken": []}]
SESSION = [{"operatorSession": []}]
REASON = {
    "name": "X-Operator-Reason",
    "in": "header",
    "required": True,
    "schema": {"type": "string", "minLength": 1},
    "description": "Why; written to the audit event.",
}


def _id_parameter(name):
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string", "pattern": "^[0-9]{1,18}$"}}


def _query(name, schema, description=""):
    return {"name": name, "in": "query", "required": False, "schema": schema, "description": description}


UNAUTHORIZED = _error("missing or wrong credentials (`unauthorized`)")
FORBIDDEN = _error("the operator lacks the permission (`forbidden`)")
BAD_REQUEST = _error("bad input; `code` says which")


def document():
    paths = {
        "/v1/admin/jobs": {
            "get": {
                "summary": "Queue rows (jobs), the dead letters by default",
                "security": BEARER,
                "parameters": [
                    _query("state", {"type": "string", "enum": list(admin.LISTABLE_STATES)}),
                    _query("limit", {"type": "integer", "minimum": 1, "maximum": admin.MAX_LIMIT}),
                ],
                "responses": {
                    "200": _ok(
                        _object(
                            {"state": STRING, "limit": INTEGER, "jobs": {"type": "array", "items": JOB}},
                        )
                    ),
                    "400": BAD_REQUEST,
                    "401": UNAUTHORIZED,
                    "503": _error("no reachable, migrated job queue (`jobs_unavailable`)"),
                },
            }
        },
        "/v1/admin/outbox": {
            "get": {
                "summary": "How far the outbox is behind",
                "security": BEARER,
                "responses": {
                    "200": _ok(_object({"pendingCount": INTEGER, "oldestAgeSeconds": INTEGER})),
                    "401": UNAUTHORIZED,
                    "503": _error("`jobs_unavailable`"),
                },
            }
        },
        "/v1/admin/maintenance": {
            "get": {
                "summary": "The maintenance switch",
                "security": BEARER,
                "responses": {"200": _ok(MAINTENANCE), "401": UNAUTHORIZED, "503": _error("`jobs_unavailable`")},
            },
            "post": {
                "summary": "Turn maintenance mode on or off (audited)",
                "security": BEARER,
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": _object(
                                {"active": {"type": "boolean"}, "reason": {"type": "string", "minLength": 1}}
                            )
                        }
                    },
                },
                "responses": {
                    "200": _ok(MAINTENANCE),
                    "400": BAD_REQUEST,
                    "401": UNAUTHORIZED,
                    "503": _error("`jobs_unavailable`"),
                },
            },
        },
        "/v1/panel/session": {
            "post": {
                "summary": (
                    "Sign in: sets the HttpOnly, SameSite=Strict session cookie (Secure unless APP_COOKIE_SECURE=false)"
                ),
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": _object(
                                {
                                    "username": {"type": "string", "minLength": 1},
                                    "password": {"type": "string", "minLength": 1},
                                }
                            )
                        }
                    },
                },
                "responses": {
                    "200": _ok(WHOAMI),
                    "400": BAD_REQUEST,
                    "401": _error("unknown username or wrong password (`invalid_credentials`)"),
                    "429": _error(
                        "5 failed sign-ins for this username from this client address within 15 minutes"
                        " (`too_many_attempts`)"
                    ),
                },
            },
            "get": {
                "summary": "Who is signed in",
                "security": SESSION,
                "responses": {"200": _ok(WHOAMI), "401": UNAUTHORIZED},
            },
            "delete": {"summary": "Sign out", "responses": {"204": {"description": "signed out"}}},
        },
        "/v1/panel/system/jobs": {
            "get": {
                "summary": "Fulfillment operations, newest first (system.read)",
                "description": (
                    "The panel's System → Operations. The path says `jobs` (SPEC 4.2); its rows are fulfillment"
                    " operations, not queue rows: those are `/v1/admin/jobs`."
                ),
                "security": SESSION,
                "parameters": [
                    _query("status", {"type": "string", "enum": list(OPERATION_STATUSES)}, "default: failed"),
                    _query("operation", {"type": "string", "enum": list(OPERATIONS)}),
                    _query("entitlementId", {"type": "string", "pattern": "^[0-9]{1,18}$"}),
                    _query("cursor", STRING, "nextCursor of the previous page"),
                    _query("limit", {"type": "integer", "minimum": 1, "maximum": panel.MAX_PAGE}, "default: 25"),
                ],
                "responses": {
                    "200": _ok(
                        _object(
                            {
                                "status": STRING,
                                "limit": INTEGER,
                                "operations": {"type": "array", "items": OPERATION},
                                "nextCursor": NULLABLE_STRING,
                            }
                        )
                    ),
                    "400": BAD_REQUEST,
                    "401": UNAUTHORIZED,
                    "403": FORBIDDEN,
                },
            }
        },
        "/v1/panel/system/jobs/{operationID}/history": {
            "get": {
                "summary": "Every attempt of an operation (system.read)",
                "security": SESSION,
                "parameters": [_id_parameter("operationID")],
                "responses": {
                    "200": _ok(_object({"operationId": INTEGER, "history": {"type": "array", "items": HISTORY_ROW}})),
                    "400": BAD_REQUEST,
                    "401": UNAUTHORIZED,
                    "403": FORBIDDEN,
                    "404": _error("no such operation (`operation_not_found`)"),
                },
            }
        },
    }
    for action, summary in (
        ("retry", "Make a queue row available again (River's rules; audited `job.retried`, actor `token`)"),
        ("cancel", "Cancel an unfinished queue row (audited `job.cancelled`, actor `token`)"),
    ):
        paths[f"/v1/admin/jobs/{{jobID}}/{action}"] = {
            "post": {
                "summary": summary,
                "security": BEARER,
                "parameters": [_id_parameter("jobID"), {**REASON, "required": False}],
                "responses": {
                    "200": _ok(_object({"job": JOB})),
                    "400": BAD_REQUEST,
                    "401": UNAUTHORIZED,
                    "404": _error("no such job (`job_not_found`)"),
                    "422": _error("the job's state forbids it (`job_mutation_rejected`)"),
                    "503": _error("`jobs_unavailable`"),
                },
            }
        }
    for action, summary in (("retry", "Re-queue the same operation"), ("cancel", "Cancel the operation")):
        paths[f"/v1/panel/system/jobs/{{operationID}}/{action}"] = {
            "post": {
                "summary": f"{summary} (system.write, audited)",
                "security": SESSION,
                "parameters": [_id_parameter("operationID"), REASON],
                "responses": {
                    "200": _ok(_object({"operation": OPERATION})),
                    "400": BAD_REQUEST,
                    "401": UNAUTHORIZED,
                    "403": FORBIDDEN,
                    "404": _error("no such operation (`operation_not_found`)"),
                    "409": _error("a succeeded operation (`state_conflict`)"),
                },
            }
        }
    paths["/v1/panel/customers/{customerID}/subscriptions/{subscriptionID}/operations"] = {
        "post": {
            "summary": "Queue an operator change of one subscription (subscriptions.write, audited; SPEC 2.19)",
            "security": SESSION,
            "parameters": [
                {"name": "customerID", "in": "path", "required": True, "schema": STRING},
                {"name": "subscriptionID", "in": "path", "required": True, "schema": STRING},
                REASON,
            ],
            "requestBody": {
                "required": True,
                "content": {
                    "application/json": {
                        "schema": _object(
                            {
                                "operation": {
                                    "type": "string",
                                    "enum": [
                                        "enable",
                                        "disable",
                                        "reset_traffic",
                                        "extend",
                                        "set_limits",
                                        "set_squads",
                                    ],
                                },
                                "requestId": {"type": "string", "minLength": 1, "maxLength": 64},
                                "endsAt": {"type": "string", "format": "date-time"},
                                "trafficLimitBytes": {"type": ["integer", "null"], "minimum": 0},
                                "deviceLimit": {"type": ["integer", "null"], "minimum": 0},
                                "squadIds": {"type": "array", "items": STRING},
                            },
                            required=["operation"],
                        )
                    }
                },
            },
            "responses": {
                "202": _ok(_object({"operationId": INTEGER, "operation": STRING, "status": STRING}), "queued"),
                "400": BAD_REQUEST,
                "401": UNAUTHORIZED,
                "403": FORBIDDEN,
                "404": _error("no such subscription for this customer (`subscription_not_found`)"),
                "409": _error("never provisioned (`not_provisioned`), or the request id reused differently"),
                "422": _error("an operation an operator cannot request (`unsupported_operation`)"),
            },
        }
    }
    paths["/v1/panel/system/maintenance"] = {
        "get": {
            "summary": "The maintenance switch (system.read)",
            "security": SESSION,
            "responses": {"200": _ok(MAINTENANCE), "401": UNAUTHORIZED, "403": FORBIDDEN},
        },
        "post": {
            "summary": "Turn maintenance mode on or off (system.write, audited)",
            "security": SESSION,
            "parameters": [REASON],
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": _object({"active": {"type": "boolean"}})}},
            },
            "responses": {
                "200": _ok(MAINTENANCE),
                "400": BAD_REQUEST,
                "401": UNAUTHORIZED,
                "403": FORBIDDEN,
            },
        },
    }
    paths.update(_commerce_paths())
    unavailable = _error("the database is unreachable or not migrated (`database_unavailable`)")
    for path, item in paths.items():
        if path.startswith("/v1/panel/"):
            for operation in item.values():
                operation["responses"]["503"] = unavailable
    paths["/v1/openapi.json"] = {"get": {"summary": "This description", "responses": {"200": _ok({"type": "object"})}}}
    return {
        "openapi": "3.1.0",
        "info": {"title": "Omniflow", "version": "1"},
        "paths": paths,
        "components": {
            "schemas": {"Problem": PROBLEM},
            "securitySchemes": {
                "operatorToken": {"type": "http", "scheme": "bearer"},
                "operatorSession": {"type": "apiKey", "in": "cookie", "name": panel.SESSION_COOKIE},
            },
        },
    }


CHECKOUT_REQUEST = _object(
    {
        "customerId": STRING,
        "kind": {"type": "string", "enum": list(ORDERABLE_KINDS)},
        "provider": {"type": "string", "enum": list(PAYMENT_METHODS)},
        "currency": {"type": "string", "pattern": "^[A-Z]{3}$"},
        "requestId": {"type": "string", "minLength": 1, "maxLength": web_checkout.REQUEST_ID_MAX},
        "planId": INTEGER,
        "addonId": INTEGER,
        "subscriptionId": STRING,
        "amountMinor": {
            "type": "integer",
            "minimum": 1,
            "description": "a top-up's amount; prices come from the catalogue",
        },
        "offerId": INTEGER,
    },
    required=["customerId", "kind", "provider", "currency", "requestId"],
)
INVOICE = {
    **_object({"title": STRING, "description": STRING, "payload": STRING, "currency": STRING, "amount": INTEGER}),
    "type": ["object", "null"],
    "description": "sendInvoice's parameters for a Stars order (payload `order:<id>`); null otherwise",
}
CHECKOUT = _object(
    {
        "orderId": INTEGER,
        "orderStatus": STRING,
        "provider": STRING,
        "amountMinor": INTEGER,
        "currency": STRING,
        "confirmationUrl": {**NULLABLE_STRING, "description": "where the payer pays (yookassa, cryptobot)"},
        "invoice": INVOICE,
    }
)
WEBHOOK_ANSWER = _object({"outcome": {"type": "string", "enum": list(webhook_intake.FINAL_OUTCOMES) + ["pending"]}})
YOOKASSA_NOTIFICATION = {
    "type": "object",
    "properties": {"type": {"const": "notification"}, "event": STRING, "object": {"type": "object"}},
    "required": ["type", "event", "object"],
}
CRYPTOBOT_UPDATE = {
    "type": "object",
    "properties": {
        "update_id": INTEGER,
        "update_type": {"const": "invoice_paid"},
        "request_date": STRING,
        "payload": {"type": "object"},
    },
    "required": ["update_id", "update_type", "payload"],
}


def _commerce_paths():
    webhook_errors = {
        "400": _error("not this provider's documented notification (`malformed_webhook`); the delivery is kept"),
        "401": _error(
            "a bad signature (`bad_signature`), or a notification the provider's API does not confirm"
            " (`unconfirmed`); the delivery is kept"
        ),
        "404": _error("this provider is not configured here (`provider_not_configured`); nothing is kept"),
        "413": _error("a body over 64 KiB (`body_too_large`); nothing is kept"),
        "503": _error(
            "the database is unreachable (`database_unavailable`), or the provider's API did not answer the"
            " confirming request (`provider_unavailable`): deliver again. Never for maintenance."
        ),
    }

    def webhook(summary, schema, parameters=()):
        return {
            "post": {
                "summary": summary,
                "parameters": list(parameters),
                "requestBody": {"required": True, "content": {"application/json": {"schema": schema}}},
                "responses": {
                    "200": _ok(WEBHOOK_ANSWER, "taken: the provider need not deliver it again"),
                    **webhook_errors,
                },
            }
        }

    signature = {
        "name": "crypto-pay-api-signature",
        "in": "header",
        "required": True,
        "schema": STRING,
        "description": "hex HMAC-SHA256 of the raw body keyed with SHA-256 of the app's API token",
    }
    return {
        "/v1/checkout": {
            "post": {
                "summary": "Create an order and what pays it (SPEC 13.4): a provider's confirmation URL, a Stars"
                " invoice, or a wallet payment made at once",
                "security": BEARER,
                "requestBody": {"required": True, "content": {"application/json": {"schema": CHECKOUT_REQUEST}}},
                "responses": {
                    "200": _ok(CHECKOUT),
                    "400": BAD_REQUEST,
                    "401": UNAUTHORIZED,
                    "404": _error("no such customer, plan, add-on or subscription"),
                    "409": _error("the order or the subscription cannot take it (`order_not_payable`, …)"),
                    "422": _error(
                        "not sold this way: a blocked customer, a plan not priced in the currency, a provider"
                        " not configured, a wallet that cannot cover it (`insufficient_funds`), …"
                    ),
                    "502": _error("the provider refused or did not answer (`provider_unavailable`, …)"),
                    "503": _error("maintenance is on (`maintenance_active`), or the database is unreachable"),
                },
            }
        },
        "/v1/webhooks/yookassa": webhook(
            "YooKassa notifications; each is confirmed by fetching the payment from YooKassa's API",
            YOOKASSA_NOTIFICATION,
        ),
        "/v1/webhooks/cryptobot": webhook(
            "Crypto Pay (CryptoBot) updates, signed", CRYPTOBOT_UPDATE, parameters=[signature]
        ),
    }


def build():
    app = bottle.Bottle()
    body = json.dumps(document(), indent=2, sort_keys=True)

    @app.get("/v1/openapi.json")
    def openapi():
        bottle.response.content_type = "application/json"
        return body

    return app
