"""SPEC 1.8, 5.1 and the leader: election with a lease, periodic passes enqueued
by the leader only (once at start, then per interval or per matching crontab
minute, unique while active, one attempt), and the cleaner deleting finished
rows after retention in batches."""

import datetime
import logging
from types import SimpleNamespace

import pytest

from jobs import OmniflowHuey, crontab, every
from jobs.engine import maintenance as maintenance_module
from jobs.engine.maintenance import Maintenance
from jobs.engine.schedules import floor_minute
from models.base import db, utcnow
from models.jobs import Job, JobLeader, JobPeriodic

unit = OmniflowHuey("maintenance-unit")
cron_unit = OmniflowHuey("maintenance-crontab")


@unit.periodic_task(every(seconds=15), name="sweep")
def sweep():
    return None


@unit.periodic_task(every(minutes=5), name="broken_pass")
def broken_pass():
    raise RuntimeError("sweep step exploded")


@cron_unit.periodic_task(crontab(), name="minutely")
def minutely():
    return None


def make_maintenance(worker_id, huey=unit):
    executor = SimpleNamespace(worker_id=worker_id, runner=huey.runner)
    return Maintenance(huey, executor, register=lambda: None)


def periodic_rows(task):
    return [job for job in Job.select().where(Job.kind == "periodic_task") if job.args_dict["task"] == task]


def test_one_leader_at_a_time_and_takeover_after_the_lease_expires(database):
    a, b = make_maintenance("worker-a"), make_maintenance("worker-b")
    a.elect()
    b.elect()
    assert a.is_leader and not b.is_leader
    a.elect()  # renewing keeps it
    assert a.is_leader
    JobLeader.update(expires_at=utcnow() - datetime.timedelta(seconds=1)).execute()
    b.elect()
    a.elect()
    assert b.is_leader and not a.is_leader
    b.resign()
    a.elect()
    assert a.is_leader


def test_only_the_leader_enqueues_and_each_pass_runs_once_when_the_leader_starts(database):
    leader, follower = make_maintenance("worker-a"), make_maintenance("worker-b")
    leader.elect()
    follower.elect()
    follower.tick()
    assert Job.select().count() == 0
    leader.enqueue_due_periodic()
    assert len(periodic_rows("sweep")) == 1 and len(periodic_rows("broken_pass")) == 1
    leader.enqueue_due_periodic()  # not due again inside the interval
    assert len(periodic_rows("sweep")) == 1


def test_a_pass_still_queued_is_not_queued_beside_itself(database):
    leader = make_maintenance("worker-a")
    leader.elect()
    leader.enqueue_due_periodic()
    leader._last_runs = {name: run - datetime.timedelta(minutes=10) for name, run in leader._last_runs.items()}
    leader.enqueue_due_periodic()
    assert len(periodic_rows("sweep")) == 1


def test_a_new_leader_continues_the_schedule_instead_of_rerunning(database):
    first = make_maintenance("worker-a")
    first.elect()
    first.enqueue_due_periodic()
    first.resign()
    second = make_maintenance("worker-b")
    second.elect()
    assert second.is_leader
    second.enqueue_due_periodic()
    assert len(periodic_rows("sweep")) == 1


def test_a_leader_that_lost_its_lease_enqueues_nothing(database):
    leader = make_maintenance("worker-a")
    leader.elect()
    JobLeader.update(leader_id="worker-z").execute()
    leader.enqueue_due_periodic()
    assert Job.select().count() == 0 and not leader.is_leader


def test_failed_pass_is_logged_with_its_name_and_left_discarded(database, caplog):
    leader = make_maintenance("worker-a")
    leader.elect()
    leader.enqueue_due_periodic()
    broken = periodic_rows("broken_pass")[0]
    with caplog.at_level(logging.ERROR, logger="omniflow.jobs"):
        while True:
            task = unit.dequeue()
            if task is None:
                break
            unit.execute(task)
    row = Job.get_by_id(broken.id)
    assert row.state == "discarded" and row.attempt == 1
    assert any(r.getMessage() == "periodic task failed" and r.task == "broken_pass" for r in caplog.records)
    assert Job.get_by_id(periodic_rows("sweep")[0].id).state == "completed"


def test_a_crontab_pass_runs_once_per_matching_minute_whichever_leader_looks(database):
    now = utcnow()
    first = make_maintenance("worker-a", cron_unit)
    first.elect()
    first.enqueue_due_periodic(now)
    first.enqueue_due_periodic(now)
    assert len(periodic_rows("minutely")) == 1
    assert JobPeriodic.get(JobPeriodic.name == "minutely").last_run_at == floor_minute(now)
    first.resign()
    second = make_maintenance("worker-b", cron_unit)
    second.elect()
    second.enqueue_due_periodic(now)  # a failover inside the minute does not run it again
    assert len(periodic_rows("minutely")) == 1


def test_a_leader_with_a_stale_view_of_the_schedule_never_reruns_what_another_leader_ran(database):
    now, hour = utcnow(), datetime.timedelta(hours=1)
    next_minute = now + datetime.timedelta(minutes=1)
    stale, other = make_maintenance("worker-a", cron_unit), make_maintenance("worker-b", cron_unit)
    JobLeader.create(name="default", leader_id="worker-a", elected_at=now, expires_at=now + hour)
    stale.enqueue_due_periodic(now)
    finish_every_job = Job.update(state="completed", finalized_at=now, unique_key=None)
    finish_every_job.execute()
    # worker-a stalls; worker-b holds the lease meanwhile and runs the next minute.
    JobLeader.update(leader_id="worker-b").execute()
    other.enqueue_due_periodic(next_minute)
    finish_every_job.execute()
    # worker-a gets the lease back without ever seeing it lost: its cache says
    # the next minute has not run yet. The stored schedule says it has.
    JobLeader.update(leader_id="worker-a").execute()
    stale.enqueue_due_periodic(next_minute)
    assert len(periodic_rows("minutely")) == 2
    stale.enqueue_due_periodic(next_minute)  # read again: nothing due
    assert len(periodic_rows("minutely")) == 2


