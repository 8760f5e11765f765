"""SPEC 8.2, 15.2, 5.3: the outbox publisher — the `outbox_publish` dispatcher and
the `outbox_delivery` jobs — against real fake receivers, run job by job."""

import datetime
import threading
import time

import pytest

import migrations
from config.settings import load_settings
from fakes.webhook_receiver import FakeWebhookReceiver
from integrations.webhooks import WebhookSender
from jobs import client
from jobs import outbox_delivery as delivery
from jobs.passes import outbox_publish
from models.base import db, utcnow
from models.jobs import Job
from models.ops import AuditEvent, OperatorNotice, OutboxDelivery, OutboxEvent
from models.transactions import fetch_one
from ops import outbox, retention
from ops.records import emit_event
from tests.support.direct import run_all
from web.metrics import DatabaseCollector

BASE_S = 10


@pytest.fixture
def receivers(database, data_key):
    started = []

    def start(topics="*", seed=None):
        secret = outbox.generate_secret()
        receiver = FakeWebhookReceiver(secret, seed=seed).start()
        started.append(receiver)
        receiver.destination = outbox.add_destination(receiver.url, topics, secret, "test", "a receiver")
        return receiver

    outbox.allow_private_destinations(True)  # the receivers listen on 127.0.0.1
    delivery.use_sender(WebhookSender(timeout=0.5, allow_private=True))
    delivery.use_retry_base(BASE_S)
    yield start
    delivery.use_sender(None)
    delivery.use_retry_base(None)
    outbox.allow_private_destinations(None)
    for receiver in started:
        receiver.stop()


def gauge():
    metric = next(m for m in DatabaseCollector().collect() if m.name == "omniflow_outbox_pending_events")
    return metric.samples[0].value


def fast_forward():
    """Let every backoff and snooze elapse now (the waiting, nothing else, is compressed)."""
    past = utcnow() - datetime.timedelta(seconds=1)
    Job.update(scheduled_at=past).where(Job.kind == delivery.KIND, Job.state.in_(["scheduled", "retryable"])).execute()
    OutboxDelivery.update(next_attempt_at=past).where(OutboxDelivery.status == outbox.RETRYING).execute()


def publish(rounds=20, forward=True):
    for _ in range(rounds):
        outbox_publish.dispatch()
        ran = run_all()
        if forward:
            fast_forward()
        if not ran and OutboxDelivery.select().where(OutboxDelivery.status.in_(outbox.UNFINISHED)).count() == 0:
            return


def ids_received(receiver):
    return [int(item.webhook_id) for item in receiver.accepted()]


def test_events_reach_every_destination_taking_their_topic_signed_and_are_then_published(receivers):
    everything, paid_only = receivers("*"), receivers("order.paid")
    paid = emit_event("order.paid", {"orderId": 7}, aggregate="customer:1")
    credited = emit_event("wallet.credited", {"amountMinor": 500, "currency": "USD"}, aggregate="customer:1")
    assert gauge() == 2
    publish()
    assert ids_received(everything) == [paid.id, credited.id]
    assert ids_received(paid_only) == [paid.id]
    body = everything.accepted()[0].body
    assert body["type"] == "order.paid" and body["data"] == {"orderId": 7} and body["timestamp"].endswith("Z")
    assert everything.stats()["invalid_signatures"] == paid_only.stats()["invalid_signatures"] == 0
    assert all(OutboxEvent.get_by_id(e.id).published_at for e in (paid, credited))
    assert gauge() == 0


def test_an_event_no_destination_takes_is_published_when_routed(database, data_key):
    emit_event("order.paid", {"orderId": 1})
    assert gauge() == 1
    counts = outbox_publish.dispatch()
    assert counts == {"dropped": 0, "routed": 1, "published": 1, "enqueued": 0, "skipped": 0}
    assert gauge() == 0 and OutboxDelivery.select().count() == 0


def test_the_dispatcher_inserts_one_job_per_stream_and_reports_duplicates(receivers):
    receiver = receivers()
    for n in range(6):
        emit_event("order.paid", {"n": n}, aggregate=f"customer:{n % 2}")
    emit_event("order.paid", {"n": 6})
    assert outbox_publish.dispatch()["enqueued"] == 3  # customer:0, customer:1, the event on its own
    jobs = Job.select().where(Job.kind == delivery.KIND)
    assert sorted(j.args_dict["aggregate"] for j in jobs)[:2] == ["customer:0", "customer:1"]
    assert {j.queue for j in jobs} == {"bulk"}
    OutboxDelivery.update(next_attempt_at=utcnow() - datetime.timedelta(minutes=5)).execute()
    assert outbox_publish.dispatch() == {"dropped": 0, "routed": 0, "published": 0, "enqueued": 0, "skipped": 3}
    run_all()
    assert len(receiver.accepted()) == 7


