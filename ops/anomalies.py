"""Anomaly rules (SPEC 15.7): five measures of trouble against stored thresholds, one notice per breach and window.

| rule | measures, over the rule's window | unit | breached when |
| - | - | - | - |
| `fulfillment_failure_rate` | failed fulfillment attempts among all attempts (history rows) | percent | ≥ threshold |
| `payment_success_rate` | succeeded payments among those created in the window that ended | percent | < threshold |
| `revive_count` | operations `fulfillment_revive` had to give a job again | count | ≥ threshold |
| `outbox_oldest_age` | age of the oldest unpublished outbox event (now, not over the window) | seconds | ≥ threshold |
| `dead_letter_growth` | jobs that ended discarded or cancelled | count | ≥ threshold |

A rate is measured only when the window holds at least MIN_SAMPLES attempts
or payments: one failure out of two is no anomaly. Thresholds and windows
live in `anomaly_rules` (migration 0038), edited by an operator with
`system.write` (audited); a rule missing from the table runs with its
defaults until an operator changes it. A breach queues an `anomaly` operator notice keyed by the rule and
the window it falls in (time cut into whole windows since the epoch), so a
breach that lasts is told once per window however often the pass runs, and
the notifier delivers it (bot/notifier.py). Notices carry the rule, the
measured value, the threshold and the window, nothing about a customer.
"""

import datetime
import logging
from dataclasses import dataclass

from peewee import fn

from jobs.engine.states import DEAD_LETTER_STATES
from models.base import db, utcnow
from models.fulfillment import FulfillmentHistory
from models.jobs import Job
from models.ops import AnomalyRule, AnomalySample, OutboxEvent
from models.payments import PaymentIntent
from ops.records import queue_notice, record_audit

logger = logging.getLogger("omniflow.anomalies")

NOTICE_KIND = "anomaly"
MIN_SAMPLES = 10  # attempts or ended payments a window needs before its rate means anything
SAMPLE_KEEP_DAYS = 7
SAMPLE_PRUNE_BATCH = 1000
MIN_WINDOW_MINUTES = 15  # the pass's interval: a shorter window would go unread between runs
MAX_WINDOW_MINUTES = 7 * 24 * 60
AUDIT_CATEGORY = "system"
RULE_CHANGED = "panel.anomaly_rule.changed"

# Error codes of a refused change (400 unless said otherwise).
UNKNOWN_RULE = "unknown_anomaly_rule"  # 404
INVALID_THRESHOLD = "invalid_threshold"
INVALID_WINDOW = "invalid_window"
INVALID_ENABLED = "invalid_enabled"

REVIVE_COUNT = "revive_count"
ABOVE, BELOW = "above", "below"


@dataclass(frozen=True)
class Rule:
    name: str
    unit: str  # "percent", "count" or "seconds"
    breached_when: str  # ABOVE: value >= threshold; BELOW: value < threshold
    default_threshold: int
    default_window_s: int
    low: int  # the thresholds an operator may set
    high: int

    def breached(self, value, threshold):
        if value is None:
            return False
        return value >= threshold if self.breached_when == ABOVE else value < threshold


def _between(since, now, column):
    return (column >= since) & (column <= now)


def fulfillment_failure_rate(since, now):
    """Percent of fulfillment attempts in the window that failed; None under MIN_SAMPLES attempts."""
    rows = (
        FulfillmentHistory.select(FulfillmentHistory.status, fn.COUNT(FulfillmentHistory.id))
        .where(
            _between(since, now, FulfillmentHistory.created_at),
            FulfillmentHistory.status.in_(("succeeded", "retrying", "failed")),
        )
        .group_by(FulfillmentHistory.status)
        .tuples()
    )
    counts = dict(rows)
    return _percent(counts.get("retrying", 0) + counts.get("failed", 0), sum(counts.values()))


