"""SPEC 15.8, 4.4, 12: blocklist sources are managed from the panel (system.write, a reason, good input, audited);
the API and the Blocklists page show each source's refresh, status and counts, never its token."""

import requests

from models.blocklists import BlocklistSource
from models.commerce import Customer
from models.ops import AuditEvent
from ops import blocklists
from tests.web import test_panel_api as api
from tests.web.test_admin_api import assert_problem
from tests.web.test_openapi import check

TOKEN = "blocklist-token-7c1e5b2d9f"
URL = "https://lists.example.net/ids/tok-3f9a7c1e5b2d.txt"
COLLECTION = "/v1/panel/system/blocklists"


def add(web, headers, body, reason=True):
    headers = {**headers, **(api.REASON if reason else {})}
    return requests.post(web + COLLECTION, headers=headers, json=body, timeout=10)


def remove(web, headers, source_id, reason=True):
    headers = {**headers, **(api.REASON if reason else {})}
    return requests.delete(f"{web}{COLLECTION}/{source_id}", headers=headers, timeout=10)


def test_an_operator_adds_lists_and_removes_a_source_audited_and_its_token_is_never_shown(web):
    headers = api.session_of(web, "alice", ["system.read", "system.write"])
    reader = api.session_of(web, "reader", ["system.read"])
    assert_problem(add(web, reader, {"url": URL}), 403, "forbidden")
    assert_problem(add(web, headers, {"url": URL}, reason=False), 400, "reason_required")
    for body, code in (({"url": "ftp://x.example"}, "invalid_url"), ({"url": URL, "token": "a b"}, "invalid_token")):
        refused = add(web, headers, body)
        assert_problem(refused, 400, code)
        check(refused, COLLECTION, "post")
    assert BlocklistSource.select().count() == 0
    assert not AuditEvent.select().where(AuditEvent.action.startswith("blocklist.")).exists()

    answer = add(web, headers, {"url": URL, "token": TOKEN})
    check(answer, COLLECTION, "post")
    assert answer.status_code == 201
    created = answer.json()["source"]
    assert (created["url"], created["hasToken"], created["status"]) == ("https://lists.example.net/…", True, "new")
    row = BlocklistSource.get_by_id(created["id"])
    assert (row.url, row.token) == (URL, TOKEN)

    row.status, row.entry_count, row.failure_count, row.last_error = "failed", 2, 1, "http_500: the source answered 500"
    row.save()
    blocklists.BlocklistEntry.insert_many([(row.id, 11), (row.id, 12)], fields=["source", "telegram_id"]).execute()
    Customer.create(display_name="Listed", telegram_id=11, blocked=True, blocked_reason=blocklists.BLOCKED_BY)
    listing = requests.get(web + COLLECTION, headers=headers, timeout=10)
    check(listing, COLLECTION, "get")
    [shown] = listing.json()["sources"]
    assert listing.json()["maxSources"] == 20
    assert (shown["status"], shown["entryCount"], shown["blockedCustomers"], shown["failureCount"]) == (
        "failed", 2, 1, 1,
    )  # fmt: skip
    page = requests.get(web + "/panel/system/blocklists", headers=headers, timeout=10).text
    assert f'<tr data-source="{row.id}">' in page and "http_500: the source answered 500" in page
    assert 'id="source-add"' in page
    stored = BlocklistSource.select(BlocklistSource.token).tuples()[0][0].text
    for text in (answer.text, listing.text, page):
        for leaked in (TOKEN, stored, "tok-3f9a7c1e5b2d"):
            assert leaked not in text

    assert_problem(remove(web, reader, created["id"]), 403, "forbidden")
    assert_problem(remove(web, headers, created["id"], reason=False), 400, "reason_required")
    assert_problem(remove(web, headers, "x1"), 400, "invalid_source_id")
    removed = remove(web, headers, created["id"])
    check(removed, COLLECTION + "/{sourceID}", "delete")
    assert removed.status_code == 200 and removed.json()["source"]["active"] is False
    assert Customer.get(Customer.telegram_id == 11).blocked is False
    assert requests.get(web + COLLECTION, headers=headers, timeout=10).json()["sources"] == []
    assert_problem(remove(web, headers, created["id"]), 404, "blocklist_source_not_found")
    audits = [(a.action, a.actor) for a in AuditEvent.select().order_by(AuditEvent.id)]
    assert audits[-2:] == [("blocklist.source.added", "operator:alice"), ("blocklist.source.removed", "operator:alice")]
    assert all(TOKEN not in a.details for a in AuditEvent.select())
    assert_problem(requests.get(web + COLLECTION, timeout=10), 401, "unauthorized")
    for n in range(blocklists.MAX_SOURCES):
        BlocklistSource.create(url=f"https://lists.example/{n}")
    assert_problem(add(web, headers, {"url": URL}), 409, "too_many_sources")