def test_one_aggregates_events_arrive_in_order_and_a_failure_holds_those_behind_it(receivers):
    receiver = receivers()
    events = [emit_event("order.paid", {"n": n}, aggregate="customer:9").id for n in range(4)]
    receiver.set_faults(fail_rate=1.0)
    outbox_publish.dispatch()
    run_all()
    rows = {d.event_id: d for d in OutboxDelivery.select()}
    assert rows[events[0]].status == "retrying" and rows[events[0]].attempts == 1
    assert [rows[e].attempts for e in events[1:]] == [0, 0, 0]  # never sent past the failed one
    (job,) = Job.select().where(Job.kind == delivery.KIND)
    assert job.state == "scheduled" and job.attempt == 0  # the job snoozed: no attempt spent
    receiver.set_faults(fail_rate=0.0)
    publish()
    assert ids_received(receiver) == events


def test_an_event_committed_after_a_later_numbered_one_was_routed_goes_out_after_it(receivers):
    receiver = receivers()
    receiver.set_faults(fail_rate=1.0)  # hold the stream, so both are waiting when it moves
    later = OutboxEvent.create(id=100, topic="order.paid", payload="{}", aggregate="customer:8").id
    outbox_publish.dispatch()
    run_all()
    # A transaction that took id 50 before id 100 was taken commits only now.
    earlier = OutboxEvent.create(id=50, topic="order.paid", payload="{}", aggregate="customer:8").id
    outbox_publish.dispatch()
    receiver.set_faults(fail_rate=0.0)
    publish()
    assert ids_received(receiver) == [later, earlier]


def test_a_failure_backs_off_doubling_and_never_past_the_events_24_hours(receivers):
    receiver = receivers()
    receiver.set_faults(fail_rate=1.0)
    event = emit_event("order.paid", {"n": 1})
    outbox_publish.dispatch()
    waits = []
    for _ in range(3):
        before = utcnow()
        run_all()
        row = OutboxDelivery.get(OutboxDelivery.event == event.id)
        waits.append(round((row.next_attempt_at - before).total_seconds()))
        fast_forward()
    assert waits == [BASE_S, 2 * BASE_S, 4 * BASE_S] and row.last_error_code == "webhook_http_500"
    assert [delivery.backoff_s(n, BASE_S) for n in (9, 10, 40)] == [2560, 3600, 3600]

    OutboxEvent.update(created_at=utcnow() - datetime.timedelta(hours=24) + datetime.timedelta(seconds=5)).execute()
    run_all()
    row = OutboxDelivery.get(OutboxDelivery.event == event.id)
    assert row.next_attempt_at == OutboxEvent.get_by_id(event.id).created_at + delivery.DEAD_AFTER


def test_after_24_hours_a_failing_delivery_is_dead_with_one_notice_and_the_stream_goes_on(receivers):
    receiver = receivers()
    receiver.set_faults(fail_rate=1.0)
    old = [emit_event("order.paid", {"n": n}, aggregate="customer:3").id for n in range(2)]
    other = emit_event("order.paid", {"n": 9}, aggregate="customer:4").id
    OutboxEvent.update(created_at=utcnow() - datetime.timedelta(hours=25)).execute()
    fresh = emit_event("order.paid", {"n": 2}, aggregate="customer:3").id
    outbox_publish.dispatch()
    run_all()
    status = {d.event_id: d.status for d in OutboxDelivery.select()}
    assert [status[e] for e in old + [other]] == ["dead", "dead", "dead"] and status[fresh] == "retrying"
    notices = list(OperatorNotice.select().where(OperatorNotice.kind == delivery.NOTICE_OUTBOX_DEAD))
    assert len(notices) == 1  # one per destination and day, not one per event
    assert notices[0].dedupe_key == f"destination:{receiver.destination.id}:{utcnow().date().isoformat()}"
    assert outbox.delivery_counts()[receiver.destination.id] == {"pending": 0, "retrying": 1, "dead": 3}
    receiver.set_faults(fail_rate=0.0)
    publish()
    assert ids_received(receiver) == [fresh]
    assert all(OutboxEvent.get_by_id(e).published_at for e in old + [other, fresh])
    assert gauge() == 0  # a dead delivery has ended: its event no longer waits