def payment_success_rate(since, now):
    """Percent of the payments created in the window that ended (succeeded, canceled, failed, expired) and
    succeeded; None under MIN_SAMPLES ended payments."""
    rows = (
        PaymentIntent.select(PaymentIntent.status, fn.COUNT(PaymentIntent.id))
        .where(
            PaymentIntent.status.in_(("succeeded", "canceled", "failed", "expired")),
            _between(since, now, PaymentIntent.created_at),
        )
        .group_by(PaymentIntent.status)
        .tuples()
    )
    counts = dict(rows)
    return _percent(counts.get("succeeded", 0), sum(counts.values()))


def revive_count(since, now):
    """Operations fulfillment_revive gave a job again in the window (its recorded samples)."""
    total = (
        AnomalySample.select(fn.SUM(AnomalySample.value))
        .where(AnomalySample.rule == REVIVE_COUNT, _between(since, now, AnomalySample.observed_at))
        .scalar()
    )
    return int(total or 0)


def outbox_oldest_age(since, now):
    """Seconds the oldest unpublished outbox event has waited (0 with none)."""
    oldest = OutboxEvent.select(fn.MIN(OutboxEvent.created_at)).where(OutboxEvent.published_at.is_null()).scalar()
    if isinstance(oldest, str):  # SQLite answers an aggregate as text
        oldest = datetime.datetime.fromisoformat(oldest)
    return max(0, int((now - oldest).total_seconds())) if oldest else 0


def dead_letter_growth(since, now):
    """Jobs that ended discarded or cancelled in the window (through the jobs_finalized index)."""
    return Job.select().where(Job.state.in_(DEAD_LETTER_STATES), _between(since, now, Job.finalized_at)).count()


def _percent(part, whole):
    return None if whole < MIN_SAMPLES else part * 100 // whole


RULES = {
    rule.name: (rule, measure)
    for rule, measure in (
        (Rule("fulfillment_failure_rate", "percent", ABOVE, 20, 3600, 1, 100), fulfillment_failure_rate),
        (Rule("payment_success_rate", "percent", BELOW, 50, 3600, 1, 100), payment_success_rate),
        (Rule(REVIVE_COUNT, "count", ABOVE, 50, 3600, 1, 1_000_000_000), revive_count),
        (Rule("outbox_oldest_age", "seconds", ABOVE, 1800, 900, 60, 30 * 86400), outbox_oldest_age),
        (Rule("dead_letter_growth", "count", ABOVE, 20, 3600, 1, 1_000_000_000), dead_letter_growth),
    )
}


class RuleRejected(ValueError):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


def stored_rules():
    """Every rule's settings, in RULES order: its row, or (unsaved) its defaults when the table lacks it.
    Reading writes nothing; a change of a rule the table lacks inserts its row (change_rule)."""
    rows = {row.rule: row for row in AnomalyRule.select()}
    return [rows.get(name) or _default_row(rule) for name, (rule, _) in RULES.items()]


def _default_row(rule):
    return AnomalyRule(
        rule=rule.name, threshold=rule.default_threshold, window_s=rule.default_window_s, enabled=True,
        updated_at=None, updated_by=None,
    )  # fmt: skip


def window_start(now, window_s):
    """The start of the whole window (counted from the epoch) that `now` falls in: one notice each."""
    epoch = datetime.datetime(1970, 1, 1)
    seconds = int((now - epoch).total_seconds())
    return epoch + datetime.timedelta(seconds=seconds - seconds % window_s)


@dataclass
class Verdict:
    rule: str
    value: object  # None: too few samples to measure
    threshold: int
    breached: bool
    queued: bool  # a notice was queued by this evaluation (not one of an earlier run in the window)


