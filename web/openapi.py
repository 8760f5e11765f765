"""The OpenAPI 3.1 description of every /v1/ route, served at GET /v1/openapi.json.

tests/web/test_openapi.py keeps it true: every /v1/ route of the app is
described here and nothing else is, and real answers carry exactly the
documented fields.
"""

import json

import bottle

from commerce import webhooks as webhook_intake
from commerce.checkout import CHECKOUT_KINDS
from commerce.phase import PHASES
from commerce.providers import PAYMENT_METHODS
from fulfillment import bulk as fulfillment_bulk
from models.bulk import BULK_ACTIONS, BULK_STATUSES, ITEM_STATUSES
from models.campaigns import AUDIENCES, CAMPAIGN_KINDS, CAMPAIGN_STATUSES, RECIPIENT_STATUSES
from models.catalogue import GIFT_CARD_STATUSES
from models.commerce import ORDER_OPERATIONS, ORDER_STATUSES
from models.fulfillment import ENTITLEMENT_STATUSES, OPERATION_STATUSES, OPERATIONS
from models.payments import INTENT_STATUSES, REFUND_DESTINATIONS, REFUND_STATUSES, WEBHOOK_VERDICTS
from models.support import AUTHORS, PUSH_STATUSES, TICKET_STATUSES
from ops import anomalies, operators, outbox, telemetry
from ops import campaigns as ops_campaigns
from ops import support as ops_support
from web import admin, backoffice, backoffice_orders, panel
from web import bulk as web_bulk
from web import checkout as web_checkout
from web import support as web_support


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
NULLABLE_INTEGER = {"type": ["integer", "null"]}
BOOLEAN = {"type": "boolean"}
TIME = {"type": ["string", "null"], "format": "date-time"}


def _nullable(schema):
    return {**schema, "type": ["object", "null"]}


def _array(items):
    return {"type": "array", "items": items}


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
DESTINATION = _object(
    {
        "id": INTEGER,
        "url": {"type": "string", "description": "the origin only; a path or query shows as /…"},
        "topics": {"type": "array", "items": STRING, "description": '["*"]: every topic'},
        "active": {"type": "boolean"},
        "createdAt": TIME,
        "pending": INTEGER,
        "retrying": INTEGER,
        "dead": INTEGER,
    }
)
BLOCKLIST_SOURCE = _object(
    {
        "id": INTEGER,
        "url": {"type": "string", "description": "the origin only; a path or query shows as /…"},
        "hasToken": {"type": "boolean", "description": "a token is sealed for it (never shown)"},
        "active": BOOLEAN,
        "status": {"type": "string", "enum": ["new", "ok", "failed"]},
        "lastRefreshAt": TIME,
        "lastSuccessAt": TIME,
        "listChangedAt": TIME,
        "lastError": NULLABLE_STRING,
        "failureCount": INTEGER,
        "entryCount": INTEGER,
        "blockedCustomers": INTEGER,
        "createdAt": TIME,
    }
)
HEARTBEAT = _object(
    {
        "type": {"type": "string", "enum": [telemetry.KIND]},
        "installationId": {"type": "string", "description": "the installation's own random id (32 hex digits)"},
        "version": STRING,
        "database": {"type": "string", "enum": list(telemetry.DATABASES)},
        "sentAt": {"type": "string", "format": "date-time"},
        "counts": _object({name: INTEGER for name in telemetry.COUNTS}),
    }
)
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

# The shop's back office (web/backoffice.py).
MONEY = _array(_object({"currency": STRING, "amountMinor": INTEGER}))
CUSTOMER = _object(
    {
        "id": STRING,
        "displayName": STRING,
        "telegramId": NULLABLE_INTEGER,
        "telegramUsername": NULLABLE_STRING,
        "languageCode": NULLABLE_STRING,
        "blocked": BOOLEAN,
        "blockedReason": NULLABLE_STRING,
        "createdAt": TIME,
    }
)
SUBSCRIPTION = _object(
    {
        "id": STRING,
        "customerId": STRING,
        "slot": INTEGER,
        "panelUsername": NULLABLE_STRING,
        "phase": {"type": "string", "enum": list(PHASES)},
        "autoRenew": BOOLEAN,
        "createdAt": TIME,
        "entitlementId": NULLABLE_INTEGER,
        "planId": NULLABLE_INTEGER,
        "planName": NULLABLE_STRING,
        "startsAt": TIME,
        "endsAt": TIME,
        "graceEndsAt": TIME,
        "trafficLimitBytes": {**NULLABLE_INTEGER, "description": "null: unlimited"},
        "deviceLimit": {**NULLABLE_INTEGER, "description": "null: unlimited"},
        "pausedAt": TIME,
    }
)
ENTITLEMENT = _object(
    {
        "id": INTEGER,
        "orderId": INTEGER,
        "planId": INTEGER,
        "status": {"type": "string", "enum": list(ENTITLEMENT_STATUSES)},
        "startsAt": TIME,
        "endsAt": TIME,
        "trafficLimitBytes": NULLABLE_INTEGER,
        "deviceLimit": NULLABLE_INTEGER,
        "pausedAt": TIME,
        "createdAt": TIME,
    }
)
ORDER = _object(
    {
        "id": INTEGER,
        "customerId": STRING,
        "subscriptionId": NULLABLE_STRING,
        "kind": {"type": "string", "enum": list(ORDER_OPERATIONS)},
        "status": {"type": "string", "enum": list(ORDER_STATUSES)},
        "amountMinor": INTEGER,
        "refundedAmountMinor": INTEGER,
        "currency": STRING,
        "planId": NULLABLE_INTEGER,
        "provider": NULLABLE_STRING,
        "settledBy": NULLABLE_STRING,
        "createdAt": TIME,
        "paidAt": TIME,
        "fulfilledAt": TIME,
        "refundedAt": TIME,
        "operationIds": {**_array(INTEGER), "description": "the fulfillment operations its keys name"},
    }
)
REFUND = _object(
    {
        "id": INTEGER,
        "orderId": INTEGER,
        "amountMinor": INTEGER,
        "currency": STRING,
        "destination": {"type": "string", "enum": list(REFUND_DESTINATIONS)},
        "status": {
            "type": "string",
            "enum": list(REFUND_STATUSES),
            "description": "pending until the provider has answered; processing while the provider works on it",
        },
        "provider": NULLABLE_STRING,
        "providerRefundId": NULLABLE_STRING,
        "lastErrorCode": NULLABLE_STRING,
        "createdAt": TIME,
        "completedAt": TIME,
    }
)
GIFT_CARD = _object(
    {
        "id": INTEGER,
        "planId": INTEGER,
        "status": {"type": "string", "enum": list(GIFT_CARD_STATUSES)},
        "expiresAt": TIME,
        "createdAt": TIME,
        "revokedAt": TIME,
    }
)
ACCESS_CODE = _object(
    {
        "id": INTEGER,
        "planId": INTEGER,
        "maxActivations": INTEGER,
        "activationCount": INTEGER,
        "active": {"type": "boolean"},
        "expiresAt": TIME,
        "createdAt": TIME,
        "revokedAt": TIME,
    }
)
ISSUED = _array(_object({"id": INTEGER, "code": STRING}))
COUNT = {**INTEGER, "minimum": 1, "maximum": 1000, "description": "how many to issue at once (1 unless given)"}
PAYMENT = _object(
    {
        "id": INTEGER,
        "orderId": INTEGER,
        "provider": STRING,
        "providerPaymentId": NULLABLE_STRING,
        "amountMinor": INTEGER,
        "currency": STRING,
        "status": {"type": "string", "enum": list(INTENT_STATUSES)},
        "createdAt": TIME,
        "updatedAt": TIME,
        "lastPolledAt": TIME,
    }
)
DELIVERY = _object(
    {
        "id": INTEGER,
        "providerEventId": NULLABLE_STRING,
        "receivedAt": TIME,
        "signatureOk": BOOLEAN,  # a signature verified; never true for YooKassa, which signs nothing
        # what was checked: the signature, or what the API said of an unsigned notification; null: nothing yet
        "verdict": {"type": ["string", "null"], "enum": [*WEBHOOK_VERDICTS, None]},
        "processedAt": TIME,
        "outcome": NULLABLE_STRING,
    }
)
WALLET_ENTRY = _object(
    {
        "entryId": INTEGER,
        "transactionId": INTEGER,
        "kind": STRING,
        "orderId": NULLABLE_INTEGER,
        "amountMinor": {**INTEGER, "description": "signed: a credit is positive"},
        "currency": STRING,
        "expiresAt": {**TIME, "description": "a bonus credit's expiry"},
        "createdAt": TIME,
    }
)
LEDGER_TRANSACTION = _object(
    {
        "id": INTEGER,
        "kind": STRING,
        "reversesId": NULLABLE_INTEGER,
        "createdAt": TIME,
        "entries": _array(_object({"account": STRING, "amountMinor": INTEGER, "currency": STRING})),
    }
)
OVERVIEW = _object(
    {
        "timeZone": STRING,
        "date": {"type": "string", "format": "date", "description": "today in the operator's time zone"},
        "revenue": _nullable(_object({"today": MONEY, "month": MONEY})),
        "customers": _nullable(_object({"newToday": INTEGER, "newThisMonth": INTEGER})),
        "subscriptions": _nullable(
            _object(
                {
                    "active": INTEGER,
                    "withoutAccess": {
                        **INTEGER,
                        "description": "subscriptions in phase failed: paid, no access until an operator acts",
                    },
                    "withoutAccessIds": {"type": "array", "items": STRING, "description": "the first 20 of them"},
                }
            )
        ),
        "operations": _nullable(_object({"failed": INTEGER, "retrying": INTEGER})),
        "queue": _nullable(
            _object(
                {
                    "available": INTEGER,
                    "running": INTEGER,
                    "retryable": INTEGER,
                    "scheduled": INTEGER,
                    "deadLetters": INTEGER,
                    "outboxPending": INTEGER,
                    "maintenance": BOOLEAN,
                }
            )
        ),
    }
)
TIME_ZONE = _object({"timeZone": {"type": "string", "description": "an IANA zone, e.g. Europe/Moscow"}})
TIME_ZONE_CHANGE = _object({"timeZone": {**TIME_ZONE["properties"]["timeZone"], "enum": list(operators.time_zones())}})
# What names a change request (web/panel.py change_request_id): 1 to 64 printable characters.
REQUEST_ID = {"type": "string", "minLength": 1, "maxLength": 64, "pattern": "^[ -~]+$"}
# An outbox topic name (ops/outbox.py).
TOPIC = {"type": "string", "pattern": outbox.TOPIC_PATTERN}
TOPICS_MAX = outbox.TOPICS_MAX
PLAN_ID = {"type": "integer", "minimum": 1, "maximum": 2**63 - 1}
QUEUED_CHANGE = _object({"operationId": INTEGER, "operation": STRING, "status": STRING})