def test_crontab_minutes_missed_while_no_leader_was_up_run_once_when_one_returns(database):
    now = utcnow()
    JobPeriodic.create(name="minutely", last_run_at=floor_minute(now) - datetime.timedelta(minutes=7))
    leader = make_maintenance("worker-a", cron_unit)
    leader.elect()
    leader.enqueue_due_periodic(now)
    Job.update(state="completed", finalized_at=now, unique_key=None).execute()  # that run finished
    leader.enqueue_due_periodic(now)
    assert len(periodic_rows("minutely")) == 1


def finished(state, age):
    job = Job.create(
        kind="t_record",
        queue="critical",
        state=state,
        args="{}",
        max_attempts=1,
        created_at=utcnow() - age,
        scheduled_at=utcnow() - age,
        finalized_at=utcnow() - age,
    )
    return job.id


def test_cleaner_deletes_finished_rows_after_retention_only(database):
    hour, day = datetime.timedelta(hours=1), datetime.timedelta(days=1)
    old = [finished("completed", 25 * hour), finished("cancelled", 8 * day), finished("discarded", 8 * day)]
    young = [finished("completed", 23 * hour), finished("cancelled", 6 * day), finished("discarded", 6 * day)]
    running = Job.create(
        kind="t_record",
        queue="critical",
        state="running",
        args="{}",
        max_attempts=1,
        created_at=utcnow() - 30 * day,
        scheduled_at=utcnow() - 30 * day,
    ).id
    leader = make_maintenance("worker-a")
    leader.clean()
    remaining = {job.id for job in Job.select()}
    assert remaining == set(young) | {running}
    assert not set(old) & remaining


def test_cleaner_works_in_bounded_batches(database, monkeypatch):
    monkeypatch.setattr(maintenance_module, "CLEAN_BATCH", 3)
    monkeypatch.setattr(maintenance_module, "CLEAN_MAX_BATCHES", 2)
    for _ in range(10):
        finished("completed", datetime.timedelta(days=2))
    make_maintenance("worker-a").clean()
    assert Job.select().count() == 4  # 2 batches of 3 this run; the rest next run


@pytest.mark.parametrize("seconds, minutes, expected", [(15, 0, 15), (30, 0, 30), (0, 15, 900)])
def test_sub_minute_and_longer_intervals(seconds, minutes, expected):
    assert every(seconds=seconds, minutes=minutes).seconds == expected


def _jobs_table_counts():
    return db.execute_sql(
        "SELECT analyze_count, vacuum_count, n_dead_tup FROM pg_stat_user_tables WHERE relname = 'jobs'"
    ).fetchone()


def _flush_statistics():
    """This connection's counts reach the statistics views now, not a second or more later."""
    db.execute_sql("SELECT pg_stat_force_next_flush()")
    db.execute_sql("SELECT 1")


def _leader_maintenance_pass(leader):
    leader._next.pop("vacuum", None)
    leader.tick()
    if leader._vacuum is not None:
        leader._vacuum.join(30)


@pytest.mark.parametrize("backend", ["postgres"])
def test_the_leader_analyzes_jobs_after_a_burst_and_vacuums_them_once_dead_versions_pile_up(database, monkeypatch):
    monkeypatch.setattr(maintenance_module, "VACUUM_DEAD_FLOOR", 200)
    leader = make_maintenance("worker-a")
    leader.elect()
    analyzed, vacuumed, _ = _jobs_table_counts()
    db.execute_sql(
        "INSERT INTO jobs (kind, queue, state, args, max_attempts, priority, unique_states, created_at, scheduled_at) "
        "SELECT 't_record', 'critical', 'available', '{}', 1, 0, 0, now(), now() FROM generate_series(1, 500)"
    )
    _flush_statistics()
    _leader_maintenance_pass(leader)
    assert _jobs_table_counts()[:2] == (analyzed + 1, vacuumed)  # new rows: statistics, nothing to vacuum

    db.execute_sql("UPDATE jobs SET state = 'completed', finalized_at = now()")
    _flush_statistics()
    assert _jobs_table_counts()[2] >= 500
    _leader_maintenance_pass(leader)
    analyzed_after, vacuumed_after, dead_after = _jobs_table_counts()
    assert (analyzed_after, vacuumed_after) == (analyzed + 2, vacuumed + 1)
    assert dead_after < 500


@pytest.mark.parametrize("backend", ["postgres"])
def test_a_follower_leaves_the_jobs_table_to_the_leader(database, monkeypatch):
    monkeypatch.setattr(maintenance_module, "VACUUM_DEAD_FLOOR", 1)
    leader, follower = make_maintenance("worker-a"), make_maintenance("worker-b")
    leader.elect()
    follower.elect()
    db.execute_sql(
        "INSERT INTO jobs (kind, queue, state, args, max_attempts, priority, unique_states, created_at, scheduled_at) "
        "SELECT 't_record', 'critical', 'available', '{}', 1, 0, 0, now(), now() FROM generate_series(1, 50)"
    )
    _flush_statistics()
    before = _jobs_table_counts()[:2]
    _leader_maintenance_pass(follower)
    assert follower._vacuum is None and _jobs_table_counts()[:2] == before
