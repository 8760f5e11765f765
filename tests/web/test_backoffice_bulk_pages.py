"""SPEC 15.6 in the back office: the Bulk actions page lists actions with their progress and offers the preview
form to who may change subscriptions; an action's page shows its frozen items, its progress and the buttons its
state allows, each calling the panel API, and squads only as a count; without the permission, 403."""

import re

from fulfillment import bulk
from tests.support import commerce, subscribers
from tests.web import test_panel_api as api
from tests.web.test_pages import page


def test_the_bulk_pages_show_the_frozen_items_their_progress_and_what_the_state_allows(web):
    plan = commerce.limited_plan()
    chosen = subscribers.provisioned(None, plan, 3)
    action = bulk.preview("extend", "operator:alice", plan_id=plan.id, days=3)
    headers = api.session_of(web)

    listed = page(web, "/panel/bulk-actions", headers).text
    row = re.search(rf'<tr data-bulk-action="{action.id}">(.*?)</tr>', listed, re.DOTALL).group(1)
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row, re.DOTALL)
    assert cells[2:7] == ["previewed", "3", "0", "0", "3"]  # status, items, applied, skipped, waiting
    assert 'data-action="/v1/panel/bulk-actions"' in listed and 'data-field="days" data-number' in listed

    shown = page(web, f"/panel/bulk-actions/{action.id}", headers).text
    assert 'id="count-items">3<' in shown and 'id="count-pending">3<' in shown
    assert [re.search(rf'<tr data-position="{n}">.*?/panel/subscriptions/([^"]+)"', shown, re.DOTALL).group(1)
            for n in (1, 2, 3)] == chosen  # fmt: skip
    assert f'data-action="/v1/panel/bulk-actions/{action.id}/confirm"' in shown and "/pause" not in shown

    bulk.change_state(action.id, "confirm", "operator:alice", "outage")
    bulk.apply_batch()
    shown = page(web, f"/panel/bulk-actions/{action.id}", headers).text
    assert 'id="count-applied">3<' in shown and 'id="bulk-status">done<' in shown
    assert "/confirm" not in shown and "/cancel" not in shown  # a finished action offers nothing

    squads = bulk.preview("set_squads", "operator:alice", plan_id=plan.id, squad_ids=[commerce.SQUAD_A])
    assert commerce.SQUAD_A not in page(web, f"/panel/bulk-actions/{squads.id}", headers).text  # a count only
    assert "1 squads" in page(web, f"/panel/bulk-actions/{squads.id}", headers).text

    reader = api.session_of(web, name="reader", permissions=["subscriptions.read"])
    assert 'id="new-bulk-action"' not in page(web, "/panel/bulk-actions", reader).text
    refused = page(web, f"/panel/bulk-actions/{action.id}", reader)
    assert refused.status_code == 403 and "subscriptions.write" in refused.text