def evaluate(now=None):
    """Measure every enabled rule; queue one `anomaly` notice per breached rule and window. Returns [Verdict]."""
    now = now or utcnow()
    verdicts = []
    for row in stored_rules():
        if not row.enabled:
            continue
        rule, measure = RULES[row.rule]
        value = measure(now - datetime.timedelta(seconds=row.window_s), now)
        breached = rule.breached(value, row.threshold)
        queued = False
        if breached:
            start = window_start(now, row.window_s)
            queued = queue_notice(
                NOTICE_KIND,
                f"{rule.name}:{start.isoformat()}",
                {
                    "rule": rule.name,
                    "value": value,
                    "threshold": row.threshold,
                    "unit": rule.unit,
                    "direction": "at or above" if rule.breached_when == ABOVE else "below",
                    "windowMinutes": row.window_s // 60,
                    "windowStart": start.isoformat() + "Z",
                },
            )
            if queued:
                logger.warning(
                    "anomaly detected",
                    extra={"task": rule.name, "count": value, "state": f"threshold={row.threshold} {rule.unit}"},
                )
        verdicts.append(Verdict(rule.name, value, row.threshold, breached, queued))
    return verdicts


def record_sample(rule, value, now=None):
    """Count `value` for `rule` now (in the caller's transaction, if any); nothing is written for zero."""
    if value:
        AnomalySample.create(rule=rule, value=value, observed_at=now or utcnow())


def prune_samples(now=None):
    """Delete samples older than SAMPLE_KEEP_DAYS, SAMPLE_PRUNE_BATCH at a time; returns how many."""
    cutoff = (now or utcnow()) - datetime.timedelta(days=SAMPLE_KEEP_DAYS)
    old = AnomalySample.select(AnomalySample.id).where(AnomalySample.observed_at < cutoff).limit(SAMPLE_PRUNE_BATCH)
    return AnomalySample.delete().where(AnomalySample.id.in_(old)).execute()


def _whole(value, low, high):
    return not isinstance(value, bool) and isinstance(value, int) and low <= value <= high


def change_rule(name, changes, actor, reason):
    """Set a rule's threshold, window (minutes) and/or enabled from `changes`; audited. RuleRejected writes nothing."""
    if name not in RULES:
        raise RuleRejected(UNKNOWN_RULE, f"no anomaly rule {name!r}")
    rule = RULES[name][0]
    values = {}
    if "threshold" in changes:
        if not _whole(changes["threshold"], rule.low, rule.high):
            bounds = f"from {rule.low} to {rule.high}"
            raise RuleRejected(INVALID_THRESHOLD, f"threshold of {name} is a whole number of {rule.unit} {bounds}")
        values["threshold"] = changes["threshold"]
    if "windowMinutes" in changes:
        if not _whole(changes["windowMinutes"], MIN_WINDOW_MINUTES, MAX_WINDOW_MINUTES):
            raise RuleRejected(
                INVALID_WINDOW, f"windowMinutes is a whole number from {MIN_WINDOW_MINUTES} to {MAX_WINDOW_MINUTES}"
            )
        values["window_s"] = changes["windowMinutes"] * 60
    if "enabled" in changes:
        if not isinstance(changes["enabled"], bool):
            raise RuleRejected(INVALID_ENABLED, "enabled is true or false")
        values["enabled"] = changes["enabled"]
    if not values:
        raise RuleRejected(INVALID_THRESHOLD, "give threshold, windowMinutes or enabled")
    with db.atomic():
        before = AnomalyRule.get_or_none(AnomalyRule.rule == name) or _default_row(rule)
        after = {"threshold": before.threshold, "window_s": before.window_s, "enabled": before.enabled, **values}
        AnomalyRule.insert(rule=name, **after, updated_at=utcnow(), updated_by=actor).on_conflict(
            conflict_target=[AnomalyRule.rule], update={**values, "updated_at": utcnow(), "updated_by": actor}
        ).execute()
        record_audit(
            AUDIT_CATEGORY, RULE_CHANGED, actor, reason, "anomaly_rule", name,
            details={
                "before": {"threshold": before.threshold, "windowMinutes": before.window_s // 60,
                           "enabled": bool(before.enabled)},
                "after": {key: changes[key] for key in ("threshold", "windowMinutes", "enabled") if key in changes},
            },
        )  # fmt: skip
    return AnomalyRule.get_by_id(name)
