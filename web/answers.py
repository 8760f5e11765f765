"""What every JSON route shares: timestamps, JSON answers and bodies, the operator token,
and the 503 of a process whose database is unreachable or not migrated."""

import base64
import hmac
import json
import logging
import weakref

import bottle

import migrations
from models.base import db
from web import problems
from web.problems import Problem

logger = logging.getLogger("omniflow.web")

MAX_BODY_BYTES = 64 * 1024
JSON_MEDIA_TYPE = "application/json"


def iso(value):
    return value.isoformat(timespec="seconds") + "Z" if value else None


def answered(route, *args, **kwargs):
    """Run a route: a raised Problem becomes its problem+json answer, and a pooled
    connection the route opened goes back to the pool."""
    try:
        return route(*args, **kwargs)
    except Problem as error:
        return problems.problem(error.status, error.code, error.detail)
    finally:
        if not db.is_closed() and not db.in_transaction():
            db.close()


def json_answer(status, body):
    bottle.response.status = status
    bottle.response.content_type = "application/json"
    bottle.response.set_header(problems.REQUEST_ID_HEADER, problems.request_id())
    return json.dumps(body)


def json_body():
    """The request's JSON object, or a 400 invalid_body (a 413 body_too_large over MAX_BODY_BYTES).

    A body sent as anything but application/json is a 415 before it is read: a
    page of another site can send a form (text/plain, urlencoded) without asking
    the browser's permission, but not a JSON request."""
    media_type = bottle.request.content_type.partition(";")[0].strip().lower()
    if media_type != JSON_MEDIA_TYPE:
        raise Problem(
            415,
            problems.UNSUPPORTED_MEDIA_TYPE,
            f"the body must be sent as Content-Type: {JSON_MEDIA_TYPE} (got {media_type[:60] or 'none'})",
        )
    raw = bottle.request.body.read(MAX_BODY_BYTES + 1)
    if len(raw) > MAX_BODY_BYTES:
        raise Problem(413, problems.BODY_TOO_LARGE, f"a request body is at most {MAX_BODY_BYTES} bytes")
    try:
        body = json.loads(raw or b"null")
    except ValueError:
        raise Problem(400, problems.INVALID_BODY, "the body must be a JSON object") from None
    if not isinstance(body, dict):
        raise Problem(400, problems.INVALID_BODY, "the body must be a JSON object")
    return body


def bearer_refusal(operator_token, name="operator"):
    """None when the request carries the operator token (or the `name`d token given in its
    place; compared in constant time), else the 401 answer. Without a configured token
    nothing is accepted."""
    scheme, _, credentials = bottle.request.get_header("Authorization", "").partition(" ")
    # RFC 7235: the scheme is case-insensitive, and spaces may separate it from the token.
    given = credentials.lstrip(" ") if scheme.lower() == "bearer" else ""
    if operator_token and hmac.compare_digest(given.encode(), operator_token.encode()):
        return None
    bottle.response.set_header("WWW-Authenticate", "Bearer")
    return problems.problem(401, problems.UNAUTHORIZED, f"a valid {name} bearer token is required")


def client_address():
    """The client's address as waitress reports it: the peer's, or, behind the proxy
    APP_TRUSTED_PROXY names, the one its X-Forwarded-For gives (web.app.server_options).
    Never read from the request's headers here: a client could choose it."""
    return bottle.request.environ.get("REMOTE_ADDR") or ""


def limit_param(raw, default, maximum):
    """A page size from the query: `default` when absent, else 1..maximum or a 400 invalid_limit."""
    if raw is None or raw == "":
        return default
    if not plain_digits(raw) or not 1 <= int(raw) <= maximum:
        raise Problem(400, problems.INVALID_LIMIT, f"limit must be a whole number from 1 to {maximum}")
    return int(raw)


def id_param(raw, code, what):
    """A positive row id from the path or query, else a 400 with `code`."""
    row_id = parsed_id(raw)
    if row_id is None:
        raise Problem(400, code, f"{what} is a positive whole number")
    return row_id


def parsed_id(raw):
    """A positive row id of at most 18 digits (below BIGINT's limit, so no query overflows), or None."""
    if not isinstance(raw, str) or not plain_digits(raw) or len(raw) > 18 or int(raw) == 0:
        return None
    return int(raw)


def cursor_text(raw):
    """The text inside a cursor this API returned (unpadded URL-safe base64), or a 400 invalid_cursor."""
    try:
        return base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)).decode()
    except (ValueError, UnicodeDecodeError):
        raise bad_cursor() from None


def bad_cursor():
    return Problem(400, problems.INVALID_CURSOR, "cursor must be one this API returned")


def plain_digits(raw):
    # str.isdigit() is also true for "²" or "٣", which int() refuses: plain ASCII digits only.
    return raw.isascii() and raw.isdigit()


_schema_current = weakref.WeakSet()  # databases seen migrated (release migrates before web starts)


def require_schema(code, what):
    """A 503 with `code` when this process cannot reach a migrated database; `what`
    names it for the answer ("the job queue", "the database")."""
    if db.obj in _schema_current:
        return
    try:
        waiting = migrations.pending(db.obj)
    except Exception:
        logger.exception("%s unreachable", what)
        raise Problem(503, code, f"{what} is unreachable") from None
    if waiting:
        raise Problem(503, code, f"{what}'s schema is not migrated")
    _schema_current.add(db.obj)
