"""SPEC 15.2, 4.4, 12: outbox destinations are managed from the panel (system.write,
a reason, audited), the Outbox page shows pending, retrying and dead per
destination, and a destination's secret appears on no page and in no answer."""

import pytest
import requests

from models.ops import AuditEvent, OutboxDelivery, OutboxDestination
from ops import outbox, sealing
from ops.records import emit_event
from tests.web import test_panel_api as api
from tests.web.test_admin_api import assert_problem
from tests.web.test_openapi import check

SECRET = outbox.generate_secret()
URL = "https://hooks.example.net/in/tok-3f9a7c1e5b2d"
COLLECTION = "/v1/panel/system/outbox/destinations"


def add(web, headers, body, reason=True):
    headers = {**headers, **(api.REASON if reason else {})}
    return requests.post(web + COLLECTION, headers=headers, json=body, timeout=10)


def remove(web, headers, destination_id, reason=True):
    headers = {**headers, **(api.REASON if reason else {})}
    return requests.delete(f"{web}{COLLECTION}/{destination_id}", headers=headers, timeout=10)


def test_an_operator_adds_lists_and_removes_a_destination_each_change_audited(web):
    headers = api.session_of(web)
    answer = add(web, headers, {"url": URL, "topics": ["order.paid", "wallet.credited"], "secret": SECRET})
    check(answer, COLLECTION, "post")
    assert answer.status_code == 201
    created = answer.json()["destination"]
    assert created["url"] == "https://hooks.example.net/…" and created["topics"] == ["order.paid", "wallet.credited"]
    row = OutboxDestination.get_by_id(created["id"])
    assert row.url == URL and row.secret == SECRET and row.active

    listing = requests.get(web + COLLECTION, headers=headers, timeout=10)
    check(listing, COLLECTION, "get")
    assert listing.json()["destinations"] == [created]

    removed = remove(web, headers, created["id"])
    check(removed, COLLECTION + "/{destinationID}", "delete")
    assert removed.status_code == 200 and removed.json()["destination"]["active"] is False
    assert requests.get(web + COLLECTION, headers=headers, timeout=10).json() == {"destinations": []}
    assert_problem(remove(web, headers, created["id"]), 404, "destination_not_found")
    audits = [(a.action, a.actor, a.reason) for a in AuditEvent.select().order_by(AuditEvent.id)]
    reason = api.REASON["X-Operator-Reason"]
    assert audits[-2:] == [
        ("outbox.destination.added", "operator:alice", reason),
        ("outbox.destination.removed", "operator:alice", reason),
    ]


@pytest.mark.parametrize(
    "body, code",
    [
        ({"url": "ftp://hooks.example.net", "topics": ["order.paid"], "secret": SECRET}, "invalid_url"),
        ({"url": "https://", "topics": ["order.paid"], "secret": SECRET}, "invalid_url"),
        ({"url": URL, "topics": [], "secret": SECRET}, "invalid_topics"),
        ({"url": URL, "topics": ["Order Paid"], "secret": SECRET}, "invalid_topics"),
        ({"url": URL, "topics": "*", "secret": "whsec_c2hvcnQ="}, "invalid_secret"),
        ({"url": URL, "topics": "*", "secret": SECRET[len("whsec_") :]}, "invalid_secret"),
        ({"url": URL, "topics": "*"}, "invalid_secret"),
    ],
)
def test_a_bad_destination_is_refused_with_its_code_and_nothing_written(web, body, code):
    answer = add(web, api.session_of(web), body)
    assert_problem(answer, 400, code)
    check(answer, COLLECTION, "post")
    assert OutboxDestination.select().count() == 0
    assert not AuditEvent.select().where(AuditEvent.action.startswith("outbox.")).exists()


def test_changes_need_system_write_and_a_reason(web):
    reader = api.session_of(web, "reader", ["system.read"])
    body = {"url": URL, "topics": "*", "secret": SECRET}
    assert_problem(add(web, reader, body), 403, "forbidden")
    writer = api.session_of(web, "writer", ["system.read", "system.write"])
    assert_problem(add(web, writer, body, reason=False), 400, "reason_required")
    destination = outbox.add_destination(URL, "*", SECRET, "test", "setup")
    assert_problem(remove(web, reader, destination.id), 403, "forbidden")
    assert_problem(remove(web, writer, destination.id, reason=False), 400, "reason_required")
    assert_problem(remove(web, writer, "x1"), 400, "invalid_destination_id")
    assert_problem(requests.get(web + COLLECTION, timeout=10), 401, "unauthorized")
    assert OutboxDestination.get_by_id(destination.id).active


def test_without_the_key_adding_is_refused_with_503(web):
    headers = api.session_of(web)
    sealing.use_keys(None)
    answer = add(web, headers, {"url": URL, "topics": "*", "secret": SECRET})
    assert_problem(answer, 503, "sealing_unavailable")
    check(answer, COLLECTION, "post")
    assert OutboxDestination.select().count() == 0


def test_the_outbox_page_shows_pending_retrying_and_dead_per_destination(web):
    first = outbox.add_destination(URL, "*", SECRET, "test", "setup")
    second = outbox.add_destination("https://other.example.net/", ["order.paid"], outbox.generate_secret(), "t", "s")
    events = [emit_event("order.paid", {"n": n}).id for n in range(4)]
    for event_id, status in zip(events, ("pending", "retrying", "retrying", "dead")):
        OutboxDelivery.create(
            event=event_id,
            destination=first.id,
            aggregate=f"event:{event_id}",
            status=status,
            next_attempt_at=OutboxDelivery.created_at.default(),
        )
    writer = api.session_of(web, "writer", ["system.read", "system.write"])
    text = requests.get(web + "/panel/system/outbox", headers=writer, timeout=10).text
    assert (
        f'<tr data-destination="{first.id}"><td>{first.id}</td><td class="code">https://hooks.example.net/…</td>'
        in text
    )
    assert '<td>1</td><td>2</td><td class="status-failed">1</td>' in text
    assert f'data-action="/v1/panel/system/outbox/destinations/{second.id}"' in text and 'id="destination-add"' in text
    reader = api.session_of(web, "reader", ["system.read"])
    text = requests.get(web + "/panel/system/outbox", headers=reader, timeout=10).text
    assert f'<tr data-destination="{second.id}">' in text
    assert 'id="destination-add"' not in text and "destination-remove" not in text.split("<script")[0]


def test_the_secret_and_the_urls_path_are_on_no_page_and_in_no_answer(web):
    headers = api.session_of(web)
    created = add(web, headers, {"url": URL, "topics": "*", "secret": SECRET})
    emit_event("order.paid", {"n": 1})
    stored = OutboxDestination.select(OutboxDestination.secret).tuples()[0][0].text
    answers = [created] + [
        requests.get(web + path, headers=headers, timeout=10)
        for path in (COLLECTION, "/panel/system/outbox", "/panel/system/queue", "/panel/system/operations")
    ]
    for answer in answers:
        assert answer.status_code in (200, 201)
        for leaked in (SECRET, SECRET[len("whsec_") :], stored, "tok-3f9a7c1e5b2d"):
            assert leaked not in answer.text, (answer.url, leaked)
