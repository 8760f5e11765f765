"""Pages an operator uses in a browser (SPEC 4.4): server-rendered, no build step.

/panel/login, and System → Operations (fulfillment operations, each with its
history, and Retry / Cancel asking for a reason), Drift, Outbox (with its
destinations: pending, retrying and dead per destination; Add and Remove
asking for a reason), Blocklists (each source's last refresh, status, list
size and blocked customers; Add and Remove asking for a reason) and Queue
(the job queue's rows: "jobs" means queue rows only; the panel API's path
`/v1/panel/system/jobs` is SPEC 4.2's name for the operations). The shop's
pages (Home, Customers, …) are web/backoffice_pages.py. A page needs
the same session and permission as the API behind it; without a session it
sends the browser to the login page, without the permission it answers 403,
and while the database is unreachable or not migrated 503. Retry and Cancel
call the panel API itself (`/v1/panel/system/jobs/{id}/retry|cancel` with
`X-Operator-Reason`), so the rules, the 409 and the audit are the API's.
Times are shown in the operator's time zone (web/local_time.py), error codes
with their explanation (web/explanations.py), and the order or subscription
a key names as a link (web/references.py).
Nothing here shows a subscription link, a provider body, squad ids, the
desired state or request/response summaries: templates escape everything,
and drift values are reduced to what an operator compares.
"""

import datetime
import json
import os
from functools import wraps

import bottle

from jobs import client
from jobs.engine.executor import job_sql
from models.base import db, utcnow
from models.fulfillment import (
    OPERATION_STATUSES,
    OPERATIONS,
    EntitlementDrift,
    FulfillmentHistory,
    FulfillmentOperation,
)
from models.ops import MaintenanceState, OutboxEvent
from ops import blocklists, maintenance, operators, outbox
from web import guards, local_time, panel, problems
from web.answers import plain_digits
from web.explanations import explained
from web.problems import Problem
from web.references import linked

TEMPLATES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates")
CHART_MINUTES = 60
CHART_WIDTH, CHART_HEIGHT = 720, 120
DEAD_LETTER_ROWS = 50
OUTBOX_ROWS = 500
DRIFT_ROWS = 500
DRIFT_REPAIRED_DAYS = 7
# What the login page says when a sign-in succeeded but the browser kept no cookie.
COOKIE_DROPPED_SECURE = (
    "Signed in, but this browser did not keep the session cookie. It is a Secure cookie, which browsers keep "
    "only over https (or on localhost): open the panel over https, or, for development over plain HTTP, set "
    "APP_COOKIE_SECURE=false for the web process."
)
COOKIE_DROPPED = "Signed in, but this browser did not keep the session cookie: allow cookies for this site."


def render(name, **values):
    """A template, with what every page formats by: times in the operator's zone (`iso`),
    error codes explained (`explained`), keys with the records they name linked (`linked`), and the
    nonce its inline scripts carry (`nonce`: web/guards.py's Content-Security-Policy runs no others)."""
    bottle.response.content_type = "text/html; charset=utf-8"
    zone = local_time.zone_of(values.get("operator"))
    return bottle.template(
        name,
        template_lookup=[TEMPLATES],
        iso=lambda value: local_time.local_iso(value, zone),
        explained=explained,
        linked=linked,
        nonce=guards.script_nonce(),
        **values,
    )


def page(permission=None):
    """A page for a signed-in operator with `permission` (any signed-in operator when None);
    login redirect or 403 otherwise."""

    def decorate(view):
        @wraps(view)
        def wrapper(*args, **kwargs):
            operator = None
            try:
                panel.require_database()
                operator = panel.current_operator()
                if operator is None:
                    return bottle.redirect("/panel/login", 303)
                if permission and permission not in operator.permission_set:
                    bottle.response.status = 403
                    return render("denied", operator=operator, permission=permission)
                return view(operator, *args, **kwargs)
            except Problem as error:
                bottle.response.status = error.status
                title = bottle.HTTP_CODES.get(error.status, "Error")
                return render("problem", operator=operator, title=title, detail=error.detail)
            finally:
                if not db.is_closed() and not db.in_transaction():
                    db.close()

        return wrapper

    return decorate