BEARER = [{"operatorToken": []}]


def _revocation(what, parameter, key, schema, action, missing, redeemed):
    return {
        "post": {
            "summary": f"Revoke a {what} with a reason (payments.write, audited `{action}`)",
            "description": f"A revoked {what} activates nothing after (`code_revoked` to the customer).",
            "security": SESSION,
            "parameters": [_id_parameter(parameter), REASON],
            "responses": {
                "200": _ok(_object({key: schema}), "revoked"),
                "400": _error("`reason_required`"),
                "401": UNAUTHORIZED,
                "403": FORBIDDEN,
                "404": _error(f"no such {what} ({missing})"),
                "409": _error(f"revoked already (`already_revoked`){redeemed}"),
            },
        }
    }


SESSION = [{"operatorSession": []}]
REASON = {
    "name": "X-Operator-Reason",
    "in": "header",
    "required": True,
    "schema": {"type": "string", "minLength": 1, "maxLength": 500, "pattern": "[^ \\t]"},
    "description": "Why; written to the audit event. Plain UTF-8, or RFC 8187's UTF-8'' form with the reason"
    " percent-encoded (what the panel's forms send: a browser sends no header outside Latin-1). At most 500"
    " characters once decoded (`reason_too_long` otherwise).",
}


# A row id: a positive whole number of at most 18 digits (web/answers.py parsed_id: below BIGINT's limit).
ROW_ID = {"type": "integer", "minimum": 1, "maximum": 10**18 - 1}
# A cursor this API returned: unpadded URL-safe base64 of the last row's id (web/panel.py encode_cursor). Opaque:
# another string of these characters is refused with 400 `invalid_cursor`.
CURSOR = {"type": "string", "pattern": "^[A-Za-z0-9_-]+$", "description": "nextCursor of the previous page"}


def _id_parameter(name):
    return {"name": name, "in": "path", "required": True, "schema": ROW_ID}


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
            "delete": {
                "summary": "Sign out: ends the session the cookie names, if any",
                "security": [*SESSION, {}],
                "responses": {"204": {"description": "signed out"}},
            },
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
                    _query("entitlementId", ROW_ID),
                    _query("cursor", CURSOR),
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
                _text_id("customerID"),
                _text_id("subscriptionID"),
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
                                "requestId": REQUEST_ID,
                                "endsAt": {"type": "string", "format": "date-time"},
                                "trafficLimitBytes": {"type": ["integer", "null"], "minimum": 0},
                                "deviceLimit": {"type": ["integer", "null"], "minimum": 0},
                                "squadIds": {"type": "array", "items": STRING},
                            },
                            required=["operation", "requestId"],
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
    paths["/v1/panel/system/outbox/destinations"] = {
        "get": {
            "summary": "Where outbox events are published, with each one's undelivered counts (system.read)",
            "security": SESSION,
            "responses": {
                "200": _ok(_object({"destinations": {"type": "array", "items": DESTINATION}})),
                "401": UNAUTHORIZED,
                "403": FORBIDDEN,
            },
        },
        "post": {
            "summary": "Add a destination; its secret is sealed and never shown again (system.write, audited)",
            "security": SESSION,
            "parameters": [REASON],
            "requestBody": {
                "required": True,
                "content": {
                    "application/json": {
                        "schema": _object(
                            {
                                "url": {"type": "string", "format": "uri", "maxLength": 2000},
                                "topics": {
                                    "oneOf": [
                                        {"type": "string", "pattern": "^[*]$"},
                                        {"type": "array", "items": TOPIC, "minItems": 1, "maxItems": TOPICS_MAX},
                                    ],
                                    "description": 'topic names, or "*" for every topic',
                                },
                                "secret": {
                                    "type": "string",
                                    # 24 to 63 bytes in whole groups of base64 (the code takes up to 64).
                                    "pattern": "^whsec_(?:[A-Za-z0-9+/]{4}){8,21}$",
                                    "description": "Standard Webhooks signing secret: whsec_ + 24-64 bytes of base64",
                                },
                            }
                        )
                    }
                },
            },
            "responses": {
                "201": _ok(_object({"destination": DESTINATION}), "added"),
                "400": _error("bad input: `invalid_url`, `invalid_topics`, `invalid_secret`, `invalid_body`, …"),
                "401": UNAUTHORIZED,
                "403": FORBIDDEN,
                "503": _error("APP_DATA_ENCRYPTION_KEY is not set (`sealing_unavailable`)"),
            },
        },
    }
    paths["/v1/panel/system/outbox/destinations/{destinationID}"] = {
        "delete": {
            "summary": "Remove a destination; what it has not received is dropped (system.write, audited)",
            "security": SESSION,
            "parameters": [_id_parameter("destinationID"), REASON],
            "responses": {
                "200": _ok(_object({"destination": DESTINATION})),
                "400": BAD_REQUEST,
                "401": UNAUTHORIZED,
                "403": FORBIDDEN,
                "404": _error("no such active destination (`destination_not_found`)"),
            },
        }
    }
    paths.update(_blocklist_paths())
    paths.update(_back_office_paths())
    paths.update(_commerce_paths())
    paths.update(_campaign_paths())
    paths.update(_bulk_paths())
    paths.update(_support_paths())
    paths.update(_goods_paths())
    paths.update(_catalogue_paths())
    paths.update(_operator_paths())
    paths.update(_anomaly_paths())
    paths.update(_offer_paths())
    unavailable = _error("the database is unreachable or not migrated (`database_unavailable`)")
    not_json = _error("the body is not sent as `Content-Type: application/json` (`unsupported_media_type`)")
    cross_origin = _error("a change from another site's page in the browser (`cross_origin_refused`), or …")
    for path, item in paths.items():
        for method, operation in item.items():
            if path.startswith("/v1/panel/"):
                operation["responses"].setdefault("503", unavailable)
                if method != "get":
                    operation["responses"].setdefault("403", cross_origin)
            if "requestBody" in operation and not path.startswith("/v1/webhooks/"):
                operation["responses"]["415"] = not_json
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