def test_an_event_whose_every_delivery_ended_is_finished_and_leaves_the_pending_count(receivers, database):
    healthy, failing = receivers(), receivers()
    failing.set_faults(fail_rate=1.0)
    event = emit_event("order.paid", {"n": 1}, aggregate="customer:6").id
    OutboxEvent.update(created_at=utcnow() - datetime.timedelta(hours=25)).execute()
    publish()
    status = {d.destination_id: d.status for d in OutboxDelivery.select()}
    assert status == {healthy.destination.id: "delivered", failing.destination.id: "dead"}
    assert OutboxEvent.get_by_id(event).published_at is not None and gauge() == 0
    later = utcnow() + datetime.timedelta(days=8)
    assert retention.sweep_table("outbox_events", load_settings(environ={}), now=later).removed == 1
    assert OutboxEvent.select().count() == 0 and OutboxDelivery.select().count() == 0


def test_events_left_unpublished_by_a_dead_delivery_are_finished_by_the_migration(receivers, database):
    receiver = receivers()
    dead = emit_event("order.paid", {"n": 1}).id
    waiting = emit_event("order.paid", {"n": 2}).id
    outbox_publish.dispatch()
    OutboxDelivery.update(status=outbox.DEAD).where(OutboxDelivery.event == dead).execute()
    outbox.remove_destination(receiver.destination.id, "operator:alice", "receiver retired")
    (migration,) = [m for m in migrations.runner(database).migrations() if m.name == "0034_finished_outbox_events"]
    migration.load().up(None, database)
    assert OutboxEvent.get_by_id(dead).published_at is not None
    assert OutboxEvent.get_by_id(waiting).published_at is None  # still pending: the dispatcher drops it
    outbox_publish.dispatch()
    assert gauge() == 0


def test_removing_a_destination_drops_what_it_did_not_get_and_publishes_what_the_others_have(receivers):
    healthy, gone = receivers(), receivers()
    gone.down_for(60)
    events = [emit_event("order.paid", {"n": n}, aggregate="customer:5").id for n in range(3)]
    publish(rounds=2, forward=False)
    assert ids_received(healthy) == events and gauge() == 3
    outbox.remove_destination(gone.destination.id, "operator:alice", "receiver retired")
    counts = outbox_publish.dispatch()
    assert counts["dropped"] == 3 and gauge() == 0
    audit = AuditEvent.get(AuditEvent.action == "outbox.destination.removed")
    assert audit.reason == "receiver retired" and audit.subject_id == str(gone.destination.id)
    fast_forward()
    run_all()  # the removed destination's snoozed job wakes, finds nothing, and ends
    assert Job.select().where(Job.kind == delivery.KIND, Job.state != "completed").count() == 0


def test_a_destination_added_later_receives_the_events_routed_after_it(receivers, database):
    first = emit_event("order.paid", {"n": 1}).id
    outbox_publish.dispatch()
    receiver = receivers()
    second = emit_event("order.paid", {"n": 2}).id
    publish()
    assert ids_received(receiver) == [second] and OutboxEvent.get_by_id(first).published_at


def test_a_stream_whose_job_ended_unfinished_is_swept_back_after_the_grace_period(receivers):
    receiver = receivers()
    event = emit_event("order.paid", {"n": 1}).id
    outbox_publish.dispatch()
    (job,) = Job.select().where(Job.kind == delivery.KIND)
    client.cancel(job.id, reason="operator cancelled it")
    assert outbox_publish.dispatch()["enqueued"] == 0  # within the grace period
    OutboxDelivery.update(
        next_attempt_at=utcnow() - outbox_publish.SWEEP_GRACE - datetime.timedelta(seconds=1)
    ).execute()
    assert outbox_publish.dispatch()["enqueued"] == 1
    run_all()
    assert ids_received(receiver) == [event]


def test_two_destinations_finishing_one_event_at_once_publish_it(receivers):
    first, second = receivers(), receivers()
    event = emit_event("order.paid", {"n": 1})
    outbox_publish.dispatch()
    rows = {d.destination_id: d.id for d in OutboxDelivery.select()}
    db.close()
    inside = threading.Event()

    def finish(destination_id, hold):
        with db.atomic():
            OutboxDelivery.update(status="delivered", delivered_at=utcnow()).where(
                OutboxDelivery.id == rows[destination_id]
            ).execute()
            outbox.publish_complete([event.id], utcnow())
            fetch_one("SELECT 1")  # sends what PostgreSQL would keep for the COMMIT; the transaction stays open
            inside.set()
            time.sleep(hold)
        db.close()

    slow = threading.Thread(target=finish, args=(first.destination.id, 1.0))
    slow.start()
    inside.wait(10)
    finish(second.destination.id, 0)
    slow.join()
    assert OutboxEvent.get_by_id(event.id).published_at is not None
