"""What keeps the queue healthy, run once a second by each worker's scheduler thread.

Every worker: heartbeat (its row in job_workers, which also names the kinds
and passes it runs), try to hold the leader lease (unless started with
`--no-periodic`), ask its own runs that outlived their timeout or were
cancelled to stop. The leader only: enqueue due periodic passes, rescue jobs
of dead workers, delete finished rows past their retention, and report
work no live worker declares: rows due for UNDECLARED_AFTER_S whose kind or
pass is in no live worker's row (SPEC 1.11) are logged, and handed to the
application's report (one operator notice per waiting work and oldest row);
on PostgreSQL, VACUUM (ANALYZE) `jobs` once its dead row versions pass
VACUUM_DEAD_FRACTION of its live rows (at least VACUUM_DEAD_FLOOR), or only
ANALYZE it when that many rows changed since its statistics were taken.

Why the queue vacuums its own table: every claim and every completion writes
a new version of the row, and `state` is in the indexes, so none of those
updates is HOT; until a vacuum, the claim's index scan steps over an entry
for every job claimed before. PostgreSQL's autovacuum is off on many CI
images and managed setups, and with it on, a burst outruns its default
thresholds; without a vacuum the claim slows job after job (bench.sustained).
Nor, with autovacuum off, does anything ANALYZE the table: a burst inserted
into a table the planner believes empty is claimed by sorting every due row
on each claim instead of reading the first few of the fetch index.
The vacuum runs in a thread of its own (it may take seconds on a large table;
heartbeats and the lease go on), one at a time, and SKIP_LOCKED: if another
vacuum (autovacuum, another leader's) holds the table, this one is skipped.

A run past its timeout is asked to stop (`should_stop()`), and its row
stays `running` under this live worker until the function has returned:
the unique key stays held, so a slow pass never has a twin started beside
it (SPEC 5.1). The runner then records it `cancelled`.

Timing (River's election timing; heartbeat-based rescue instead of River's
fixed one hour): a dead worker's jobs are rescued at most
WORKER_STALE_AFTER_S + RESCUE_INTERVAL_S after its last heartbeat (40 s),
and a dead leader is replaced within LEADER_TTL_S + ELECT_INTERVAL_S (20 s).
A live worker keeps heartbeating however long its jobs run, so they are
never rescued under it. A leader that could not reach the database itself
rescues nobody until it has been back for WORKER_STALE_AFTER_S: heartbeats
that lapsed during that outage (its own included) say nothing about who died.
"""

import datetime
import json
import logging
import threading
import time

from config.database import is_unavailable
from jobs.engine.client import append_error, error_entry
from jobs.engine.kinds import PERIODIC_KIND, DeclaredWork
from jobs.engine.outage import report_failure
from jobs.engine.states import CANCELLED, COMPLETED, DISCARDED, RETRYABLE, RUNNING
from models.base import db, utcnow

logger = logging.getLogger("omniflow.jobs.maintenance")

HEARTBEAT_INTERVAL_S = 5
WORKER_STALE_AFTER_S = 30
ELECT_INTERVAL_S = 5
LEADER_TTL_S = 15
LEADER_NAME = "default"
RESCUE_INTERVAL_S = 10
RESCUE_BATCH = 1000
CLEAN_INTERVAL_S = 30
CLEAN_BATCH = 1000
CLEAN_MAX_BATCHES = 10
CANCEL_CHECK_INTERVAL_S = 1
UNDECLARED_AFTER_S = 600
UNDECLARED_CHECK_INTERVAL_S = 60
VACUUM_CHECK_INTERVAL_S = 5
# A vacuum costs a pass over every index of `jobs`: on a table of history, wait
# for dead versions in proportion to it; on a small one, for the floor.
VACUUM_DEAD_FRACTION = 0.05
VACUUM_DEAD_FLOOR = 20_000
RETENTION = {
    COMPLETED: datetime.timedelta(hours=24),
    CANCELLED: datetime.timedelta(days=7),
    DISCARDED: datetime.timedelta(days=7),
}


class RecordedElsewhere(Exception):
    """Another leader recorded a run of this pass since this one read the schedule."""


