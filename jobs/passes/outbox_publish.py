"""`outbox_publish` (SPEC 8.2, 15.2, 5.3): every 5 seconds, route new outbox
events to destinations and insert one `outbox_delivery` job per stream.

A run has three steps, each in bounded batches, each batch one short
transaction (a run past its timeout stops between batches):

1. drop: the unfinished deliveries of removed destinations are deleted, and
   their events published if nothing else is missing;
2. route: unrouted events, oldest first, get one delivery per active
   destination that takes their topic; then every stream (destination,
   aggregate) the run touched gets its job, in one multi-row insert. An
   event no destination takes is published at once (every destination has
   it: there is none). A destination added later receives the events routed
   after it was added;
3. sweep: streams whose first unfinished delivery has been due for a grace
   period (two intervals) without being delivered get a job again, oldest
   first: their job ended without finishing (discarded after unexpected
   errors, cancelled by an operator), or it was finishing as the run routed
   more to the stream. A stream whose job is queued, running or snoozed is
   skipped as a duplicate.

Nothing here sends a webhook; the jobs do, with their own retries. The pass
is registered only when APP_DATA_ENCRYPTION_KEY is set (SPEC 5.2): every
destination's secret is sealed (`register()`, called by the worker).
"""

import datetime
import logging

from peewee import fn

import jobs
from jobs import JobInsert, current_job, every, huey
from jobs.outbox_delivery import KIND, stream_args
from models.base import db, utcnow
from models.ops import OutboxDelivery, OutboxDestination, OutboxEvent
from ops.outbox import PENDING, UNFINISHED, publish_complete, takes

logger = logging.getLogger("omniflow.passes.outbox")

NAME = "outbox_publish"
INTERVAL_S = 5
ROUTE_BATCH = 1000
ROUTE_MAX_BATCHES = 10
INSERT_CHUNK = 500  # rows per INSERT: SQLite takes at most 32 766 parameters
JOB_INSERT_CHUNK = 1000
DROP_BATCH = 1000
DROP_MAX_BATCHES = 10
SWEEP_BATCH = 500
SWEEP_GRACE = datetime.timedelta(seconds=2 * INTERVAL_S)


def _stopping():
    """The run passed its timeout (the interval) or was cancelled: the next run goes on."""
    job = current_job()
    return job is not None and job.should_stop()


def drop_removed(now):
    """Delete unfinished deliveries of removed destinations; returns how many."""
    dropped = 0
    for _ in range(DROP_MAX_BATCHES):
        with db.atomic():
            rows = list(
                OutboxDelivery.select(OutboxDelivery.id, OutboxDelivery.event)
                .join(OutboxDestination)
                .where(OutboxDestination.active == False, OutboxDelivery.status.in_(UNFINISHED))  # noqa: E712
                .order_by(OutboxDelivery.id)
                .limit(DROP_BATCH)
                .tuples()
            )
            if rows:
                OutboxDelivery.delete().where(OutboxDelivery.id.in_([row[0] for row in rows])).execute()
                publish_complete([row[1] for row in rows], now)
        dropped += len(rows)
        if len(rows) < DROP_BATCH or _stopping():
            break
    return dropped


def route_batch(now):
    """Route one batch of events; returns (events routed, published unmatched, the batch's streams)."""
    with db.atomic():
        events = list(
            OutboxEvent.select(OutboxEvent.id, OutboxEvent.topic, OutboxEvent.aggregate)
            .where(OutboxEvent.routed_at.is_null())
            .order_by(OutboxEvent.id)
            .limit(ROUTE_BATCH)
            .tuples()
        )
        if not events:
            return 0, 0, {}
        destinations = list(
            OutboxDestination.select(OutboxDestination.id, OutboxDestination.topics)
            .where(OutboxDestination.active == True)  # noqa: E712
            .order_by(OutboxDestination.id)
            .tuples()
        )
        deliveries, unmatched, streams = [], [], {}
        for event_id, topic, aggregate in events:
            stream = aggregate or f"event:{event_id}"
            targets = [destination_id for destination_id, topics in destinations if takes(topics, topic)]
            if not targets:
                unmatched.append(event_id)
            for destination_id in targets:
                deliveries.append((event_id, destination_id, stream, PENDING, 0, now, now))
                streams.setdefault((destination_id, stream), None)
        columns = [
            OutboxDelivery.event,
            OutboxDelivery.destination,
            OutboxDelivery.aggregate,
            OutboxDelivery.status,
            OutboxDelivery.attempts,
            OutboxDelivery.next_attempt_at,
            OutboxDelivery.created_at,
        ]
        for start in range(0, len(deliveries), INSERT_CHUNK):
            chunk = deliveries[start : start + INSERT_CHUNK]
            OutboxDelivery.insert_many(chunk, fields=columns).on_conflict_ignore().execute()
        ids = [event_id for event_id, _, _ in events]
        OutboxEvent.update(routed_at=now).where(OutboxEvent.id.in_(ids)).execute()
        if unmatched:
            OutboxEvent.update(published_at=now).where(OutboxEvent.id.in_(unmatched)).execute()
    return len(events), len(unmatched), streams


