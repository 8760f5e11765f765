"""SPEC 15.7, 5.2: the anomaly rules. Each rule stays silent below its threshold and, once breached,
queues exactly one `anomaly` operator notice per window however often the pass runs (the notifier
renders it for the operator chat); thresholds and windows are stored per rule and a bad value is
refused with its code, writing nothing."""

import datetime
import json

import pytest

from bot import notifier
from commerce.settlement import settle_order
from jobs.passes import anomaly_evaluation, fulfillment_revive
from models.fulfillment import FulfillmentHistory, FulfillmentOperation
from models.jobs import Job
from models.ops import AnomalyRule, AuditEvent, OperatorNotice, OutboxEvent
from models.payments import PaymentIntent
from ops import anomalies
from tests.support import commerce

# Inside the window [12:00, 13:00) of the hour-long rules and [12:00, 12:15) of the outbox rule.
NOW = datetime.datetime(2026, 12, 1, 12, 1, 40)
SECOND = datetime.timedelta(seconds=1)


def notices():
    return [json.loads(n.payload) for n in OperatorNotice.select().where(OperatorNotice.kind == "anomaly")]


def evaluate_twice(at=NOW):
    """Two runs in one window (a minute apart); returns the notices' rules."""
    anomaly_evaluation.run(at)
    anomaly_evaluation.run(at + 60 * SECOND)
    return sorted(notice["rule"] for notice in notices())


def attempts(operation, statuses, at=NOW - 60 * SECOND):
    FulfillmentHistory.insert_many(
        [
            {"operation": operation, "attempt": 1, "status": status, "correlation_id": "c", "created_at": at}
            for status in statuses
        ]
    ).execute()


def payments(order, statuses, at=NOW - 60 * SECOND):
    first = PaymentIntent.select().count()
    PaymentIntent.insert_many(
        [
            {"order": order, "provider": "yookassa", "amount_minor": 100, "currency": "RUB", "status": status,
             "idempotence_key": f"k{first + index}", "created_at": at, "updated_at": at}
            for index, status in enumerate(statuses)
        ]
    ).execute()  # fmt: skip


def dead_jobs(count, at=NOW - 60 * SECOND):
    Job.insert_many(
        [
            {"kind": "fulfillment", "queue": "critical", "state": "discarded", "max_attempts": 12,
             "created_at": at, "scheduled_at": at, "finalized_at": at}
            for _ in range(count)
        ]
    ).execute()  # fmt: skip


def test_fulfillment_failure_rate_fires_once_per_window_and_is_silent_below_it_or_with_too_few_attempts(database):
    settle_order(commerce.order(commerce.customer(), commerce.limited_plan()).id, "provider_webhook")
    op = FulfillmentOperation.get()
    attempts(op, ["retrying"] * (anomalies.MIN_SAMPLES - 1), at=NOW - 2 * 3600 * SECOND)
    assert evaluate_twice(NOW - 3600 * SECOND) == []  # every attempt failed, but nine are too few to judge
    attempts(op, ["succeeded"] * 9 + ["retrying"])  # 10 %, threshold 20 %
    assert evaluate_twice() == []
    attempts(op, ["retrying", "failed"])  # 3 of 12: 25 %
    assert evaluate_twice() == ["fulfillment_failure_rate"]
    [notice] = notices()
    assert (notice["value"], notice["threshold"], notice["windowStart"]) == (25, 20, "2026-12-01T12:00:00Z")
    told = notifier.render(OperatorNotice.get(OperatorNotice.kind == "anomaly"))  # what the notifier sends
    assert told.startswith("Anomaly: fulfillment_failure_rate is 25 percent (alerts when at or above 20 percent")
    assert notifier.topic_of("anomaly") == "operations"


def test_payment_success_rate_fires_once_per_window_below_its_threshold_and_is_silent_above(database):
    order = commerce.order(commerce.customer(), commerce.limited_plan())
    payments(order, ["succeeded"] * 6 + ["canceled"] * 4 + ["pending"] * 20)  # 60 % of those that ended
    assert evaluate_twice() == []
    payments(order, ["failed", "expired"])  # 6 of 12: 50 %, not below 50 %
    assert evaluate_twice() == []
    payments(order, ["failed"])  # 6 of 13: 46 %
    assert evaluate_twice() == ["payment_success_rate"]
    payments(order, ["succeeded"], at=NOW - 2 * 3600 * SECOND)  # before the window: not counted
    assert notices()[0]["value"] == 46


def test_revive_count_fires_once_per_window_and_is_silent_below_it(database):
    anomalies.change_rule("revive_count", {"threshold": 2}, "operator:alice", "test")
    settle_order(commerce.order(commerce.customer(), commerce.limited_plan()).id, "provider_webhook")
    long_ago = NOW - 3600 * SECOND
    FulfillmentOperation.update(created_at=long_ago, next_attempt_at=long_ago).execute()
    Job.delete().where(Job.kind == "fulfillment").execute()  # its job is gone: revive gives it one
    assert fulfillment_revive.dispatch(NOW - 120 * SECOND) == (1, 0)
    assert evaluate_twice() == []  # one revived, threshold 2
    anomalies.record_sample(anomalies.REVIVE_COUNT, 1, NOW - 30 * SECOND)
    assert evaluate_twice() == ["revive_count"]


