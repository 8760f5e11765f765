"""The back office's Bulk actions pages (SPEC 15.6): the newest actions with their progress and the form that
previews a new one; an action's page with its frozen items and Confirm, Pause, Resume and Cancel.

/panel/bulk-actions          newest first, with progress, and the preview form (subscriptions.read; the form
                             for subscriptions.write)
/panel/bulk-actions/{id}     the action: what it does, its progress, its items in position order with the
                             operation each queued, and the buttons its state allows (subscriptions.write)

The form and the buttons call the panel API (web/bulk.py) with the operator's reason, so its rules, refusals
and audit are the API's. Squads are shown as a count, as everywhere in the panel.
"""

import bottle

from fulfillment import bulk
from models.bulk import BULK_ACTIONS, BulkAction
from models.commerce import Plan
from ops import operators
from web import backoffice, panel
from web.backoffice_pages import show
from web.bulk import bulk_or_404
from web.pages import page

ITEM_ROWS = 100
# What each state offers: (verb, button label).
OFFERED = {
    "previewed": (("confirm", "Confirm"), ("cancel", "Discard")),
    "running": (("pause", "Pause"), ("cancel", "Cancel")),
    "paused": (("resume", "Resume"), ("cancel", "Cancel")),
}


def build():
    app = bottle.Bottle()

    @app.get("/panel/bulk-actions")
    @page(operators.SUBSCRIPTIONS_READ)
    def bulk_actions(operator):
        query = BulkAction.select()
        if bottle.request.query.get("cursor"):
            query = query.where(BulkAction.id < panel.decode_cursor(bottle.request.query.get("cursor")))
        rows = list(query.order_by(BulkAction.id.desc()).limit(backoffice.DEFAULT_PAGE + 1))
        more = len(rows) > backoffice.DEFAULT_PAGE
        rows = rows[: backoffice.DEFAULT_PAGE]
        return show(
            "bulk_actions",
            operator,
            rows=rows,
            progress={row.id: bulk.progress(row.id) for row in rows},
            next_cursor=panel.encode_cursor(rows[-1].id) if more else None,
            actions=BULK_ACTIONS,
            plans=list(Plan.select().order_by(Plan.id)),
            max_days=bulk.MAX_DAYS,
            can_change=operators.SUBSCRIPTIONS_WRITE in operator.permission_set,
        )

    @app.get("/panel/bulk-actions/<bulk_id>")
    @page(operators.SUBSCRIPTIONS_WRITE)
    def bulk_action(operator, bulk_id):
        found = bulk_or_404(bulk_id)
        cursor = bottle.request.query.get("cursor")
        items, last = bulk.items_page(found.id, panel.decode_cursor(cursor) if cursor else 0, ITEM_ROWS)
        return show(
            "bulk_action",
            operator,
            action=found,
            plan=Plan.get_or_none(Plan.id == found.plan_id) if found.plan_id else None,
            progress=bulk.progress(found.id),
            items=items,
            next_cursor=None if last is None else panel.encode_cursor(last),
            offered=OFFERED.get(found.status, ()),
        )

    return app