def drift_value(kind, stored):
    """What an operator compares, never an identifier: squads become a count."""
    try:
        value = json.loads(stored).get("value")
    except (ValueError, AttributeError):
        return "?"
    if kind == "squads":
        return f"{len(value or [])} squads"
    if kind == "missing_remote":
        return "user exists" if value else "no user"
    if kind == "device_limit" and value is None:
        return "panel fallback"  # the panel's own null: its HWID_FALLBACK_DEVICE_LIMIT applies
    if kind in ("traffic", "device_limit"):
        return "unlimited" if value in (None, 0) else str(value)
    if kind in ("expiry", "status"):
        return str(value)
    return "changed"


def _drift_rows(*conditions):
    return [
        {
            "entitlement_id": drift.entitlement_id,
            "kind": drift.kind,
            "expected": drift_value(drift.kind, drift.expected),
            "observed": drift_value(drift.kind, drift.observed),
            "detected_at": drift.detected_at,
            "resolved_at": drift.resolved_at,
        }
        for drift in EntitlementDrift.select()
        .where(*conditions)
        .order_by(EntitlementDrift.detected_at.desc())
        .limit(DRIFT_ROWS)
    ]


def _age(created_at, now):
    seconds = max(0, int((now - created_at).total_seconds()))
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h"


def chart(per_minute, now, zone):
    """Bars per minute over the last hour: completed (green) above failed (red), labelled in `zone`."""
    end = now.replace(second=0, microsecond=0)
    minutes = [end - datetime.timedelta(minutes=CHART_MINUTES - 1 - i) for i in range(CHART_MINUTES)]
    counts = {}
    for minute, state, count in per_minute:
        key = (minute, "completed" if state == "completed" else "failed")
        counts[key] = counts.get(key, 0) + count
    peak = max(
        [1] + [sum(counts.get((m.strftime("%Y-%m-%d %H:%M"), s), 0) for s in ("completed", "failed")) for m in minutes]
    )
    step = CHART_WIDTH / CHART_MINUTES
    bars = []
    for index, minute in enumerate(minutes):
        label = minute.strftime("%Y-%m-%d %H:%M")
        completed, failed = counts.get((label, "completed"), 0), counts.get((label, "failed"), 0)
        base = CHART_HEIGHT
        for value, fill, word in ((completed, "#12b76a", "completed"), (failed, "#f04438", "failed")):
            height = round(value / peak * CHART_HEIGHT, 1)
            if height:
                base -= height
                bars.append(
                    {
                        "x": round(index * step, 1),
                        "y": base,
                        "w": round(step - 1, 1),
                        "h": height,
                        "fill": fill,
                        "title": f"{local_time.local_minute(minute, zone)}: {value} {word}",
                    }
                )
    return {
        "bars": bars,
        "width": CHART_WIDTH,
        "height": CHART_HEIGHT,
        "peak": peak,
        "start": local_time.local_minute(minutes[0], zone),
        "end": f"{local_time.local_minute(minutes[-1], zone)} {zone.key}",
    }