def _text_id(name):
    # 1 to 64 printable characters (web/backoffice.py text_id); described as ASCII's, what Omniflow's ids are.
    schema = {"type": "string", "minLength": 1, "maxLength": backoffice.TEXT_ID_MAX, "pattern": "^[ -~]+$"}
    return {"name": name, "in": "path", "required": True, "schema": schema}


def _get(summary, schema, parameters=(), not_found=None):
    responses = {"200": _ok(schema), "400": BAD_REQUEST, "401": UNAUTHORIZED, "403": FORBIDDEN}
    if not_found:
        responses["404"] = _error(not_found)
    return {"get": {"summary": summary, "security": SESSION, "parameters": list(parameters), "responses": responses}}


PAGE = [
    _query("cursor", CURSOR),
    _query("limit", {"type": "integer", "minimum": 1, "maximum": backoffice.MAX_PAGE}, "default: 25"),
]
NO_CUSTOMER = "no such customer (`customer_not_found`)"


LISTED_ORDER = _object({**ORDER["properties"], "customerName": STRING})
LISTED_PAYMENT = _object(
    {**PAYMENT["properties"], "kind": {"type": "string", "enum": list(ORDER_OPERATIONS)}, "customerId": STRING,
     "customerName": STRING}
)  # fmt: skip
ORDER_TOTALS = _array(
    _object({"currency": STRING, "count": INTEGER, "amountMinor": INTEGER, "refundedAmountMinor": INTEGER})
)
PAYMENT_TOTALS = _array(_object({"currency": STRING, "count": INTEGER, "amountMinor": INTEGER}))


def _list_filters(statuses):
    return [
        _query("status", {"type": "string", "enum": list(statuses)}, "`invalid_status` otherwise"),
        _query("kind", {"type": "string", "enum": list(ORDER_OPERATIONS)}, "the order's kind"),
        _query("provider", {"type": "string", "enum": list(PAYMENT_METHODS)}),
        _query("currency", {"type": "string", "pattern": "^[A-Za-z]{3}$"}),
        _query("from", {"type": "string", "format": "date"}, "first day, in the operator's time zone"),
        _query("to", {"type": "string", "format": "date"}, "last day (included), in the operator's time zone"),
        _query("customer", {"type": "string", "maxLength": 64}, "a customer id"),
        _query(
            "q",
            {"type": "string", "maxLength": backoffice_orders.SEARCH_MAX},
            "an order or payment id, a provider's payment id, a customer id, Telegram id or @username (exactly),"
            " or a part of a customer's name",
        ),
        *PAGE,
    ]


def _list_paths():
    """Every order and every payment (payments.read), filtered; totals per currency of the whole filtered set.
    A filter that cannot match is a 400 (`invalid_status`, `invalid_filter`, `invalid_search`, `invalid_cursor`)."""
    return {
        "/v1/panel/orders": _get(
            "Every order, newest first, filtered, with totals per currency of the filtered set (payments.read)",
            _object({"orders": _array(LISTED_ORDER), "totals": ORDER_TOTALS, "nextCursor": NULLABLE_STRING}),
            _list_filters(ORDER_STATUSES),
        ),
        "/v1/panel/payments": _get(
            "Every payment at a provider, newest first, filtered, with totals per currency (payments.read)",
            _object({"payments": _array(LISTED_PAYMENT), "totals": PAYMENT_TOTALS, "nextCursor": NULLABLE_STRING}),
            _list_filters(INTENT_STATUSES),
        ),
    }


def _blocklist_paths():
    source = _object({"source": BLOCKLIST_SOURCE})
    return {
        "/v1/panel/system/blocklists": {
            "get": {
                "summary": "Blocklist sources: last refresh, status, list size, customers blocked (system.read)",
                "security": SESSION,
                "responses": {
                    "200": _ok(
                        _object({"sources": {"type": "array", "items": BLOCKLIST_SOURCE}, "maxSources": INTEGER})
                    ),
                    "401": UNAUTHORIZED,
                    "403": FORBIDDEN,
                },
            },
            "post": {
                "summary": "Add a source (at most 20); its token is sealed and never shown again (system.write,"
                " audited)",
                "security": SESSION,
                "parameters": [REASON],
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": _object(
                                {
                                    "url": {"type": "string", "format": "uri", "maxLength": 2000},
                                    "token": {
                                        "type": ["string", "null"],
                                        "maxLength": 500,
                                        "description": "sent as Authorization: Bearer <token>",
                                    },
                                }
                            )
                        }
                    },
                },
                "responses": {
                    "201": _ok(source, "added"),
                    "400": _error("bad input: `invalid_url`, `invalid_token`, `invalid_body`, …"),
                    "401": UNAUTHORIZED,
                    "403": FORBIDDEN,
                    "409": _error("20 sources are active already (`too_many_sources`)"),
                    "503": _error("a token given and APP_DATA_ENCRYPTION_KEY not set (`sealing_unavailable`)"),
                },
            },
        },
        "/v1/panel/system/blocklists/{sourceID}": {
            "delete": {
                "summary": "Remove a source; the customers only it listed are unblocked (system.write, audited)",
                "security": SESSION,
                "parameters": [_id_parameter("sourceID"), REASON],
                "responses": {
                    "200": _ok(source),
                    "400": BAD_REQUEST,
                    "401": UNAUTHORIZED,
                    "403": FORBIDDEN,
                    "404": _error("no such active source (`blocklist_source_not_found`)"),
                },
            }
        },
    }


