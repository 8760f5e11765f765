"""SPEC 15.7, 4.5: an operator with system.write edits an anomaly rule's threshold and window in the
back office, audited; a bad value is a 400 with its code and changes nothing; System → Anomalies
shows the rules and the latest anomaly notices; without system.write a change is a 403."""

import requests

from models.ops import AnomalyRule, AuditEvent
from ops import anomalies
from ops.records import queue_notice
from tests.web import test_panel_api as api
from tests.web.test_admin_api import assert_problem
from tests.web.test_openapi import check

RULES = "/v1/panel/system/anomaly-rules"


def put(web, headers, rule, body):
    return requests.put(f"{web}{RULES}/{rule}", headers=headers, json=body, timeout=10)


def test_an_operator_changes_a_threshold_audited_bad_values_are_refused_and_the_page_shows_the_rules(web):
    headers = {**api.session_of(web), **api.REASON}
    listing = requests.get(web + RULES, headers=headers, timeout=10)
    check(listing, RULES, "get")  # the answers are the OpenAPI description's
    listed = listing.json()["rules"]
    assert [rule["rule"] for rule in listed] == list(anomalies.RULES)
    answer = put(web, headers, "dead_letter_growth", {"threshold": 5, "windowMinutes": 30})
    assert answer.status_code == 200
    check(answer, RULES + "/{rule}", "put")
    assert answer.json()["rule"] | {"updatedAt": None} == {
        "rule": "dead_letter_growth", "unit": "count", "breachedWhen": "above", "threshold": 5, "windowMinutes": 30,
        "enabled": True, "current": 0, "breached": False, "updatedAt": None, "updatedBy": "operator:alice",
    }  # fmt: skip
    [event] = AuditEvent.select().where(AuditEvent.action == anomalies.RULE_CHANGED)
    assert (event.actor, event.reason, event.subject_id) == ("operator:alice", api.REASON["X-Operator-Reason"],
                                                             "dead_letter_growth")  # fmt: skip
    stored = {(row.rule, row.threshold, row.window_s, row.enabled) for row in AnomalyRule.select()}
    for rule, body, code in (
        ("payment_success_rate", {"threshold": 150}, anomalies.INVALID_THRESHOLD),
        ("payment_success_rate", {"threshold": -1}, anomalies.INVALID_THRESHOLD),
        ("outbox_oldest_age", {"threshold": 10}, anomalies.INVALID_THRESHOLD),
        ("revive_count", {"windowMinutes": 0}, anomalies.INVALID_WINDOW),
        ("revive_count", {"enabled": 1}, anomalies.INVALID_ENABLED),
    ):
        refused = put(web, headers, rule, body)
        assert_problem(refused, 400, code)
        check(refused, RULES + "/{rule}", "put")
    assert_problem(put(web, headers, "cpu_load", {"threshold": 1}), 404, anomalies.UNKNOWN_RULE)
    no_reason = {key: value for key, value in headers.items() if key != "X-Operator-Reason"}
    assert_problem(put(web, no_reason, "revive_count", {"threshold": 3}), 400, "reason_required")
    assert {(row.rule, row.threshold, row.window_s, row.enabled) for row in AnomalyRule.select()} == stored
    assert AuditEvent.select().where(AuditEvent.action == anomalies.RULE_CHANGED).count() == 1

    payload = {"rule": "outbox_oldest_age", "value": 2400, "unit": "seconds", "threshold": 1800}
    queue_notice("anomaly", "outbox_oldest_age:x", payload)
    text = requests.get(web + "/panel/system/anomalies", headers=headers, timeout=10).text
    for rule in anomalies.RULES:
        assert f'data-rule="{rule}"' in text
    assert "2400 seconds" in text and 'class="inline rule-change"' in text

    reader = {**api.session_of(web, name="bob", permissions=["system.read"]), **api.REASON}
    read_only = requests.get(web + "/panel/system/anomalies", headers=reader, timeout=10).text
    assert 'data-rule="revive_count"' in read_only and 'class="inline rule-change"' not in read_only
    assert_problem(put(web, reader, "revive_count", {"threshold": 3}), 403, "forbidden")
    assert {row.rule: row.threshold for row in anomalies.stored_rules()}["revive_count"] == 50
