"""The `outbox_delivery` job (SPEC 8.2, 15.2): deliver one stream — one
destination, one aggregate — in order.

The order is the deliveries' (`id`): the order the dispatcher routed the
events in, which is the order they committed in (an event whose transaction
commits after a later-numbered one is routed, and delivered, after it), and
event id order among events routed together.

A run takes the stream's unfinished deliveries in that order and POSTs each
one (integrations/webhooks.py, outside any transaction; the run keeps its
pooled connection between deliveries, at most one per `bulk` slot), then
records its outcome in a short transaction of its own (one round trip on
PostgreSQL):

- 2xx: delivered; the event is published once every delivery it has is;
- anything else: attempts + 1 and `retrying` until now + base × 2^(attempts−1)
  (base 10 s, at most 360 × base = 1 h, never later than the event's 24 h);
  the run stops there, because the stream's later events wait behind it, and
  the job snoozes until then: its own retry, costing no job attempt;
- a failure 24 h or more after the event was created: `dead`, one operator
  notice per destination and day, and the stream goes on with its next event;
  a dead delivery has ended too: the event is published (finished) once its
  other deliveries have.

At least once: a run killed between a POST and its record sends that event
again (receivers deduplicate on `webhook-id`). One job per stream at a time
(unique by args while it is queued, running or snoozed), so a stream is
never delivered by two runs at once. A run hands its thread back after
RUN_DELIVERIES deliveries or RUN_BUDGET_S, snoozing to go on at once.
`APP_OUTBOX_RETRY_BASE_MS` sets the base (10 000); tests shorten it.
"""

import datetime
import json
import logging
import time

from jobs import UNIQUE_WHILE_ACTIVE, JobSnooze, current_job, huey
from models.base import db, utcnow
from models.ops import OutboxDelivery, OutboxDestination
from models.transactions import execute_all, fetch_all, fetch_one
from ops.outbox import DEAD, DELIVERED, RETRYING, private_destinations_allowed, publish_complete
from ops.records import queue_notice
from ops.sealing import unseal
from security.redactor import register_secret

logger = logging.getLogger("omniflow.outbox")

KIND = "outbox_delivery"
JOB_ATTEMPTS = 5
RUN_DELIVERIES = 100
RUN_BUDGET_S = 30
READ_AHEAD = 20
DEAD_AFTER = datetime.timedelta(hours=24)
BACKOFF_CAP_FACTOR = 360
NOTICE_OUTBOX_DEAD = "outbox_delivery_dead"

_sender = None
_retry_base_s = None


def use_sender(sender):
    """Set the webhook sender this process's runs use (tests and benchmarks)."""
    global _sender
    _sender = sender


def sender():
    global _sender
    if _sender is None:
        from integrations.webhooks import WebhookSender

        _sender = WebhookSender(allow_private=private_destinations_allowed())
    return _sender


def use_retry_base(seconds):
    global _retry_base_s
    _retry_base_s = seconds


def retry_base_s():
    global _retry_base_s
    if _retry_base_s is None:
        from config.settings import load_settings

        _retry_base_s = load_settings().outbox_retry_base_ms / 1000
    return _retry_base_s


def backoff_s(attempts, base):
    """base × 2^(attempts−1), at most BACKOFF_CAP_FACTOR × base."""
    return base * min(2 ** min(attempts - 1, 30), BACKOFF_CAP_FACTOR)


def stream_args(destination_id, aggregate):
    return {"destinationId": destination_id, "aggregate": aggregate}


@huey.job(KIND, queue="bulk", max_attempts=JOB_ATTEMPTS, unique_states=UNIQUE_WHILE_ACTIVE)
def outbox_delivery(destinationId, aggregate):
    deliver_stream(destinationId, aggregate)