def _back_office_paths():
    customer = _text_id("customerID")
    paths = {
        "/v1/panel/overview": {
            "get": {
                "summary": "Home: revenue, new customers, active subscriptions, failing operations, queue health",
                "description": (
                    "Any signed-in operator. Each section is null without its permission: revenue payments.read,"
                    " customers and subscriptions subscriptions.read, operations and queue system.read. Revenue is"
                    " net, per currency, from the ledger's revenue account; today and this month begin at midnight"
                    " in the operator's time zone."
                ),
                "security": SESSION,
                "responses": {"200": _ok(OVERVIEW), "401": UNAUTHORIZED},
            }
        },
        "/v1/panel/session/time-zone": {
            "get": {
                "summary": "The signed-in operator's time zone (pages show times in it)",
                "security": SESSION,
                "responses": {"200": _ok(TIME_ZONE), "401": UNAUTHORIZED},
            },
            "put": {
                "summary": "Set one's own time zone (audited `operator.time_zone_changed`)",
                "security": SESSION,
                "requestBody": {"required": True, "content": {"application/json": {"schema": TIME_ZONE_CHANGE}}},
                "responses": {
                    "200": _ok(TIME_ZONE),
                    "400": _error("not an IANA zone (`invalid_time_zone`) or not a JSON object (`invalid_body`)"),
                    "401": UNAUTHORIZED,
                },
            },
        },
        "/v1/panel/customers": _get(
            "Customers (subscriptions.read): those `q` names, or every customer newest first",
            _object({"query": NULLABLE_STRING, "customers": _array(CUSTOMER), "nextCursor": NULLABLE_STRING}),
            [
                _query(
                    "q",
                    {"type": "string", "maxLength": 64},
                    "a customer id, a Telegram id, a Telegram @username or a panel username, matched exactly"
                    " (usernames in any case); anything else `400 invalid_search`",
                ),
                *PAGE,
            ],
        ),
        "/v1/panel/customers/{customerID}": _get(
            "A customer and their subscriptions, each with its phase, end and limits (subscriptions.read)",
            _object({"customer": CUSTOMER, "subscriptions": _array(SUBSCRIPTION)}),
            [customer],
            NO_CUSTOMER,
        ),
        "/v1/panel/customers/{customerID}/orders": _get(
            "A customer's orders, newest first (payments.read)",
            _object({"orders": _array(ORDER), "nextCursor": NULLABLE_STRING}),
            [customer, *PAGE],
            NO_CUSTOMER,
        ),
        "/v1/panel/customers/{customerID}/payments": _get(
            "A customer's payments at providers, newest first (payments.read)",
            _object({"payments": _array(PAYMENT), "nextCursor": NULLABLE_STRING}),
            [customer, *PAGE],
            NO_CUSTOMER,
        ),
        "/v1/panel/customers/{customerID}/wallet": _get(
            "A customer's wallet: balance per currency and movements, newest first (payments.read)",
            _object({"balances": MONEY, "history": _array(WALLET_ENTRY), "nextCursor": NULLABLE_STRING}),
            [customer, *PAGE],
            NO_CUSTOMER,
        ),
        "/v1/panel/subscriptions/{subscriptionID}": _get(
            "A subscription: phase, periods, operations (scheduled reconciles that succeeded left out;"
            " subscriptions.read)",
            _object(
                {
                    "subscription": SUBSCRIPTION,
                    "entitlements": _array(ENTITLEMENT),
                    "operations": _array(OPERATION),
                }
            ),
            [_text_id("subscriptionID")],
            "no such subscription (`subscription_not_found`)",
        ),
        "/v1/panel/orders/{orderID}": _get(
            "An order, its payments, its ledger transactions and its fulfillment operations (payments.read)",
            _object(
                {
                    "order": ORDER,
                    "payments": _array(PAYMENT),
                    "ledger": _array(LEDGER_TRANSACTION),
                    "operations": _array(OPERATION),
                    "refunds": _array(REFUND),
                }
            ),
            [_id_parameter("orderID")],
            "no such order (`order_not_found`)",
        ),
        "/v1/panel/payments/{paymentID}": _get(
            "A payment at a provider and its webhook deliveries, never their bodies (payments.read)",
            _object({"payment": PAYMENT, "deliveries": _array(DELIVERY)}),
            [_id_parameter("paymentID")],
            "no such payment (`payment_not_found`)",
        ),
        **_list_paths(),
        "/v1/panel/gift-cards": {
            "post": {
                "summary": "Issue a single-use gift card for a plan (payments.write, audited `panel.gift_card.issued`)",
                "description": (
                    "The code is in this answer only: the shop keeps its SHA-256 (SPEC 13.11). A customer redeems it"
                    " once, before `expiresAt`, for a free period of the plan."
                ),
                "security": SESSION,
                "parameters": [REASON],
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": _object(
                                {
                                    "planId": PLAN_ID,
                                    "validDays": {**INTEGER, "minimum": 1, "maximum": 3650},
                                    "count": COUNT,
                                },
                                ["planId", "validDays"],
                            )
                        }
                    },
                },
                "responses": {
                    "201": _ok(
                        _object({"giftCard": GIFT_CARD, "code": STRING, "issued": ISSUED}),
                        "issued: the first card and its code, and every card's id and code under `issued`",
                    ),
                    "400": _error(
                        "`invalid_plan_id`, `invalid_validity`, `invalid_count`, `reason_required`, `invalid_body`"
                    ),
                    "401": UNAUTHORIZED,
                    "403": FORBIDDEN,
                    "404": _error("no such plan (`plan_not_found`)"),
                    "409": _error("the plan is not on sale (`plan_inactive`)"),
                },
            }
        },
        "/v1/panel/access-codes": {
            "post": {
                "summary": "Issue an access code for a plan (payments.write, audited `panel.access_code.issued`)",
                "description": (
                    "Generated unless `code` is chosen (at least 6 letters or digits). The code is in this answer"
                    " only. Up to `maxActivations` customers activate it, each once, before `expiresAt` if set."
                ),
                "security": SESSION,
                "parameters": [REASON],
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": _object(
                                {
                                    "planId": PLAN_ID,
                                    "maxActivations": {**INTEGER, "minimum": 1, "maximum": 1000000},
                                    "validDays": {**INTEGER, "minimum": 1, "maximum": 3650},
                                    "code": {"type": "string", "maxLength": 64},
                                    "count": COUNT,
                                },
                                ["planId", "maxActivations"],
                            )
                        }
                    },
                },
                "responses": {
                    "201": _ok(
                        _object({"accessCode": ACCESS_CODE, "code": STRING, "issued": ISSUED}),
                        "issued: the first code, and every code's id and code under `issued`",
                    ),
                    "400": _error(
                        "`invalid_plan_id`, `invalid_activation_limit`, `invalid_validity`, `invalid_code`,"
                        " `invalid_count` (also a chosen code with a count above 1), `reason_required`, `invalid_body`"
                    ),
                    "401": UNAUTHORIZED,
                    "403": FORBIDDEN,
                    "404": _error("no such plan (`plan_not_found`)"),
                    "409": _error(
                        "the plan is not on sale (`plan_inactive`); the chosen code is in use (`code_taken`)"
                    ),
                },
            }
        },
        "/v1/panel/gift-cards/{giftCardID}/revoke": _revocation(
            "gift card",
            "giftCardID",
            "giftCard",
            GIFT_CARD,
            "panel.gift_card.revoked",
            "`gift_card_not_found`",
            "; it has been redeemed",
        ),
        "/v1/panel/access-codes/{accessCodeID}/revoke": _revocation(
            "access code",
            "accessCodeID",
            "accessCode",
            ACCESS_CODE,
            "panel.access_code.revoked",
            "`access_code_not_found`",
            "",
        ),
        "/v1/panel/orders/{orderID}/refund": {
            "post": {
                "summary": "Refund an order in full or in part (payments.write, audited `panel.order.refunded`)",
                "description": (
                    "Without amountMinor, all that is left; in full the order is `refunded` and its access revoked,"
                    " in part `partially_refunded` and the access kept (SPEC 13.10). The ledger is reversed in the"
                    " same transaction. Without `to`, the money goes back where it was paid: to the wallet, through"
                    " YooKassa's or Telegram's refund API (a durable job; its state is the refund's `status`), or,"
                    " for Crypto Pay, which has no refund API, recorded as `manual` with an operator notice."
                    " `to: wallet` credits a provider payment to the customer's wallet instead."
                ),
                "security": SESSION,
                "parameters": [_id_parameter("orderID"), REASON],
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": _object(
                                {
                                    "amountMinor": {**INTEGER, "minimum": 1},
                                    "to": {"type": "string", "enum": ["provider", "wallet"]},
                                },
                                [],
                            )
                        }
                    },
                },
                "responses": {
                    "200": _ok(_object({"order": ORDER, "refunds": _array(REFUND)})),
                    "400": _error(
                        "`invalid_refund_amount` (more than is left), `invalid_refund_destination`,"
                        " `reason_required`, `invalid_body`"
                    ),
                    "401": UNAUTHORIZED,
                    "403": FORBIDDEN,
                    "404": _error("no such order (`order_not_found`)"),
                    "409": _error(
                        "the order is not paid, or refunded in full already (`order_not_refundable`); a part of a"
                        " Stars payment (`partial_refund_unsupported`); a top-up whose wallet spent the money"
                        " (`refund_exceeds_wallet`)"
                    ),
                },
            }
        },
    }
    for action, audited, summary in (
        ("pause", "paused", "Pause: the clock stops and the panel's user is disabled (SPEC 2.25)"),
        ("resume", "resumed", "Resume: the paused time is given back and the user enabled once the panel has it"),
        (
            "reprovision",
            "reprovisioned",
            "Re-provision a subscription in phase failed (paid, no access): a new create from its entitlement"
            " when that period never reached the panel, else a reconcile",
        ),
    ):
        paths[f"/v1/panel/customers/{{customerID}}/subscriptions/{{subscriptionID}}/{action}"] = {
            "post": {
                "summary": f"{summary} (subscriptions.write, audited `panel.subscription.{audited}`)",
                "security": SESSION,
                "parameters": [customer, _text_id("subscriptionID"), REASON],
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": _object(
                                {
                                    "requestId": {
                                        **REQUEST_ID,
                                        "description": "names the request: a replay queues nothing. Required here"
                                        " unless the X-Request-ID header names it",
                                    }
                                },
                            )
                        }
                    },
                },
                "responses": {
                    "202": _ok(QUEUED_CHANGE, "queued"),
                    "400": BAD_REQUEST,
                    "401": UNAUTHORIZED,
                    "403": FORBIDDEN,
                    "404": _error("no such subscription for this customer (`subscription_not_found`)"),
                    "409": _error(
                        "`already_paused`, `not_paused`, never provisioned (`not_provisioned`), or, for reprovision,"
                        " not in phase failed (`not_failed`)"
                    ),
                },
            }
        }
    return paths