def test_outbox_oldest_age_fires_once_per_window_and_again_in_the_next(database):
    OutboxEvent.create(topic="order.paid", payload="{}", created_at=NOW - 1700 * SECOND)
    assert evaluate_twice() == []  # 1 700 s and 1 760 s, threshold 1 800 s
    assert evaluate_twice(NOW + 200 * SECOND) == ["outbox_oldest_age"]
    assert evaluate_twice(NOW + 600 * SECOND) == ["outbox_oldest_age"]  # still [12:00, 12:15)
    assert evaluate_twice(NOW + 900 * SECOND) == ["outbox_oldest_age"] * 2  # [12:15, 12:30): told again
    OutboxEvent.update(published_at=NOW).execute()
    assert evaluate_twice(NOW + 1800 * SECOND) == ["outbox_oldest_age"] * 2  # published: silent


def test_dead_letter_growth_fires_once_per_window_is_silent_below_it_and_when_disabled(database):
    dead_jobs(19)
    dead_jobs(5, at=NOW - 2 * 3600 * SECOND)  # before the window
    assert evaluate_twice() == []
    dead_jobs(1)
    assert evaluate_twice() == ["dead_letter_growth"]
    [notice] = notices()
    assert notice["value"] == 20
    anomalies.change_rule("dead_letter_growth", {"enabled": False}, "operator:alice", "too noisy")
    dead_jobs(25, at=NOW + 3600 * SECOND)
    assert evaluate_twice(NOW + 3660 * SECOND) == ["dead_letter_growth"]  # disabled: no notice in the next hour


def test_thresholds_and_windows_are_stored_per_rule_changes_are_audited_and_bad_ones_write_nothing(database):
    before = [(r.rule, r.threshold, r.window_s, r.enabled) for r in anomalies.stored_rules()]
    with pytest.raises(anomalies.RuleRejected):
        anomalies.change_rule("outbox_oldest_age", {"threshold": 900, "windowMinutes": 5}, "operator:alice", "x")
    assert [(r.rule, r.threshold, r.window_s, r.enabled) for r in anomalies.stored_rules()] == before
    assert (AnomalyRule.select().where(AnomalyRule.updated_by.is_null(False)).count(), AuditEvent.select().count()) == (
        0, 0,
    )  # fmt: skip
    changed = anomalies.change_rule(
        "outbox_oldest_age", {"threshold": 600, "windowMinutes": 30}, "operator:alice", "tighter"
    )
    assert (changed.threshold, changed.window_s, changed.updated_by) == (600, 1800, "operator:alice")
    event = AuditEvent.get(AuditEvent.action == anomalies.RULE_CHANGED)
    assert (event.subject_id, event.reason) == ("outbox_oldest_age", "tighter")
    assert json.loads(event.details)["before"] == {"threshold": 1800, "windowMinutes": 15, "enabled": True}
    OutboxEvent.create(topic="order.paid", payload="{}", created_at=NOW - 700 * SECOND)
    assert evaluate_twice() == ["outbox_oldest_age"]
    assert notices()[0]["windowMinutes"] == 30


@pytest.mark.parametrize(
    ("rule", "changes", "code"),
    [
        ("fulfillment_failure_rate", {"threshold": 101}, anomalies.INVALID_THRESHOLD),
        ("payment_success_rate", {"threshold": 0}, anomalies.INVALID_THRESHOLD),
        ("revive_count", {"threshold": "5"}, anomalies.INVALID_THRESHOLD),
        ("dead_letter_growth", {"threshold": True}, anomalies.INVALID_THRESHOLD),
        ("outbox_oldest_age", {"windowMinutes": 14}, anomalies.INVALID_WINDOW),
        ("outbox_oldest_age", {"threshold": 900, "windowMinutes": 7 * 24 * 60 + 1}, anomalies.INVALID_WINDOW),
        ("outbox_oldest_age", {"enabled": "no"}, anomalies.INVALID_ENABLED),
        ("outbox_oldest_age", {}, anomalies.INVALID_THRESHOLD),
        ("cpu_load", {"threshold": 5}, anomalies.UNKNOWN_RULE),
    ],
)
def test_a_bad_rule_change_is_refused_with_its_code_and_writes_nothing(rule, changes, code):
    with pytest.raises(anomalies.RuleRejected) as refused:
        anomalies.change_rule(rule, changes, "operator:alice", "test")
    assert refused.value.code == code


def test_the_pass_needs_the_data_key():
    class Settings:
        data_encryption_key = None

    assert anomaly_evaluation.register(Settings()) == "APP_DATA_ENCRYPTION_KEY is not set"
    assert anomaly_evaluation.INTERVAL_S == 15 * 60