def route(now):
    """Route batches, then insert one job per stream they touched; returns (routed, published, insert results).

    The jobs go in after the last batch, not after each: a job started on
    the first batch could find its stream empty, and finish, just before the
    second batch added to that stream, whose insert would then be skipped as
    a duplicate of the finishing job. (Deliveries routed while a job from an
    earlier run is finishing can still meet that; the sweep picks them up.)
    """
    routed = published = 0
    streams = {}
    for _ in range(ROUTE_MAX_BATCHES):
        count, unmatched, touched = route_batch(now)
        routed, published = routed + count, published + unmatched
        streams.update(touched)
        if count < ROUTE_BATCH or _stopping():
            break
    inserts = [JobInsert(KIND, stream_args(d, s)) for d, s in streams]
    results = []
    with db.atomic():
        for start in range(0, len(inserts), JOB_INSERT_CHUNK):
            results += jobs.insert_many(inserts[start : start + JOB_INSERT_CHUNK])
    return routed, published, results


def stalled_streams(now, limit=SWEEP_BATCH):
    """(destination, aggregate) of streams whose first unfinished delivery is due since before the grace period."""
    earlier = OutboxDelivery.alias("earlier")
    ahead = earlier.select(earlier.id).where(
        earlier.destination == OutboxDelivery.destination,
        earlier.aggregate == OutboxDelivery.aggregate,
        earlier.status.in_(UNFINISHED),
        earlier.id < OutboxDelivery.id,
    )
    return list(
        OutboxDelivery.select(OutboxDelivery.destination, OutboxDelivery.aggregate)
        .where(
            OutboxDelivery.status.in_(UNFINISHED),
            OutboxDelivery.next_attempt_at <= now - SWEEP_GRACE,
            ~fn.EXISTS(ahead),
        )
        .order_by(OutboxDelivery.next_attempt_at, OutboxDelivery.id)
        .limit(limit)
        .tuples()
    )


def sweep(now):
    with db.atomic():
        return jobs.insert_many([JobInsert(KIND, stream_args(d, s)) for d, s in stalled_streams(now)])


def dispatch(now=None):
    """One run; returns {"dropped", "routed", "published", "enqueued", "skipped"}."""
    now = now or utcnow()
    dropped = drop_removed(now)
    routed, published, results = route(now)
    results += sweep(now)
    enqueued = sum(not result.skipped_as_duplicate for result in results)
    counts = {
        "dropped": dropped,
        "routed": routed,
        "published": published,
        "enqueued": enqueued,
        "skipped": len(results) - enqueued,
    }
    logger.info(
        "outbox publish dispatched",
        extra={
            "task": NAME,
            "dropped": dropped,
            "routed": routed,
            "published": published,
            "enqueued": enqueued,
            "skipped_as_duplicate": counts["skipped"],
        },
    )
    return counts


def outbox_publish():
    dispatch()


def register(settings):
    """Declare the pass on the queue when the worker has the key that opens the
    destinations' secrets; otherwise answer why not."""
    if not settings.data_encryption_key:
        return "APP_DATA_ENCRYPTION_KEY is not set"
    huey.periodic_task(every(seconds=INTERVAL_S), name=NAME)(outbox_publish)
    return None