CHECKOUT_TEXT = {"type": "string", "minLength": 1, "maxLength": web_checkout.TEXT_MAX, "pattern": "^[ -~]+$"}
CHECKOUT_REQUEST = _object(
    {
        "customerId": CHECKOUT_TEXT,
        "kind": {"type": "string", "enum": list(CHECKOUT_KINDS)},
        "provider": {"type": "string", "enum": list(PAYMENT_METHODS)},
        "currency": {"type": "string", "pattern": "^[A-Z]{3}$"},
        "requestId": {**CHECKOUT_TEXT, "maxLength": web_checkout.REQUEST_ID_MAX},
        "planId": INTEGER,
        "addonId": INTEGER,
        "subscriptionId": CHECKOUT_TEXT,
        "amountMinor": {
            "type": "integer",
            "minimum": 1,
            "description": "a top-up's amount; prices come from the catalogue",
        },
        "offerId": INTEGER,
        "goodsId": {**INTEGER, "description": "the goods a `goods` checkout buys, at their price in the currency"},
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
# Stored with the job that confirms and applies it, or a repeat of an event already applied.
WEBHOOK_ANSWER = _object({"outcome": {"type": "string", "enum": [webhook_intake.ACCEPTED, webhook_intake.REPLAYED]}})
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
        "400": _error("not this provider's documented notification (`malformed_webhook`); kept for audit"),
        "401": _error("a bad signature (`bad_signature`); kept for audit, nothing is applied"),
        "404": _error("this provider is not configured here (`provider_not_configured`); nothing is kept"),
        "413": _error("a body over 64 KiB (`body_too_large`); nothing is kept"),
        "429": _error(
            "more than APP_WEBHOOK_RATE_LIMIT requests a minute from this address (`too_many_requests`): deliver"
            " again after Retry-After; nothing is kept"
        ),
        "503": _error("the database is unreachable (`database_unavailable`): deliver again. Never for maintenance."),
    }

    def webhook(summary, schema, parameters=(), errors=None):
        return {
            "post": {
                "summary": summary,
                "parameters": list(parameters),
                "requestBody": {"required": True, "content": {"application/json": {"schema": schema}}},
                "responses": {
                    "200": _ok(
                        WEBHOOK_ANSWER,
                        "taken: the provider need not deliver it again; a job confirms it with the provider's API"
                        " (YooKassa) and applies it",
                    ),
                    **webhook_errors,
                    **(errors or {}),
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
                    "403": _error("the customer is blocked, by hand or by a blocklist (`customer_blocked`)"),
                    "404": _error("no such customer, plan, add-on, subscription or goods (`goods_not_found`)"),
                    "409": _error("the order or the subscription cannot take it (`order_not_payable`, …)"),
                    "422": _error(
                        "not sold this way: a plan or goods not priced in the currency (`goods_not_priced`), goods"
                        " not on sale (`goods_inactive`) or whose provider has no usable token"
                        " (`goods_provider_not_configured`), a provider not configured, a wallet that cannot cover"
                        " it (`insufficient_funds`), …"
                    ),
                    "502": _error("the provider refused or did not answer (`provider_unavailable`, …)"),
                    "503": _error("maintenance is on (`maintenance_active`), or the database is unreachable"),
                },
            }
        },
        "/v1/webhooks/yookassa": webhook(
            "YooKassa notifications (a payment's, and `refund.succeeded`); each is confirmed by fetching the"
            " payment or the refund from YooKassa's API",
            YOOKASSA_NOTIFICATION,
            errors={
                "403": _error(
                    "not from an address YooKassa notifies from (APP_YOOKASSA_WEBHOOK_ADDRESSES,"
                    " `webhook_address_refused`); the delivery is kept for audit, nothing is applied"
                )
            },
        ),
        "/v1/webhooks/cryptobot": webhook(
            "Crypto Pay (CryptoBot) updates, signed", CRYPTOBOT_UPDATE, parameters=[signature]
        ),
        "/v1/telemetry/heartbeat": {
            "post": {
                "summary": "Another installation's `installation.heartbeat` (SPEC 15.9), stored in collector mode"
                " (APP_TELEMETRY_COLLECTOR) only",
                "requestBody": {"required": True, "content": {"application/json": {"schema": HEARTBEAT}}},
                "responses": {
                    "202": _ok(_object({"id": INTEGER}), "stored"),
                    "400": _error("not exactly a heartbeat (`invalid_heartbeat`, `invalid_body`)"),
                    "404": _error("this installation does not collect telemetry (`telemetry_collector_off`)"),
                    "415": _error("not sent as application/json (`unsupported_media_type`)"),
                    "503": _error("the database is unreachable or not migrated (`database_unavailable`)"),
                },
            }
        },
    }


CAMPAIGN = _object(
    {
        "id": INTEGER,
        "kind": {"type": "string", "enum": list(CAMPAIGN_KINDS)},
        "status": {"type": "string", "enum": list(CAMPAIGN_STATUSES)},
        "audience": {"type": "string", "enum": list(AUDIENCES)},
        "planId": NULLABLE_INTEGER,
        "startAt": {**TIME, "description": "when it starts (null: a draft)"},
        "expandedAt": {**TIME, "description": "when its recipients were all written (null: still being written)"},
        "recipients": INTEGER,
        "leftOut": _object({"blocked": INTEGER, "unreachable": INTEGER}),
        "createdBy": STRING,
        "createdAt": TIME,
        "finishedAt": TIME,
        "delivery": _object({status: INTEGER for status in RECIPIENT_STATUSES}),
    }
)
CAMPAIGN_AUDIENCE = {
    "kind": {"type": "string", "enum": list(CAMPAIGN_KINDS), "description": "default: campaign"},
    "audience": {
        "type": "string",
        "enum": list(ops_campaigns.SEGMENTS),
        "description": "default: all (or the customers named in customerIds)",
    },
    "planId": {**PLAN_ID, "description": "the plan whose holders the audience `plan` is"},
    "customerIds": {
        "type": "array",
        "items": STRING,
        "minItems": 1,
        "maxItems": ops_campaigns.MAX_NAMED_CUSTOMERS,
        "description": "only these customers (without audience)",
    },
}
CAMPAIGN_REQUEST = _object(
    {
        **CAMPAIGN_AUDIENCE,
        "text": {"type": "string", "minLength": 1, "maxLength": ops_campaigns.MAX_TEXT_LENGTH},
        "startAt": {
            "type": "string",
            "format": "date-time",
            "description": "when it starts (at most a year ahead); default: now",
        },
        "draft": {"type": "boolean", "description": "true: not started until POST …/start"},
    },
    ["text"],
)
CAMPAIGN_PREVIEW = _object({"audience": INTEGER, "blocked": INTEGER, "unreachable": INTEGER, "recipients": INTEGER})
CAMPAIGN_CHANGES = {
    "start": "A draft or scheduled campaign starts now (audited `campaign.started`)",
    "pause": "The bot sends no more of a scheduled or sending campaign until resumed (audited `campaign.paused`)",
    "resume": "A paused campaign goes on (audited `campaign.resumed`)",
}


def _campaign_change(name, summary):
    return {
        "post": {
            "summary": f"{summary} (campaigns.write)",
            "security": SESSION,
            "parameters": [_id_parameter("campaignID"), REASON],
            "responses": {
                "200": _ok(_object({"campaign": CAMPAIGN})),
                "400": _error("`invalid_campaign_id`, `reason_required`"),
                "401": UNAUTHORIZED,
                "403": FORBIDDEN,
                "404": _error("no such campaign (`campaign_not_found`)"),
                "409": _error(f"the campaign's status does not allow {name} (`campaign_state_conflict`)"),
            },
        }
    }


GOODS_DELIVERY = _object(
    {
        "id": INTEGER,
        "orderId": INTEGER,
        "customerId": STRING,
        "goodsId": INTEGER,
        "goods": NULLABLE_STRING,
        "status": {"type": "string", "enum": ["pending", "submitting", "retrying", "delivered", "needs_review",
                                               "refunded", "cancelled"]},
        "attempts": INTEGER,
        "failureClass": NULLABLE_STRING,
        "errorCode": NULLABLE_STRING,
        "resolvedBy": NULLABLE_STRING,
        "createdAt": TIME,
        "updatedAt": TIME,
    }
)  # fmt: skip


GOODS = _object(
    {
        "id": INTEGER,
        "code": STRING,
        "name": STRING,
        "sku": STRING,
        "providerId": INTEGER,
        "provider": NULLABLE_STRING,
        "prices": {"type": "object", "additionalProperties": INTEGER, "description": "currency → minor units"},
        "active": BOOLEAN,
    }
)
GOODS_PROVIDER = _object(
    {
        "id": INTEGER,
        "name": STRING,
        "url": {**STRING, "description": "the base URL's origin only"},
        "tokenUsable": {**BOOLEAN, "description": "whether the sealed token opens with this shop's key (never shown)"},
    }
)
PRICES = {
    "type": "object",
    "additionalProperties": {"type": "integer", "minimum": 0},
    "minProperties": 1,
    "description": "currency (three capital letters) → price in minor units",
}