class Maintenance:
    def __init__(self, huey, executor, register, stand_for_leader=True):
        self.huey = huey
        self.executor = executor
        self.register = register  # re-registers the worker under a new id
        self.stand_for_leader = stand_for_leader
        self.is_leader = False
        self._last_runs = None
        self._next = {}
        self._unreachable_at = None  # monotonic time of the last step the database did not answer
        self._vacuum = None  # the thread of the vacuum under way

    @property
    def sql(self):
        return self.huey.client.sql

    def _due(self, name, interval_s):
        now = time.monotonic()
        if now >= self._next.get(name, 0):
            self._next[name] = now + interval_s
            return True
        return False

    def tick(self):
        self._step("heartbeat", HEARTBEAT_INTERVAL_S, self.heartbeat)
        if self.stand_for_leader:
            self._step("elect", ELECT_INTERVAL_S, self.elect)
        self._step("stop_runs", CANCEL_CHECK_INTERVAL_S, self.stop_overdue_and_cancelled_runs)
        if self.is_leader:
            self._step("periodic", 0, self.enqueue_due_periodic)
            self._step("rescue", RESCUE_INTERVAL_S, self.rescue)
            self._step("clean", CLEAN_INTERVAL_S, self.clean)
            self._step("undeclared", UNDECLARED_CHECK_INTERVAL_S, self.report_undeclared)
            if self.sql.is_postgres:
                self._step("vacuum", VACUUM_CHECK_INTERVAL_S, self.vacuum_if_needed)

    def _step(self, name, interval_s, action):
        if not self._due(name, interval_s):
            return
        try:
            action()
        except Exception as error:
            # The step runs again at its next turn, through a fresh connection
            # if the server cut this one; an outage logs once, not every turn.
            if is_unavailable(error):
                self._unreachable_at = time.monotonic()
            report_failure(logger, "queue maintenance step failed", error, task=name)

    # -- every worker ------------------------------------------------------------

    def heartbeat(self):
        if not self.sql.heartbeat(self.executor.worker_id, utcnow()):
            # Our row was removed: the leader declared this worker dead and
            # rescued its jobs. Runs still going will find their writes
            # refused; new claims go under a fresh id.
            logger.error("this worker was declared dead; re-registering", extra={"worker_id": self.executor.worker_id})
            self.register()

    def elect(self):
        now = utcnow()
        was_leader = self.is_leader
        self.is_leader = self.sql.elect(
            LEADER_NAME, self.executor.worker_id, now, now + datetime.timedelta(seconds=LEADER_TTL_S)
        )
        if self.is_leader and not was_leader:
            self._last_runs = None
            self._next.pop("rescue", None)
            logger.info("elected queue leader", extra={"worker_id": self.executor.worker_id})
        elif was_leader and not self.is_leader:
            logger.warning("lost queue leadership", extra={"worker_id": self.executor.worker_id})

    def resign(self):
        if self.is_leader:
            self.sql.resign(LEADER_NAME, self.executor.worker_id)
            self.is_leader = False

    def stop_overdue_and_cancelled_runs(self):
        running = [context for context in self.executor.runner.in_flight() if not context.cancelled]
        if not running:
            return
        for context in running:
            if context.past_deadline():
                # The row keeps its state and unique key until the run returns.
                context.cancel(f"timed out after {context.timeout_s:g}s")
                logger.warning(
                    "job run asked to stop: timeout", extra={"job_id": context.job.id, "kind": context.job.kind}
                )
        still = [context for context in running if not context.cancelled]
        if still:
            states = self.sql.states_of([context.job.id for context in still])
            for context in still:
                if states.get(context.job.id) != RUNNING:
                    context.cancel("job was cancelled")

    # -- leader only -------------------------------------------------------------------

    def enqueue_due_periodic(self, now=None):
        schedules = self.huey.periodic_schedules
        if not schedules:
            return
        if self._last_runs is None:
            self._last_runs = self.sql.periodic_last_runs()
        now = now or utcnow()
        for name, spec in schedules.items():
            run_at = spec.schedule.due(self._last_runs.get(name), now)
            if run_at is None:
                continue
            try:
                with db.atomic():
                    if not self.sql.holds_lease(LEADER_NAME, self.executor.worker_id, now):
                        self.is_leader = False
                        return
                    result = self.huey.client.insert(PERIODIC_KIND, {"task": name})
                    if not self.sql.record_periodic_run(name, self._last_runs.get(name), run_at):
                        raise RecordedElsewhere(name)
            except RecordedElsewhere:
                # This leader's view of the schedule was stale (it lost the
                # lease for a while without noticing): read it again next tick.
                self._last_runs = None
                logger.warning("periodic task already run by another leader; not enqueued", extra={"task": name})
                return
            self._last_runs[name] = run_at
            logger.info(
                "periodic task skipped: previous run still active"
                if result.skipped_as_duplicate
                else "periodic task enqueued",
                extra={"task": name, "job_id": result.job_id},
            )

    def rescue(self):
        if self._unreachable_at is not None and time.monotonic() - self._unreachable_at < WORKER_STALE_AFTER_S:
            return
        now = utcnow()
        self.sql.forget_dead_workers(now - datetime.timedelta(seconds=WORKER_STALE_AFTER_S))
        for job_id, dead_worker, attempt, max_attempts, errors in self.sql.orphaned_jobs(RESCUE_BATCH):
            errors = append_error(
                json.loads(errors), error_entry(attempt, "the worker running this job stopped (rescued)")
            )
            exhausted = attempt >= max_attempts
            state = DISCARDED if exhausted else RETRYABLE
            if self.sql.rescue(job_id, dead_worker, state, now, now if exhausted else None, errors):
                logger.warning("rescued job of a dead worker", extra={"job_id": job_id, "state": state})

    def report_undeclared(self):
        """Name the work that has waited UNDECLARED_AFTER_S with no live worker declaring it."""
        now = utcnow()
        kinds, passes = set(), set()
        for worker_kinds, worker_passes in self.sql.declared_by_live_workers(
            now - datetime.timedelta(seconds=WORKER_STALE_AFTER_S)
        ):
            kinds.update(json.loads(worker_kinds))
            passes.update(json.loads(worker_passes))
        declared = DeclaredWork(tuple(sorted(kinds)), tuple(sorted(passes)))
        waiting = self.sql.undeclared_waiting(declared, now - datetime.timedelta(seconds=UNDECLARED_AFTER_S))
        for kind, args, oldest_id in waiting:
            work = f"periodic pass {json.loads(args).get('task')}" if kind == PERIODIC_KIND else f"job kind {kind}"
            logger.warning("no running worker declares waiting work", extra={"task": work, "job_id": oldest_id})
            self.huey.report_undeclared(work, oldest_id)

    def clean(self):
        now = utcnow()
        for state, keep in RETENTION.items():
            removed = 0
            for _ in range(CLEAN_MAX_BATCHES):
                count = self.sql.clean(state, now - keep, CLEAN_BATCH)
                removed += count
                if count < CLEAN_BATCH:
                    break
            if removed:
                logger.info("cleaned finished jobs", extra={"state": state, "count": removed})
        self.sql.kv_clean_expired(now)

    def vacuum_if_needed(self):
        """Start a vacuum of `jobs` in the background when its dead row versions pass the
        threshold, or an ANALYZE when only its rows changed that much since the last one."""
        if self._vacuum is not None and self._vacuum.is_alive():
            return
        live, dead, changed = self.sql.jobs_row_versions()
        threshold = max(VACUUM_DEAD_FLOOR, VACUUM_DEAD_FRACTION * live)
        if dead < threshold and changed < threshold:
            return
        self._vacuum = threading.Thread(
            target=self._vacuum_jobs, args=(live, dead, dead >= threshold), name="jobs-vacuum", daemon=True
        )
        self._vacuum.start()

    def _vacuum_jobs(self, live, dead, vacuum):
        action = "vacuum" if vacuum else "analyze"
        started = time.monotonic()
        try:
            done = self.sql.vacuum_jobs(vacuum)
            after = self.sql.jobs_row_versions()[1] if done else dead
        except Exception as error:
            report_failure(logger, f"{action} of jobs failed", error, task=action)
            return
        finally:
            db.close()  # the thread's connection goes back to the pool
        if not done:
            logger.info(f"{action} of jobs skipped: another one holds the table", extra={"table": "jobs"})
            return
        logger.info(
            f"{action} of jobs: {dead} dead row versions beside {live} live before, {after} after, "
            f"in {time.monotonic() - started:.1f} s",
            extra={"table": "jobs", "count": dead},
        )
