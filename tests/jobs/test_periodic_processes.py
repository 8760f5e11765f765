"""SPEC 5.1 with three real worker processes: a 15 s pass runs once when the
leader starts, then once per interval across all workers, and keeps running
after the leader is killed (a new leader takes over within 30 s); a crontab
pass runs once in every matching minute across the workers, through a
failover."""

import collections
import datetime
import signal
import time

import pytest

from jobs.engine.kinds import canonical_args
from models.base import db
from models.jobs import Job, JobLeader
from tests.support.periodic import TICK_SECONDS
from tests.support.processes import wait_for

pytestmark = pytest.mark.processes

JITTER_S = 2.5  # the leader looks once a second; allow for that and process start


def tick_times():
    rows = db.execute_sql("SELECT started_at FROM test_executions WHERE tag = 'tick' ORDER BY started_at").fetchall()
    return [started for (started,) in rows]


@pytest.mark.processes(seconds=115)
def test_fifteen_second_pass_runs_once_per_interval_across_three_workers_and_survives_leader_death(database, workers):
    started = time.time()
    processes = {workers.start("--periodic").pid: None for _ in range(3)}
    first = wait_for(tick_times, timeout=20, message="first run when the leader starts")
    assert first[0] - started < 10

    # Sample between the fourth run (first + 45 s) and the fifth (first + 60 s).
    time.sleep(max(0.0, first[0] + 3 * TICK_SECONDS + 7 - time.time()))
    before_kill = tick_times()
    leader_pid = int(JobLeader.get().leader_id.split(":")[1])
    assert leader_pid in processes
    leader = next(p for p in workers.processes if p.pid == leader_pid)
    leader.send_signal(signal.SIGKILL)
    killed_at = time.time()

    wait_for(
        lambda: (
            JobLeader.get_or_none()
            and int(JobLeader.get().leader_id.split(":")[1]) != leader_pid
            and JobLeader.get().expires_at is not None
        ),
        timeout=35,
        interval=0.5,
        message="a new leader",
    )
    assert time.time() - killed_at < 30
    time.sleep(3 * TICK_SECONDS)
    times = tick_times()

    # Once when the leader started, then once per interval: four runs in the
    # first 52 s, every gap about one interval, never two runs in one interval.
    assert len(before_kill) == 4, before_kill
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert all(gap > TICK_SECONDS - JITTER_S for gap in gaps), gaps
    assert sum(gap > TICK_SECONDS + JITTER_S for gap in gaps) <= 1, gaps  # the failover gap
    assert max(gaps) < TICK_SECONDS + 30, gaps
    after_kill = [t for t in times if t > killed_at]
    assert len(after_kill) >= 2, "the pass stopped running after the leader died"

    # One job row per run, each completed by exactly one of the workers. The
    # workers stop first, so no run is caught between its job row and its
    # tick (the leader may have enqueued the next run a moment ago).
    workers.stop_all()
    times = tick_times()
    runs = list(Job.select().where(Job.kind == "periodic_task"))
    assert sum(job.state == "completed" for job in runs) == len(times)
    assert {job.state for job in runs} <= {"completed", "available"}


def minutely_runs():
    rows = db.execute_sql("SELECT job_id, started_at FROM test_executions WHERE tag = 'minutely' ORDER BY started_at")
    return rows.fetchall()


def minutely_jobs(*states):
    query = Job.select().where(Job.kind == "periodic_task", Job.args == canonical_args({"task": "t_minutely"}))
    return list(query.where(Job.state.in_(states)) if states else query)


def leader_pid():
    leader = JobLeader.get_or_none()
    return int(leader.leader_id.split(":")[1]) if leader else None


@pytest.mark.processes(seconds=35)
def test_crontab_pass_runs_once_per_matching_minute_across_three_workers_through_a_failover(database, workers):
    # Leader takeover shortened to ~4 s (--fast-takeover); the crontab keeps its minutes.
    for _ in range(3):
        workers.start("--crontab", "--fast-takeover")
    wait_for(lambda: len(minutely_jobs("completed")) == 1, timeout=30, message="the first run to complete")
    (first,) = minutely_jobs()
    first_minute = first.created_at.replace(second=0, microsecond=0)
    old_leader = leader_pid()
    next(p for p in workers.processes if p.pid == old_leader).send_signal(signal.SIGKILL)
    wait_for(lambda: leader_pid() not in (None, old_leader), timeout=15, message="a new leader")

    wait_for(lambda: len(minutely_jobs("completed")) >= 2, timeout=75, interval=0.5, message="the next minute's run")
    time.sleep(3)  # room for a duplicate to show up
    workers.stop_all()

    # Each run is a job row the leader inserted in the minute it ran for, and
    # ran exactly once.
    runs = minutely_jobs()
    per_minute = collections.Counter(job.created_at.replace(second=0, microsecond=0) for job in runs)
    details = [(job.id, str(job.created_at), job.state, job.attempted_by) for job in runs], minutely_runs()
    assert per_minute == {first_minute: 1, first_minute + datetime.timedelta(minutes=1): 1}, details
    assert {job.state for job in runs} == {"completed"}, details
    assert sorted(job_id for job_id, _ in minutely_runs()) == sorted(job.id for job in runs), details


@pytest.mark.processes(seconds=50)
@pytest.mark.parametrize("backend", ["postgres"])  # the leader and claims on both: the tests above
def test_every_pass_of_spec_5_1_runs_once_per_interval_across_three_production_workers(database, workers, tmp_path):
    from tests.conftest import TEST_DATA_KEY
    from tests.jobs.test_spec_passes import BEYOND_THE_TABLE, SPEC_5_1

    env = {"APP_DATA_ENCRYPTION_KEY": TEST_DATA_KEY, "APP_BACKUP_DIR": str(tmp_path / "backups")}
    for _ in range(3):
        workers.start_huey_consumer(env=env)
    names = set(SPEC_5_1) | BEYOND_THE_TABLE

    def runs():
        counts = collections.Counter()
        for job in Job.select(Job.args, Job.created_at).where(Job.kind == "periodic_task"):
            counts[job.args if isinstance(job.args, str) else canonical_args(job.args)] += 1
        return {name: counts[canonical_args({"task": name})] for name in names}

    # A fresh installation's first leader runs every pass at once.
    wait_for(lambda: all(runs().values()), timeout=30, message="every pass's first run")
    first = min(job.created_at for job in Job.select().where(Job.kind == "periodic_task"))
    time.sleep(36)  # room for bulk_actions' third run (every 15 s) and goods_delivery_schedule's second (30 s)
    workers.stop_all()
    last = max(job.created_at for job in Job.select().where(Job.kind == "periodic_task"))
    window = (last - first).total_seconds()
    counted = runs()
    for name, (interval, _) in SPEC_5_1.items():
        most = int(window // interval) + 1  # never two runs in one interval, whichever worker leads
        assert 1 <= counted[name] <= most, (name, counted, window)
    assert counted["bulk_actions"] >= 3 and counted["goods_delivery_schedule"] >= 2, (counted, window)
    assert {job.state for job in Job.select().where(Job.kind == "periodic_task")} <= {"completed", "available"}