def _goods_change(summary, body, answer, errors, parameters=()):
    return {
        "post": {
            "summary": summary,
            "security": SESSION,
            "parameters": [*parameters, REASON],
            "requestBody": {"required": True, "content": {"application/json": {"schema": body}}},
            "responses": {
                answer[0]: _ok(answer[1]),
                "400": _error("bad input (`invalid_goods_field`, `invalid_prices`, `invalid_url`, `invalid_token`,"
                              " `reason_required`, `invalid_body`)"),
                "401": UNAUTHORIZED,
                "403": FORBIDDEN,
                **errors,
            },
        }
    }  # fmt: skip


def _goods_paths():
    return {
        "/v1/panel/goods": {
            **_get(
                "Goods with their prices and status, and their providers (payments.read)",
                _object({"goods": _array(GOODS), "providers": _array(GOODS_PROVIDER)}),
            ),
            **_goods_change(
                "Add goods (payments.write, audited `panel.goods.added`)",
                _object(
                    {"code": STRING, "name": STRING, "providerId": INTEGER, "sku": STRING, "prices": PRICES},
                    required=["code", "name", "providerId", "sku", "prices"],
                ),
                ("201", _object({"goods": GOODS})),
                {
                    "404": _error("no such provider (`provider_not_found`)"),
                    "409": _error("the code is taken (`goods_code_taken`)"),
                },
            ),
        },
        "/v1/panel/goods/{goodsID}": _goods_change(
            "Change goods: name, provider, SKU, the whole set of prices, on or off sale (payments.write, audited"
            " `panel.goods.changed`, `.activated`, `.deactivated`)",
            _object({"name": STRING, "providerId": INTEGER, "sku": STRING, "prices": PRICES, "active": BOOLEAN}),
            ("200", _object({"goods": GOODS})),
            {"404": _error("no such goods or provider (`goods_not_found`, `provider_not_found`)")},
            parameters=[_id_parameter("goodsID")],
        ),
        "/v1/panel/goods/providers": _goods_change(
            "Add a goods provider; its API token is sealed and never shown back (payments.write, audited"
            " `panel.goods_provider.added`)",
            _object({"name": STRING, "url": STRING, "token": STRING}, required=["name", "url", "token"]),
            ("201", _object({"provider": GOODS_PROVIDER})),
            {
                "409": _error("the name is taken (`provider_name_taken`)"),
                "503": _error("APP_DATA_ENCRYPTION_KEY is not set (`data_key_missing`)"),
            },
        ),
        "/v1/panel/goods/deliveries": _get(
            "Goods deliveries that need review, oldest first (payments.read)",
            _object({"deliveries": _array(GOODS_DELIVERY)}),
        ),
        "/v1/panel/goods/deliveries/{deliveryID}/resolve": {
            "post": {
                "summary": "Resolve a goods delivery in review (payments.write, audited"
                " `panel.goods_delivery.delivered` / `.refunded`)",
                "description": (
                    "`delivered`: the provider did sell it; the order is fulfilled. `refund`: the order is refunded"
                    " to the customer's wallet (ledger reversal, the customer told). Neither asks the provider:"
                    " a delivery in review is never submitted again (SPEC 3.1)."
                ),
                "security": SESSION,
                "parameters": [_id_parameter("deliveryID"), REASON],
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": _object({"outcome": {"type": "string", "enum": ["delivered", "refund"]}})
                        }
                    },
                },
                "responses": {
                    "200": _ok(_object({"delivery": GOODS_DELIVERY})),
                    "400": _error("`invalid_delivery_id`, `invalid_outcome`, `reason_required`, `invalid_body`"),
                    "401": UNAUTHORIZED,
                    "403": FORBIDDEN,
                    "404": _error("no such delivery (`delivery_not_found`)"),
                    "409": _error(
                        "not in review (`delivery_not_in_review`), or its order cannot be refunded (`refund_refused`)"
                    ),
                },
            }
        },
    }


PRICES = {
    "type": "object",
    "description": '{currency: minor units}, e.g. {"RUB": 19900, "XTR": 250}; a currency left out is not sold in',
    "additionalProperties": {"type": "integer", "minimum": 1},
}
PLAN = _object(
    {
        "id": INTEGER,
        "code": STRING,
        "name": STRING,
        "durationDays": INTEGER,
        "prices": PRICES,
        "trafficBytes": {**NULLABLE_INTEGER, "description": "null: unlimited"},
        "trafficGb": {**NULLABLE_INTEGER, "description": "whole GiB, rounded down; null: unlimited"},
        "deviceLimit": {**NULLABLE_INTEGER, "description": "null: unlimited"},
        "squads": _array(STRING),
        "graceHours": INTEGER,
        "trial": BOOLEAN,
        "active": {**BOOLEAN, "description": "on sale: offered in the bot and sold at checkout"},
    }
)
PLAN_FIELDS = {
    "code": {**STRING, "pattern": "^[a-z0-9][a-z0-9_-]{0,63}$"},
    "name": {**STRING, "maxLength": 100},
    "durationDays": {**INTEGER, "minimum": 1, "maximum": 3650},
    "prices": PRICES,
    "trafficGb": {**NULLABLE_INTEGER, "minimum": 1, "description": "whole GiB; null or left out: unlimited"},
    "deviceLimit": {**NULLABLE_INTEGER, "minimum": 1, "description": "null or left out: unlimited"},
    "squads": _array({**STRING, "format": "uuid"}),
    "graceHours": {**INTEGER, "minimum": 0, "maximum": 720},
    "trial": BOOLEAN,
    "active": BOOLEAN,
}
ADDON = _object(
    {
        "id": INTEGER,
        "code": STRING,
        "name": STRING,
        "prices": PRICES,
        "extraTrafficBytes": INTEGER,
        "extraTrafficGb": INTEGER,
        "extraDevices": INTEGER,
        "active": BOOLEAN,
    }
)
ADDON_FIELDS = {
    "code": {**STRING, "pattern": "^[a-z0-9][a-z0-9_-]{0,63}$"},
    "name": {**STRING, "maxLength": 100},
    "prices": PRICES,
    "extraTrafficGb": {**INTEGER, "minimum": 0},
    "extraDevices": {**INTEGER, "minimum": 0},
    "active": BOOLEAN,
}
CATALOGUE_REFUSALS = (
    "`no_price` (a plan for sale or an add-on without any price), `invalid_prices` (not a positive whole number of"
    " minor units, or an unknown currency), `invalid_duration`, `invalid_limit`, `invalid_squads`, `invalid_grace`,"
    " `invalid_code`, `invalid_name`, `invalid_flag`, `no_extra`, `unknown_field`, `reason_required`,"
    " `invalid_body`; nothing is written"
)


def _catalogue_change(summary, description, body, answer, created, id_name=None):
    responses = {
        ("201" if created else "200"): _ok(answer, "Created" if created else "Changed"),
        "400": _error(CATALOGUE_REFUSALS + (f", `invalid_{id_name[:-2].lower()}_id`" if id_name else "")),
        "401": UNAUTHORIZED,
        "403": FORBIDDEN,
        "409": _error("the code names another plan or add-on (`code_taken`)"),
    }
    if id_name:
        responses["404"] = _error(
            f"no such {'plan' if id_name == 'planID' else 'add-on'} (`{id_name[:-2].lower()}_not_found`)"
        )
    parameters = ([_id_parameter(id_name)] if id_name else []) + [REASON]
    return {
        "post": {
            "summary": summary,
            "description": description,
            "security": SESSION,
            "parameters": parameters,
            "requestBody": {"required": True, "content": {"application/json": {"schema": body}}},
            "responses": responses,
        }
    }


def _catalogue_paths():
    kept = (
        " A price change applies to orders placed after it: an order keeps the amount it was placed at"
        " (docs/commerce.md)."
    )
    return {
        "/v1/panel/plans": {
            **_get(
                "Every plan and add-on with its prices, on sale first (payments.read)",
                _object({"plans": _array(PLAN), "addons": _array(ADDON)}),
            ),
            **_catalogue_change(
                "Create a plan (payments.write, audited `catalogue.plan.created`)",
                "A plan that is not a trial needs a price in at least one currency." + kept,
                _object(PLAN_FIELDS, ["code", "name", "durationDays", "prices"]),
                _object({"plan": PLAN}),
                created=True,
            ),
        },
        "/v1/panel/plans/{planID}": _catalogue_change(
            "Change a plan, or put it on or off sale with `active` (payments.write, audited"
            " `catalogue.plan.changed` / `.activated` / `.deactivated`)",
            "The fields given replace the plan's; `prices` replaces every price. There is no delete: a plan off sale"
            " is not offered nor sold, and whoever holds it keeps their period." + kept,
            _object(PLAN_FIELDS, []),
            _object({"plan": PLAN}),
            created=False,
            id_name="planID",
        ),
        "/v1/panel/addons": _catalogue_change(
            "Create an add-on (payments.write, audited `catalogue.addon.created`)",
            "An add-on adds traffic, devices or both, and needs a price in at least one currency." + kept,
            _object(ADDON_FIELDS, ["code", "name", "prices"]),
            _object({"addon": ADDON}),
            created=True,
        ),
        "/v1/panel/addons/{addonID}": _catalogue_change(
            "Change an add-on, or put it on or off sale with `active` (payments.write, audited"
            " `catalogue.addon.changed` / `.activated` / `.deactivated`)",
            "The fields given replace the add-on's; `prices` replaces every price." + kept,
            _object(ADDON_FIELDS, []),
            _object({"addon": ADDON}),
            created=False,
            id_name="addonID",
        ),
    }