def deliver_stream(destination_id, aggregate):
    """Deliver the stream's due events in order; raises JobSnooze when it must wait or yield."""
    found = fetch_one("SELECT url, secret, active FROM outbox_destinations WHERE id = %s", (destination_id,))
    if found is None or not found[2]:
        return  # removed: the dispatcher drops its unfinished deliveries
    url, secret = found[0], unseal(found[1], OutboxDestination.secret.context, destination_id)
    register_secret(secret)  # whatever error text leaves this process, the secret is not in it
    job = current_job()
    started = time.monotonic()
    sent = 0
    while True:
        batch = fetch_all(_UNFINISHED_SQL, (destination_id, aggregate, READ_AHEAD))
        if not batch:
            return
        for delivery_id, event_id, attempts, next_attempt_at, topic, payload, created_at in batch:
            next_attempt_at, created_at = _time(next_attempt_at), _time(created_at)
            now = utcnow()
            if next_attempt_at > now:
                raise JobSnooze((next_attempt_at - now).total_seconds())
            answer = sender().post(url, secret, event_id, event_body(topic, payload, created_at), time.time())
            sent += 1
            wait = _record(destination_id, delivery_id, event_id, attempts, created_at, answer, utcnow())
            if wait is not None:
                raise JobSnooze(wait)
            if sent >= RUN_DELIVERIES or time.monotonic() - started > RUN_BUDGET_S or (job and job.should_stop()):
                raise JobSnooze(0)


def event_body(topic, payload, created_at):
    """The JSON body: {"type", "timestamp", "data"}, as Standard Webhooks recommends."""
    stamp = created_at.isoformat(timespec="milliseconds") + "Z"
    return f'{{"type":{json.dumps(topic)},"timestamp":"{stamp}","data":{payload}}}'


# Hand-written SQL on the hot path: one read per READ_AHEAD events, one short
# transaction per delivery (two round trips on PostgreSQL, see publish_complete).
_UNFINISHED_SQL = """
SELECT d.id, d.event_id, d.attempts, d.next_attempt_at, e.topic, e.payload, e.created_at
FROM outbox_deliveries d JOIN outbox_events e ON e.id = d.event_id
WHERE d.destination_id = %s AND d.aggregate = %s AND d.status IN ('pending', 'retrying')
ORDER BY d.id
LIMIT %s"""
_UNCHANGED = " WHERE id = %s AND status IN ('pending', 'retrying') AND attempts = %s"


def _time(value):
    return OutboxDelivery.next_attempt_at.python_value(value)


def _record(destination_id, delivery_id, event_id, attempts, created_at, answer, now):
    """Write one attempt's outcome; returns the seconds to wait before the stream goes on, or None."""
    if answer.delivered:
        with db.atomic():
            execute_all(
                [
                    (
                        "UPDATE outbox_deliveries SET status = %s, attempts = %s, delivered_at = %s,"
                        " last_error_code = NULL" + _UNCHANGED,
                        (DELIVERED, attempts + 1, now, delivery_id, attempts),
                    )
                ]
            )
            publish_complete([event_id], now)
        return None
    deadline = created_at + DEAD_AFTER
    if now >= deadline:
        with db.atomic():
            execute_all(
                [
                    (
                        "UPDATE outbox_deliveries SET status = %s, attempts = %s, last_error_code = %s" + _UNCHANGED,
                        (DEAD, attempts + 1, answer.code, delivery_id, attempts),
                    )
                ]
            )
            queue_notice(
                NOTICE_OUTBOX_DEAD,
                f"destination:{destination_id}:{now.date().isoformat()}",
                {"destinationId": destination_id, "eventId": event_id, "errorCode": answer.code},
            )
            publish_complete([event_id], now)
        logger.warning(
            f"outbox event {event_id} is dead for destination {destination_id} after 24 h",
            extra={"state": DEAD, "error": answer.code},
        )
        return None
    retry_at = min(now + datetime.timedelta(seconds=backoff_s(attempts + 1, retry_base_s())), deadline)
    execute_all(
        [
            (
                "UPDATE outbox_deliveries SET status = %s, attempts = %s, next_attempt_at = %s, last_error_code = %s"
                + _UNCHANGED,
                (RETRYING, attempts + 1, retry_at, answer.code, delivery_id, attempts),
            )
        ]
    )
    logger.info(
        f"outbox event {event_id} to destination {destination_id} failed; retrying",
        extra={"state": RETRYING, "error": answer.code},
    )
    return (retry_at - now).total_seconds()
