"""The panel API of bulk actions (SPEC 15.6, 2.19): preview a change to many subscriptions, confirm it, follow it.

POST /v1/panel/bulk-actions {action, planId?, days?, squadIds?, subscriptionIds?}   preview: the frozen list
                                                     (subscriptions.write, audited)
GET  /v1/panel/bulk-actions                          the newest actions (subscriptions.read)
GET  /v1/panel/bulk-actions/{id}                     one action with its progress (subscriptions.read)
GET  /v1/panel/bulk-actions/{id}/items               its items in position order (subscriptions.read)
POST /v1/panel/bulk-actions/{id}/confirm|pause|resume|cancel   (subscriptions.write, X-Operator-Reason, audited)

A preview changes no subscription, so it needs no reason (its audit event
names who made it); the confirmation carries the reason every item's change
is audited with. Squad ids are shown as a count, as everywhere in the panel.
"""

import bottle

from fulfillment import bulk
from models.bulk import BulkAction
from ops import operators
from web import backoffice, panel, problems
from web.answers import id_param, iso, json_answer, json_body, limit_param
from web.problems import Problem

PREVIEW_ROWS = 50
FIELDS = {"action", "planId", "days", "squadIds", "subscriptionIds"}


def bulk_json(action, with_progress=True):
    answer = {
        "id": action.id,
        "action": action.action,
        "status": action.status,
        "planId": action.plan_id,
        "days": action.days,
        "squadCount": None if action.squads is None else len(action.squads),
        "itemCount": action.item_count,
        "createdBy": action.created_by,
        "createdAt": iso(action.created_at),
        "confirmedBy": action.confirmed_by,
        "confirmedAt": iso(action.confirmed_at),
        "reason": action.reason,
        "finishedAt": iso(action.finished_at),
    }
    if with_progress:
        answer["progress"] = bulk.progress(action.id)
    return answer


def item_json(row):
    return {
        "position": row["position"],
        "subscriptionId": row["subscription_id"],
        "customerId": row["customer_id"],
        "status": row["status"],
        "operationId": row["operation_id"],
        "operationStatus": row["operation_status"],
        "errorCode": row["error_code"],
        "appliedAt": iso(row["applied_at"]),
    }


def bulk_or_404(raw_id):
    bulk_id = id_param(raw_id, problems.INVALID_BULK_ACTION_ID, "a bulk action id")
    action = BulkAction.get_or_none(BulkAction.id == bulk_id)
    if action is None:
        raise Problem(404, bulk.BULK_ACTION_NOT_FOUND, f"bulk action {bulk_id} does not exist")
    return action


def preview_from(body, actor):
    """The previewed action of a request body, or a Problem (nothing written)."""
    unknown = set(body) - FIELDS
    if unknown:
        raise Problem(400, problems.INVALID_BODY, f"unknown fields: {', '.join(sorted(unknown))}")
    try:
        return bulk.preview(
            body.get("action"),
            actor,
            plan_id=body.get("planId"),
            days=body.get("days"),
            squad_ids=body.get("squadIds"),
            subscription_ids=body.get("subscriptionIds"),
        )
    except bulk.BulkRejected as rejected:
        raise Problem(rejected.http_status, rejected.code, str(rejected)) from None


def build():
    app = bottle.Bottle()

    @app.post("/v1/panel/bulk-actions")
    @panel.signed_in(operators.SUBSCRIPTIONS_WRITE)
    def preview(operator):
        action = preview_from(json_body(), f"operator:{operator.username}")
        rows, _ = bulk.items_page(action.id, 0, PREVIEW_ROWS)
        return json_answer(201, {"bulkAction": bulk_json(action), "items": [item_json(row) for row in rows]})

    @app.get("/v1/panel/bulk-actions")
    @panel.signed_in(operators.SUBSCRIPTIONS_READ)
    def newest(operator):
        query = bottle.request.query
        limit = limit_param(query.get("limit"), backoffice.DEFAULT_PAGE, backoffice.MAX_PAGE)
        rows = BulkAction.select()
        if query.get("cursor"):
            rows = rows.where(BulkAction.id < panel.decode_cursor(query.get("cursor")))
        page = list(rows.order_by(BulkAction.id.desc()).limit(limit + 1))
        return json_answer(
            200,
            {
                "bulkActions": [bulk_json(action) for action in page[:limit]],
                "nextCursor": panel.encode_cursor(page[limit - 1].id) if len(page) > limit else None,
            },
        )

    @app.get("/v1/panel/bulk-actions/<bulk_id>")
    @panel.signed_in(operators.SUBSCRIPTIONS_READ)
    def show(operator, bulk_id):
        return json_answer(200, {"bulkAction": bulk_json(bulk_or_404(bulk_id))})

    @app.get("/v1/panel/bulk-actions/<bulk_id>/items")
    @panel.signed_in(operators.SUBSCRIPTIONS_READ)
    def items(operator, bulk_id):
        action = bulk_or_404(bulk_id)
        query = bottle.request.query
        limit = limit_param(query.get("limit"), backoffice.DEFAULT_PAGE, backoffice.MAX_PAGE)
        after = panel.decode_cursor(query.get("cursor")) if query.get("cursor") else 0
        rows, last = bulk.items_page(action.id, after, limit)
        return json_answer(
            200,
            {
                "bulkActionId": action.id,
                "items": [item_json(row) for row in rows],
                "nextCursor": None if last is None else panel.encode_cursor(last),
            },
        )

    def transition(verb):
        def route(operator, bulk_id):
            bulk_id = id_param(bulk_id, problems.INVALID_BULK_ACTION_ID, "a bulk action id")
            reason = panel.operator_reason()
            try:
                action = bulk.change_state(bulk_id, verb, f"operator:{operator.username}", reason)
            except bulk.BulkRejected as rejected:
                raise Problem(rejected.http_status, rejected.code, str(rejected)) from None
            return json_answer(200, {"bulkAction": bulk_json(action)})

        return route

    for verb in bulk.TRANSITIONS:
        app.post(f"/v1/panel/bulk-actions/<bulk_id>/{verb}")(
            panel.signed_in(operators.SUBSCRIPTIONS_WRITE)(transition(verb))
        )

    return app