def _campaign_paths():
    paths = {
        "/v1/panel/campaigns": {
            "post": {
                "summary": "Queue a campaign or an announcement for the bot to send: now, at startAt, or as a draft"
                " (campaigns.write, audited `campaign.created`)",
                "security": SESSION,
                "parameters": [REASON],
                "requestBody": {"required": True, "content": {"application/json": {"schema": CAMPAIGN_REQUEST}}},
                "responses": {
                    "201": _ok(_object({"campaign": CAMPAIGN}), "Queued"),
                    "400": _error(
                        "`invalid_campaign_kind`, `invalid_campaign_text`, `invalid_audience`, `invalid_schedule`, …"
                    ),
                    "401": UNAUTHORIZED,
                    "403": FORBIDDEN,
                    "404": _error("no such plan (`plan_not_found`)"),
                    "422": _error(
                        "started now, nobody in the audience can be reached through the bot (`empty_audience`)"
                    ),
                },
            }
        },
        "/v1/panel/campaigns/preview": {
            "post": {
                "summary": "How many customers with a chat the audience holds now, and how many of them a campaign"
                " would leave out: blocked by an operator (campaigns only) or unreachable (campaigns.write; writes"
                " nothing)",
                "security": SESSION,
                "parameters": [],
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": {
                                **_object(CAMPAIGN_AUDIENCE, []),
                                "additionalProperties": True,
                                "description": "a campaign's body: text, startAt and draft are ignored",
                            }
                        }
                    },
                },
                "responses": {
                    "200": _ok(_object({"preview": CAMPAIGN_PREVIEW})),
                    "400": _error("`invalid_campaign_kind`, `invalid_audience`"),
                    "401": UNAUTHORIZED,
                    "403": FORBIDDEN,
                    "404": _error("no such plan (`plan_not_found`)"),
                },
            }
        },
        "/v1/panel/campaigns/{campaignID}": _get(
            "A campaign and its recipients per delivery status (campaigns.write)",
            _object({"campaign": CAMPAIGN}),
            [_id_parameter("campaignID")],
            "no such campaign (`campaign_not_found`)",
        ),
    }
    for name, summary in CAMPAIGN_CHANGES.items():
        paths[f"/v1/panel/campaigns/{{campaignID}}/{name}"] = _campaign_change(name, summary)
    return paths


TICKET = _object(
    {
        "id": INTEGER,
        "customerId": STRING,
        "status": {"type": "string", "enum": list(TICKET_STATUSES)},
        "createdAt": TIME,
        "updatedAt": TIME,
    }
)
SUPPORT_MESSAGE = _object(
    {
        "id": INTEGER,
        "author": {"type": "string", "enum": list(AUTHORS)},
        "operator": NULLABLE_STRING,
        "text": STRING,
        "pushStatus": {"type": ["string", "null"], "enum": [*PUSH_STATUSES, None]},
        "pushedAt": TIME,
        "createdAt": TIME,
        "attachments": _array(_object({"digest": STRING, "sizeBytes": INTEGER, "contentType": STRING})),
    }
)


def _support_paths():
    return {
        "/v1/panel/support/tickets": _get(
            "Support tickets of one status (default open), most recently active first (support.read)",
            _object({"status": STRING, "tickets": _array(TICKET)}),
            [
                _query("status", {"type": "string", "enum": list(TICKET_STATUSES)}),
                _query("limit", {"type": "integer", "minimum": 1, "maximum": web_support.MAX_PAGE}, "default: 50"),
            ],
        ),
        "/v1/panel/support/tickets/{ticketID}": _get(
            "A ticket and its messages with their attachments' digests (support.read)",
            _object({"ticket": TICKET, "messages": _array(SUPPORT_MESSAGE)}),
            [_id_parameter("ticketID")],
            "no such ticket (`ticket_not_found`)",
        ),
        "/v1/panel/support/tickets/{ticketID}/replies": {
            "post": {
                "summary": "Reply to a ticket; the bot pushes it to the customer's chat (support.write, audited"
                " `support.replied`)",
                "security": SESSION,
                "parameters": [_id_parameter("ticketID"), {**REASON, "required": False}],
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": _object(
                                {"text": {"type": "string", "minLength": 1, "maxLength": ops_support.MAX_TEXT_LENGTH}}
                            )
                        }
                    },
                },
                "responses": {
                    "201": _ok(_object({"message": SUPPORT_MESSAGE}), "Queued for the bot"),
                    "400": _error("`invalid_support_text`, `invalid_ticket_id`, `reason_too_long`, `invalid_body`"),
                    "401": UNAUTHORIZED,
                    "403": FORBIDDEN,
                    "404": _error("no such ticket (`ticket_not_found`)"),
                    "409": _error("the ticket is closed (`ticket_closed`)"),
                },
            }
        },
    }


OPERATOR = _object(
    {
        "id": INTEGER,
        "username": STRING,
        "permissions": _array(STRING),
        "createdAt": TIME,
        "disabledAt": TIME,
        "liveSessions": INTEGER,
    }
)


def _operator_paths():
    def change(summary, body=None):
        post = {
            "summary": summary + " (operators.write, audited with the reason)",
            "security": SESSION,
            "parameters": [_id_parameter("operatorID"), REASON],
            "responses": {
                "200": _ok(_object({"operator": OPERATOR})),
                "400": _error("`invalid_operator_id`, `reason_required`, `reason_too_long`, `invalid_body`"
                              + (", `weak_password`" if body else "")),
                "401": UNAUTHORIZED,
                "403": FORBIDDEN,
                "404": _error("no such operator (`operator_not_found`)"),
                "409": _error("already so (`state_conflict`)"),
            },
        }  # fmt: skip
        if body:
            post["requestBody"] = {"required": True, "content": {"application/json": {"schema": body}}}
        return {"post": post}

    return {
        "/v1/panel/operators": _get(
            "Every operator, with permissions, whether disabled and live sessions (operators.write)",
            _object({"operators": _array(OPERATOR)}),
        ),
        "/v1/panel/operators/{operatorID}/disable": change("Disable an operator: no sign-in, sessions end now"),
        "/v1/panel/operators/{operatorID}/enable": change("Let a disabled operator sign in again"),
        "/v1/panel/operators/{operatorID}/revoke-sessions": change("End every session of an operator now"),
        "/v1/panel/operators/{operatorID}/password": change(
            "Set an operator's password; their sessions end",
            _object({"password": {"type": "string", "minLength": 12, "maxLength": 1024}}),
        ),
    }


ANOMALY_RULE = _object(
    {
        "rule": {"type": "string", "enum": list(anomalies.RULES)},
        "unit": {"type": "string", "enum": ["percent", "count", "seconds"]},
        "breachedWhen": {"type": "string", "enum": [anomalies.ABOVE, anomalies.BELOW]},
        "threshold": INTEGER,
        "windowMinutes": INTEGER,
        "enabled": BOOLEAN,
        "current": NULLABLE_INTEGER,
        "breached": BOOLEAN,
        "updatedAt": TIME,
        "updatedBy": NULLABLE_STRING,
    }
)