def build(secure_cookies=True):
    app = bottle.Bottle()

    @app.get("/panel/login")
    def login():
        return render("login", cookie_dropped=json.dumps(COOKIE_DROPPED_SECURE if secure_cookies else COOKIE_DROPPED))

    @app.get("/panel/system/operations")
    @page(operators.SYSTEM_READ)
    def operations_page(operator):
        query = bottle.request.query
        status = query.get("status") or panel.DEFAULT_STATUS
        if status not in OPERATION_STATUSES:
            raise Problem(400, problems.INVALID_STATUS, f"a status is one of {', '.join(OPERATION_STATUSES)}")
        if query.get("operation") and query.get("operation") not in OPERATIONS:
            raise Problem(400, problems.INVALID_OPERATION, f"an operation is one of {', '.join(OPERATIONS)}")
        operation = query.get("operation") or None
        entitlement = query.get("entitlementId") or ""
        entitlement_id = int(entitlement) if plain_digits(entitlement) and len(entitlement) <= 18 else None
        rows, next_cursor = panel.operations_page(
            status, operation, entitlement_id, query.get("cursor"), panel.DEFAULT_PAGE
        )
        return render(
            "operations",
            operator=operator,
            rows=rows,
            next_cursor=next_cursor,
            status=status,
            operation=operation,
            entitlement_id=entitlement_id,
            statuses=OPERATION_STATUSES,
            operations=OPERATIONS,
            can_write=operators.SYSTEM_WRITE in operator.permission_set,
        )

    @app.get("/panel/system/operations/<operation_id>")
    @page(operators.SYSTEM_READ)
    def history_page(operator, operation_id):
        op = (
            FulfillmentOperation.get_or_none(FulfillmentOperation.id == int(operation_id))
            if plain_digits(operation_id) and len(operation_id) <= 18
            else None
        )
        if op is None:
            raise Problem(404, problems.OPERATION_NOT_FOUND, f"operation {operation_id[:20]} does not exist")
        history = (
            FulfillmentHistory.select()
            .where(FulfillmentHistory.operation == op.id)
            .order_by(FulfillmentHistory.id)
            .limit(1000)
        )
        return render("history", operator=operator, op=op, history=list(history))

    @app.get("/panel/system/drift")
    @page(operators.SYSTEM_READ)
    def drift_page(operator):
        now = utcnow()
        rows = _drift_rows(EntitlementDrift.status == "open")
        # Reconcile closes a drift in the run that repairs it: without these, users a panel lost and
        # reconcile recreated would leave no trace on this page.
        repaired = _drift_rows(
            EntitlementDrift.status == "resolved",
            EntitlementDrift.resolved_at >= now - datetime.timedelta(days=DRIFT_REPAIRED_DAYS),
        )
        return render(
            "drift",
            operator=operator,
            rows=rows,
            repaired=repaired,
            repaired_days=DRIFT_REPAIRED_DAYS,
            missing_open=sum(row["kind"] == "missing_remote" for row in rows),
            missing_repaired=sum(row["kind"] == "missing_remote" for row in repaired),
        )

    @app.get("/panel/system/outbox")
    @page(operators.SYSTEM_READ)
    def outbox_page(operator):
        now = utcnow()
        pending = (
            OutboxEvent.select(OutboxEvent.topic, OutboxEvent.created_at)
            .where(OutboxEvent.published_at.is_null())
            .order_by(OutboxEvent.created_at)
            .limit(OUTBOX_ROWS)
        )
        counts = outbox.delivery_counts()
        return render(
            "outbox",
            operator=operator,
            rows=[(event.topic, _age(event.created_at, now)) for event in pending],
            destinations=[panel.destination_json(d, counts) for d in outbox.active_destinations()],
            can_write=operators.SYSTEM_WRITE in operator.permission_set,
        )

    @app.get("/panel/system/blocklists")
    @page(operators.SYSTEM_READ)
    def blocklists_page(operator):
        return render(
            "blocklists",
            operator=operator,
            sources=panel.blocklist_sources_json(),
            max_sources=blocklists.MAX_SOURCES,
            can_write=operators.SYSTEM_WRITE in operator.permission_set,
        )

    @app.get("/panel/system/queue")
    @page(operators.SYSTEM_READ)
    def queue_page(operator):
        now = utcnow()
        per_minute = job_sql().finished_per_minute(now - datetime.timedelta(minutes=CHART_MINUTES))
        return render(
            "queue",
            operator=operator,
            counts=sorted(client.counts().items()),
            chart=chart(per_minute, now, local_time.zone_of(operator)),
            dead=client.dead_letter(limit=DEAD_LETTER_ROWS),
            maintenance=MaintenanceState.get_by_id(maintenance.MAINTENANCE_ROW),
            can_write=operators.SYSTEM_WRITE in operator.permission_set,
        )

    return app
