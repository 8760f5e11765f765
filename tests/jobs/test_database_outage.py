"""SPEC 1 (issue 9, 5a), the engine in this process: outcomes the completer
could not write are kept and written once the database answers, a late
outcome never touches a later attempt of the same job, and the LISTEN
connection re-listens after the server cut it, a leader back from an outage
declares nobody dead on heartbeats that lapsed during it; a loop's failure is
one line when the database did not answer, a traceback when something else
broke."""

import datetime
import logging
import threading
from types import SimpleNamespace

from peewee import OperationalError

from jobs import huey, insert
from jobs.engine import maintenance as maintenance_module
from jobs.engine import notifier
from jobs.engine.executor import ClaimedJob, Completer, Outcome, job_sql, write_outcomes
from jobs.engine.maintenance import WORKER_STALE_AFTER_S, Maintenance
from jobs.engine.notifier import PostgresListener
from jobs.engine.outage import report_failure
from jobs.engine.states import COMPLETED, RETRYABLE
from models.base import db, utcnow
from models.jobs import Job, JobWorker
from tests.support.cut import backend_pids, cut_this_threads_connection, terminate
from tests.support.processes import wait_for


def claim(worker_id, queue="critical"):
    sql = job_sql()
    (row,) = sql.claim(queue, 1, worker_id, utcnow(), huey.declared_work())
    return ClaimedJob.from_row(row, worker_id, sql)


def test_a_late_outcome_of_an_earlier_attempt_changes_nothing_once_the_same_worker_runs_the_job_again(database):
    job_id = insert("t_record", {"n": 1}).job_id
    first = claim("worker-a")
    failed = Outcome(RETRYABLE, "retryable", scheduled_at=utcnow(), errors=[{"attempt": 1, "error": "boom"}])
    write_outcomes(job_sql(), [(first, failed)])
    second = claim("worker-a")
    assert second.attempt == 2

    # The first attempt's outcomes once more: a batch written again after its
    # COMMIT's answer was lost, or held through an outage.
    write_outcomes(job_sql(), [(first, failed)])
    write_outcomes(job_sql(), [(first, Outcome(COMPLETED, "completed"))])
    row = Job.get_by_id(job_id)
    assert (row.state, row.attempt, row.attempted_by) == ("running", 2, "worker-a")

    write_outcomes(job_sql(), [(second, Outcome(COMPLETED, "completed"))])
    assert Job.get_by_id(job_id).state == "completed"


def test_completer_keeps_outcomes_it_could_not_write_and_writes_them_once_the_database_answers(pg_database):
    job_id = insert("t_record", {"n": 1}).job_id
    completer = Completer(threading.Event())
    completer.submit(claim("worker-a"), Outcome(COMPLETED, "completed"))
    cut_this_threads_connection()

    assert completer.flush() is False
    assert Job.get_by_id(job_id).state == "running"
    assert completer.flush() is True
    assert Job.get_by_id(job_id).state == "completed"
    assert completer.flush() is True  # nothing left over to write twice


def listening_backends():
    return backend_pids(
        "SELECT pid FROM pg_stat_activity WHERE datname = %s AND query LIKE 'LISTEN%%'",
        [db.obj.connect_params.get("dbname") or db.obj.database.rsplit("/", 1)[-1]],
    )


def test_notification_channel_re_listens_after_the_server_cut_it_and_wakes_every_producer(pg_database):
    stop = threading.Event()
    woken = threading.Event()
    notifier.subscribe("t_queue", woken)
    listener = PostgresListener(db.obj.database, stop, dict(db.obj.connect_params))
    listener.start()
    try:
        assert listener.ready.wait(5)
        (first,) = wait_for(listening_backends, timeout=5, message="the LISTEN connection")
        terminate(first)
        # Back on a new connection, it wakes producers at once: inserts made
        # while it was down notified nobody.
        wait_for(woken.is_set, timeout=10, message="producers woken after reconnecting")
        wait_for(lambda: [pid for pid in listening_backends() if pid != first], timeout=5, message="a new LISTEN")
        woken.clear()
        job_sql().notify(["t_queue"])
        assert woken.wait(5), "a notification after the reconnect did not arrive"
    finally:
        stop.set()
        listener.join(5)
        notifier.unsubscribe("t_queue", woken)


def test_a_failure_that_is_not_the_database_keeps_its_traceback_and_a_database_one_is_one_line(caplog):
    log = logging.getLogger("omniflow.test.failures")
    with caplog.at_level(logging.ERROR, logger=log.name):
        try:
            raise ValueError("a bug in a step")
        except ValueError as bug:
            report_failure(log, "queue maintenance step failed", bug, task="rescue")
        report_failure(log, "queue maintenance step failed", OperationalError("server closed"), task="rescue")
    assert [record.exc_info is not None for record in caplog.records] == [True, False]


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def monotonic(self):
        return self.now


def test_a_leader_back_from_an_outage_declares_nobody_dead_until_heartbeats_had_time_to_resume(database, monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(maintenance_module, "time", clock)
    leader = Maintenance(huey, SimpleNamespace(worker_id="worker-a", runner=huey.runner), register=lambda: None)
    sql = job_sql()
    silent_since = utcnow() - datetime.timedelta(seconds=WORKER_STALE_AFTER_S + 30)
    sql.register_worker("worker-b", "host", 1, "critical:16", huey.declared_work(), silent_since)
    job_id = insert("t_record", {"n": 1}).job_id
    claim("worker-b")

    def unreachable():
        raise OperationalError("connection to server failed: Connection refused")

    leader._step("heartbeat", 0, unreachable)
    clock.now += WORKER_STALE_AFTER_S - 1
    leader.rescue()
    assert Job.get_by_id(job_id).state == "running", "rescued on heartbeats that lapsed while the leader was cut off"
    assert JobWorker.get_or_none(JobWorker.id == "worker-b") is not None

    clock.now += 2
    leader.rescue()
    assert Job.get_by_id(job_id).state == "retryable"