def _anomaly_paths():
    min_window = anomalies.MIN_WINDOW_MINUTES
    rule = {"name": "rule", "in": "path", "required": True, "schema": {"type": "string", "maxLength": 64}}
    change = _object(
        {
            "threshold": INTEGER,
            "windowMinutes": {**INTEGER, "minimum": min_window, "maximum": anomalies.MAX_WINDOW_MINUTES},
            "enabled": BOOLEAN,
        },
        [],
    )
    return {
        "/v1/panel/system/anomaly-rules": _get(
            "Every anomaly rule: its threshold, window, whether enabled and its measure now, null with too few"
            " samples (system.read)",
            _object({"rules": _array(ANOMALY_RULE)}),
        ),
        "/v1/panel/system/anomaly-rules/{rule}": {
            "put": {
                "summary": "Change a rule's threshold, window or switch (system.write, audited)",
                "description": (
                    "Audited `panel.anomaly_rule.changed`. A threshold is a whole number in the rule's unit: percent"
                    " 1-100, a count from 1, seconds from 60."
                    " A breached rule queues one `anomaly` operator notice per window (SPEC 15.7)."
                ),
                "security": SESSION,
                "parameters": [rule, REASON],
                "requestBody": {"required": True, "content": {"application/json": {"schema": change}}},
                "responses": {
                    "200": _ok(_object({"rule": ANOMALY_RULE})),
                    "400": _error(
                        "`invalid_threshold`, `invalid_window`, `invalid_enabled`, `reason_required`, `invalid_body`"
                    ),
                    "401": UNAUTHORIZED,
                    "403": FORBIDDEN,
                    "404": _error("no such rule (`unknown_anomaly_rule`)"),
                },
            }
        },
    }


PERSONAL_OFFER = _object(
    {
        "id": INTEGER,
        "customerId": STRING,
        "planId": NULLABLE_INTEGER,
        "discountPercent": NULLABLE_INTEGER,
        "discountMinor": NULLABLE_INTEGER,
        "currency": NULLABLE_STRING,
        "status": {"type": "string", "enum": ["active", "used", "expired"]},
        "expiresAt": TIME,
        "usedOrderId": NULLABLE_INTEGER,
        "createdAt": TIME,
    }
)


def _offer_paths():
    body = _object(
        {
            "discountPercent": {**INTEGER, "minimum": 1, "maximum": 100},
            "discountMinor": {**INTEGER, "minimum": 1},
            "currency": STRING,
            "planId": {**INTEGER, "minimum": 1},
            "validDays": {**INTEGER, "minimum": 1, "maximum": 365},
        },
        ["validDays"],
    )
    return {
        "/v1/panel/customers/{customerID}/offers": {
            "post": {
                "summary": "Make a personal offer for a customer (payments.write, audited)",
                "description": (
                    "Audited `panel.personal_offer.created`. A percentage, or an amount in one currency, off one"
                    " plan (`planId`) or any, until `validDays`"
                    " from now (SPEC 13.11). The bot applies the customer's best usable offer to what they buy;"
                    " the order that is paid with it uses it up."
                ),
                "security": SESSION,
                "parameters": [_text_id("customerID"), REASON],
                "requestBody": {"required": True, "content": {"application/json": {"schema": body}}},
                "responses": {
                    "201": _ok(_object({"offer": PERSONAL_OFFER}), "made"),
                    "400": _error(
                        "`invalid_discount`, `invalid_validity`, `invalid_plan_id`, `reason_required`, `invalid_body`"
                    ),
                    "401": UNAUTHORIZED,
                    "403": FORBIDDEN,
                    "404": _error("no such customer or plan (`customer_not_found`, `plan_not_found`)"),
                    "409": _error("the plan is not on sale (`plan_inactive`)"),
                },
            }
        },
    }


def build():
    app = bottle.Bottle()
    body = json.dumps(document(), indent=2, sort_keys=True)

    @app.get("/v1/openapi.json")
    def openapi():
        bottle.response.content_type = "application/json"
        return body

    return app


BULK_ACTION = _object(
    {
        "id": INTEGER,
        "action": {"type": "string", "enum": list(BULK_ACTIONS)},
        "status": {"type": "string", "enum": list(BULK_STATUSES)},
        "planId": NULLABLE_INTEGER,
        "days": NULLABLE_INTEGER,
        "squadCount": NULLABLE_INTEGER,
        "itemCount": INTEGER,
        "createdBy": STRING,
        "createdAt": TIME,
        "confirmedBy": NULLABLE_STRING,
        "confirmedAt": TIME,
        "reason": NULLABLE_STRING,
        "finishedAt": TIME,
        "progress": _object(
            {
                "items": _object({status: INTEGER for status in ITEM_STATUSES}),
                "operations": _object({status: INTEGER for status in OPERATION_STATUSES}),
            }
        ),
    }
)
BULK_ITEM = _object(
    {
        "position": INTEGER,
        "subscriptionId": STRING,
        "customerId": STRING,
        "status": {"type": "string", "enum": list(ITEM_STATUSES)},
        "operationId": NULLABLE_INTEGER,
        "operationStatus": {"type": ["string", "null"], "enum": [*OPERATION_STATUSES, None]},
        "errorCode": NULLABLE_STRING,
        "appliedAt": TIME,
    }
)
BULK_REQUEST = _object(
    {
        "action": {
            "type": "string",
            "enum": list(BULK_ACTIONS),
            "description": "extend and set_squads: the active subscriptions (of planId, or every one for extend);"
            " pause and resume: the subscriptionIds",
        },
        "planId": {"type": "integer", "minimum": 1, "description": "extend: optional; set_squads: required"},
        "days": {"type": "integer", "minimum": 1, "maximum": fulfillment_bulk.MAX_DAYS, "description": "extend"},
        "squadIds": {
            "type": "array",
            "items": {"type": "string", "format": "uuid"},
            "maxItems": fulfillment_bulk.MAX_SQUADS,
            "description": "set_squads: the squads every subscriber gets",
        },
        "subscriptionIds": {
            "type": "array",
            "items": STRING,
            "minItems": 1,
            "maxItems": fulfillment_bulk.MAX_LISTED,
            "description": "pause and resume",
        },
    },
    ["action"],
)


def _bulk_paths():
    one = [_id_parameter("bulkActionID")]
    not_found = "no such bulk action (`bulk_action_not_found`)"
    paths = {
        "/v1/panel/bulk-actions": {
            "post": {
                "summary": "Preview a bulk change: its items are frozen and shown with their count; nothing changes"
                " until it is confirmed (subscriptions.write, audited `panel.bulk.previewed`)",
                "security": SESSION,
                "requestBody": {"required": True, "content": {"application/json": {"schema": BULK_REQUEST}}},
                "responses": {
                    "201": _ok(
                        _object({"bulkAction": BULK_ACTION, "items": _array(BULK_ITEM)}),
                        f"Previewed; the first {web_bulk.PREVIEW_ROWS} items",
                    ),
                    "400": _error(
                        "`invalid_bulk_action`, `invalid_days`, `invalid_plan`, `plan_required`, `invalid_squads`,"
                        " `invalid_subscriptions`, `unknown_subscriptions`, `invalid_body`, …"
                    ),
                    "401": UNAUTHORIZED,
                    "403": FORBIDDEN,
                    "422": _error("no subscription fits (`empty_selection`), or too many (`too_many_items`)"),
                },
            },
            **_get(
                "The newest bulk actions with their progress (subscriptions.read)",
                _object({"bulkActions": _array(BULK_ACTION), "nextCursor": NULLABLE_STRING}),
                PAGE,
            ),
        },
        "/v1/panel/bulk-actions/{bulkActionID}": _get(
            "A bulk action and its progress: items per status, and their operations per status (subscriptions.read)",
            _object({"bulkAction": BULK_ACTION}),
            one,
            not_found,
        ),
        "/v1/panel/bulk-actions/{bulkActionID}/items": _get(
            "A bulk action's frozen items in position order (subscriptions.read)",
            _object({"bulkActionId": INTEGER, "items": _array(BULK_ITEM), "nextCursor": NULLABLE_STRING}),
            one + PAGE,
            not_found,
        ),
    }
    summaries = {
        "confirm": "Confirm a previewed bulk action: the bulk_actions pass applies its items, each change audited"
        " with this reason",
        "pause": "Pause a running bulk action: no further item is applied",
        "resume": "Resume a paused bulk action",
        "cancel": "Cancel a bulk action: its pending items are never applied",
    }
    for verb, summary in summaries.items():
        paths[f"/v1/panel/bulk-actions/{{bulkActionID}}/{verb}"] = {
            "post": {
                "summary": f"{summary} (subscriptions.write, audited `panel.bulk.{fulfillment_bulk.AUDITED[verb]}`)",
                "security": SESSION,
                "parameters": [*one, REASON],
                "responses": {
                    "200": _ok(_object({"bulkAction": BULK_ACTION})),
                    "400": BAD_REQUEST,
                    "401": UNAUTHORIZED,
                    "403": FORBIDDEN,
                    "404": _error(not_found),
                    "409": _error("the action's state does not allow it (`bulk_action_state`)"),
                },
            }
        }
    return paths
