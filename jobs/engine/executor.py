"""Running jobs inside a worker process: claim in batches, run, record outcomes in batches.

- A Producer per queue claims up to CLAIM_BATCH due rows in one statement,
  never more than its idle workers plus a small prefetch, and hands them to those
  workers. A claimed row is `running` under this worker's id from the moment
  it is claimed, so if the process dies before a worker picks it up, rescue
  treats it exactly like a job that died mid-run.
- The JobRunner runs one job in a worker thread and turns what happened
  into an Outcome: completed, retryable/discarded (an error), scheduled (a
  snooze: the attempt is given back) or cancelled.
- The Completer writes outcomes every FLUSH_INTERVAL_S: all completions of
  one worker in one UPDATE. An outcome not yet written when the process dies
  leaves the job `running`; rescue makes it run again (jobs are idempotent),
  it is never lost. Outcomes it cannot write (the database is not answering)
  stay with it and are written once it answers (see outage.py).
"""

import datetime
import json
import logging
import threading
import time
import traceback
from collections import deque
from dataclasses import dataclass, field

from huey import signals as huey_signals
from huey.api import Huey, Task
from huey.exceptions import CancelExecution

from config.database import is_postgres, session_dsn
from config.logging import describe_error
from jobs.engine import metrics, notifier
from jobs.engine.client import append_error, error_entry
from jobs.engine.kinds import PERIODIC_KIND
from jobs.engine.outage import Backoff, report_failure
from jobs.engine.states import AVAILABLE, CANCELLED, COMPLETED, DISCARDED, RETRYABLE, SCHEDULED
from models.base import db, utcnow
from security.redactor import redact

logger = logging.getLogger("omniflow.jobs")

CLAIM_BATCH = 10
# Claimed jobs kept ready beyond the idle workers, so a worker that finishes
# starts its next job at once instead of waiting for a claim round trip.
# They are `running` under this worker like any claimed job: a graceful stop
# hands them back, a crash leaves them to rescue.
PREFETCH = 4
FLUSH_INTERVAL_S = 0.05
MAX_FLUSH_ROWS = 500
TAKE_TIMEOUT_S = 1.0
POLL_INTERVAL_POSTGRES_S = 1.0
POLL_INTERVAL_SQLITE_S = 0.05
INTERRUPTED_RETRY_DELAY_S = 10
UNKNOWN_KIND_RETRY_S = 60
LOG_LEVELS = {COMPLETED: logging.DEBUG, RETRYABLE: logging.WARNING, DISCARDED: logging.WARNING}


class JobSnooze(Exception):
    """Raise from a job to run it again after `seconds` without spending an attempt."""

    def __init__(self, seconds):
        super().__init__(f"snoozed for {seconds}s")
        self.seconds = max(0.0, float(seconds))


class UnknownJobKind(JobSnooze):
    """A row whose kind or periodic pass this worker has not declared. Claims skip such rows
    (sql.py); one reached anyway is not this job's failure: it goes back to the queue with its
    attempt refunded, for a worker that declares it (SPEC 1.11)."""

    def __init__(self, message):
        super().__init__(UNKNOWN_KIND_RETRY_S)
        self.args = (message,)


class JobCancel(Exception):
    """Raise from a job to end it as cancelled: final, never retried."""

    def __init__(self, reason="cancelled by the job"):
        super().__init__(reason)
        self.reason = reason


class UnrunnableTask(Task):
    """Stands in for a row that cannot become a task (an undeclared kind, an undecodable
    message): running it raises why. An undecodable message fails, retries and is finally
    discarded like any other failing job instead of disappearing; an undeclared kind goes back."""

    def __init__(self, error, **kwargs):
        super().__init__(**kwargs)
        self.error = error

    def execute(self):
        raise self.error


@dataclass
class ClaimedJob:
    id: int
    kind: str
    queue: str
    args: str
    payload: bytes
    attempt: int
    max_attempts: int
    priority: int
    errors: str
    unique_states: int
    worker_id: str
    started: bool = False

    @classmethod
    def from_row(cls, row, worker_id, sql):
        job_id, kind, queue, args, payload, attempt, max_attempts, priority, errors, unique_states = row
        return cls(
            job_id,
            kind,
            queue,
            args,
            sql.blob(payload),
            attempt,
            max_attempts,
            priority,
            errors,
            unique_states,
            worker_id,
        )

    @property
    def args_dict(self):
        return json.loads(self.args)

    @property
    def error_list(self):
        return json.loads(self.errors)


@dataclass
class Outcome:
    state: str
    label: str
    scheduled_at: object = None
    finalized_at: object = None
    errors: list = field(default_factory=list)
    attempt_delta: int = 0
    error: str = None  # for the log line of a failed run: the error's class and first line, redacted


class JobContext:
    """What a running job can ask about itself: `current_job()` returns this."""

    def __init__(self, job, timeout_s):
        self.job = job
        self.timeout_s = timeout_s
        self.deadline = time.monotonic() + timeout_s if timeout_s else None
        self._cancelled = threading.Event()
        self.cancel_reason = None

    @property
    def id(self):
        return self.job.id

    @property
    def attempt(self):
        return self.job.attempt

    @property
    def args(self):
        return self.job.args_dict

    def cancel(self, reason):
        self.cancel_reason = reason
        self._cancelled.set()

    @property
    def cancelled(self):
        return self._cancelled.is_set()

    def past_deadline(self):
        return self.deadline is not None and time.monotonic() >= self.deadline

    def should_stop(self):
        """True once the run was cancelled or outlived its timeout: wind down."""
        return self.cancelled or self.past_deadline()

    def raise_if_stopped(self):
        if self.should_stop():
            raise JobCancel(self.cancel_reason or f"timed out after {self.timeout_s:g}s")


_current = threading.local()


def current_job():
    """The JobContext of the job running in this thread, or None."""
    return getattr(_current, "context", None)


def should_stop():
    """True when the job running in this thread was asked to stop; False outside a job.

    A pass checks it between batches and returns once it is True."""
    context = current_job()
    return context is not None and context.should_stop()


class SyncRecorder:
    """Writes each outcome at once (Huey's own consumer, tests, immediate use)."""

    def submit(self, job, outcome):
        write_outcomes(job_sql(), [(job, outcome)])


def job_sql():
    from jobs.engine.sql import for_database

    return for_database(db.obj)


def write_outcomes(sql, batch):
    """One transaction: completions grouped per worker id and attempt, other outcomes row by row.

    Writing a batch again (its COMMIT's answer was lost) changes nothing: each
    write is guarded by the worker and attempt that ran the job (sql.py).
    """
    now = utcnow()
    completed = {}
    with db.atomic():
        for job, outcome in batch:
            if outcome.state == COMPLETED:
                completed.setdefault((job.worker_id, job.attempt), []).append(job.id)
            else:
                sql.finish(
                    job.id,
                    job.worker_id,
                    job.attempt,
                    outcome.state,
                    outcome.scheduled_at,
                    outcome.finalized_at,
                    outcome.errors,
                    outcome.attempt_delta,
                )
        for (worker_id, attempt), ids in completed.items():
            for start in range(0, len(ids), MAX_FLUSH_ROWS):
                sql.complete(ids[start : start + MAX_FLUSH_ROWS], worker_id, attempt, now)


class Completer(threading.Thread):
    def __init__(self, stop_event):
        super().__init__(name="JobCompleter", daemon=True)
        self.stop_event = stop_event
        self._lock = threading.Lock()
        self._pending = []
        self._flush_now = threading.Event()

    def submit(self, job, outcome):
        with self._lock:
            self._pending.append((job, outcome))
            if len(self._pending) >= MAX_FLUSH_ROWS:
                self._flush_now.set()

    def run(self):
        backoff = Backoff()
        while not self.stop_event.is_set():
            self._flush_now.wait(FLUSH_INTERVAL_S)
            self._flush_now.clear()
            if self.flush():
                backoff.reset()
            else:
                # Not at the pace of finished jobs: the outcomes are safe here.
                self.stop_event.wait(backoff.next())

    def flush(self):
        """Write what is pending; on failure keep it, in order, for the next flush."""
        with self._lock:
            batch, self._pending = self._pending, []
        if not batch:
            return True
        try:
            write_outcomes(job_sql(), batch)
            return True
        except Exception as error:
            report_failure(logger, "could not record job outcomes; keeping them to retry", error)
            with self._lock:
                self._pending = batch + self._pending
            return False


class Producer(threading.Thread):
    """Claims jobs of one queue for its worker threads, as many as they have free slots.

    Free slots are counted as River does: the queue's concurrency minus jobs
    handed out and not yet finished, minus jobs claimed and not yet handed
    out, plus a small PREFETCH. A worker between two jobs is free, so one
    claim fills every slot that opened while the previous claim was on the
    wire.
    """

    def __init__(self, executor, queue, concurrency):
        super().__init__(name=f"JobProducer-{queue}", daemon=True)
        self.executor = executor
        self.queue = queue
        self.concurrency = concurrency
        self._lock = threading.Lock()
        self._has_work = threading.Condition(self._lock)
        self._has_demand = threading.Condition(self._lock)
        self._buffer = deque()
        self._active = 0
        self._stopping = False
        self._wake = threading.Event()

    def _free_slots(self):
        return self.concurrency + PREFETCH - self._active - len(self._buffer)

    def _should_claim(self):
        # Claim at once for a worker with nothing to take; otherwise wait
        # until a few slots are free and claim them in one statement.
        free = self._free_slots()
        return free >= PREFETCH or (free > 0 and not self._buffer)

    def take(self, timeout):
        deadline = time.monotonic() + timeout
        with self._lock:
            while not self._buffer:
                remaining = deadline - time.monotonic()
                if self._stopping or remaining <= 0:
                    return None
                self._has_work.wait(remaining)
            job = self._buffer.popleft()
            job.started = True
            self._active += 1
            return job

    def finished(self):
        with self._lock:
            self._active -= 1
            self._has_demand.notify()

    def stop(self):
        with self._lock:
            self._stopping = True
            unstarted = list(self._buffer)
            self._buffer.clear()
            self._has_work.notify_all()
            self._has_demand.notify_all()
        self._wake.set()
        return unstarted

    def run(self):
        notifier.subscribe(self.queue, self._wake)
        sql = job_sql()
        declared = self.executor.huey.declared_work()
        postgres = sql.is_postgres
        poll = POLL_INTERVAL_POSTGRES_S if postgres else POLL_INTERVAL_SQLITE_S
        backoff = Backoff()
        try:
            while True:
                with self._lock:
                    while not self._stopping and not self._should_claim():
                        self._has_demand.wait(1.0)
                    if self._stopping:
                        return
                    want = min(CLAIM_BATCH, self._free_slots())
                self._wake.clear()
                try:
                    rows = sql.claim(self.queue, want, self.executor.worker_id, utcnow(), declared)
                except Exception as error:
                    report_failure(logger, "claiming jobs failed; retrying", error, queue=self.queue)
                    # The notification channel coming back wakes this wait early.
                    self._wake.wait(backoff.next())
                    continue
                backoff.reset()
                if rows:
                    jobs = [ClaimedJob.from_row(row, self.executor.worker_id, sql) for row in rows]
                    with self._lock:
                        if self._stopping:
                            self.executor.hand_back(jobs)
                            return
                        self._buffer.extend(jobs)
                        self._has_work.notify(len(jobs))
                    continue
                # Nothing due: wait for a wake-up or the poll interval. SQLite
                # has no cross-process wake-up, so it polls often, with a read
                # that takes no write lock.
                while not self._stopping:
                    if self._wake.wait(poll):
                        break
                    if postgres or self._has_due(sql, declared):
                        break
        finally:
            notifier.unsubscribe(self.queue, self._wake)

    def _has_due(self, sql, declared):
        try:
            return sql.has_due(self.queue, utcnow(), declared)
        except Exception:
            return True  # let the claim try: it reports the failure and backs off


class JobRunner:
    """Runs one claimed job in the calling thread and records its outcome."""

    def __init__(self, huey, recorder):
        self.huey = huey
        self.recorder = recorder
        self._in_flight = {}
        self._lock = threading.Lock()

    def in_flight(self):
        with self._lock:
            return list(self._in_flight.values())

    def run_claimed(self, job):
        return self.run(self.huey.task_for(job), job)

    def run(self, task, job):
        if job.payload is not None and not isinstance(task, UnrunnableTask):
            return self._run_huey_message(task, job)
        timeout_s = self.huey.timeout_for(job)
        context = JobContext(job, timeout_s)
        with self._lock:
            self._in_flight[job.id] = context
        _current.context = context
        self.huey._emit(huey_signals.SIGNAL_EXECUTING, task)
        started = time.monotonic()
        value = None
        try:
            value = task.execute()
        except JobSnooze as snooze:
            outcome = Outcome(
                SCHEDULED,
                "snoozed",
                scheduled_at=utcnow() + _seconds(snooze.seconds),
                errors=job.error_list,
                attempt_delta=-1,
            )
        except (JobCancel, CancelExecution) as cancel:
            reason = getattr(cancel, "reason", None) or str(cancel) or "cancelled by the job"
            outcome = Outcome(
                CANCELLED,
                "cancelled",
                finalized_at=utcnow(),
                errors=append_error(job.error_list, error_entry(job.attempt, reason)),
            )
            self.huey._emit(huey_signals.SIGNAL_CANCELED, task)
        except Exception as exc:
            outcome = self._error_outcome(job, exc)
            self.huey._emit(huey_signals.SIGNAL_ERROR, task, exc)
        else:
            outcome = Outcome(COMPLETED, "completed")
            self.huey._emit(huey_signals.SIGNAL_COMPLETE, task)
        finally:
            _current.context = None
            with self._lock:
                self._in_flight.pop(job.id, None)
            release_connection()
        if context.should_stop() and outcome.state == COMPLETED:
            # The run returned after it was asked to stop (timeout or an
            # operator's cancel): it may have left work undone, so it ends
            # cancelled. Until this write the row kept its state and unique
            # key; after an operator's cancel the guarded write is a no-op.
            reason = context.cancel_reason or f"timed out after {context.timeout_s:g}s"
            outcome = Outcome(
                CANCELLED,
                "cancelled",
                finalized_at=utcnow(),
                errors=append_error(job.error_list, error_entry(job.attempt, reason)),
            )
        self._finish(job, task, outcome, time.monotonic() - started)
        return value

    def _run_huey_message(self, task, job):
        # A plain Huey task keeps Huey's semantics (its own retries and
        # results); the row only records that the message was processed.
        started = time.monotonic()
        try:
            return Huey.execute(self.huey, task)
        finally:
            release_connection()
            self._finish(job, task, Outcome(COMPLETED, "completed"), time.monotonic() - started)

    def _error_outcome(self, job, exc):
        message = f"{type(exc).__name__}: {exc}"
        entry = error_entry(job.attempt, message)
        entry["trace"] = error_entry(job.attempt, _short_trace(exc))["error"]
        errors = append_error(job.error_list, entry)
        if job.kind == PERIODIC_KIND:
            logger.error(
                "periodic task failed",
                extra={"task": job.args_dict.get("task"), "job_id": job.id, "error": message},
            )
        logged = redact(describe_error(exc))
        if job.attempt >= job.max_attempts:
            return Outcome(DISCARDED, "discarded", finalized_at=utcnow(), errors=errors, error=logged)
        delay = self.huey.backoff_for(job)
        return Outcome(RETRYABLE, "retryable", scheduled_at=utcnow() + _seconds(delay), errors=errors, error=logged)

    def _finish(self, job, task, outcome, seconds):
        metrics.observe_run(job.kind, outcome.label, seconds)
        # Failures are warnings; completions are debug lines: at thousands of
        # jobs a second they would drown everything else.
        level = LOG_LEVELS.get(outcome.state, logging.INFO)
        if logger.isEnabledFor(level):
            fields = {"job_id": job.id, "kind": job.kind, "attempt": job.attempt, "state": outcome.state}
            if outcome.error is not None:
                fields["error"] = outcome.error
            logger.log(level, f"job {outcome.label}", extra=fields)
        self.recorder.submit(job, outcome)


class Executor:
    """The worker process's engine: producers, completer, runner, in-flight jobs."""

    def __init__(self, huey, concurrency, worker_id):
        self.huey = huey
        self.worker_id = worker_id
        self.stop_event = threading.Event()
        self.completer = Completer(self.stop_event)
        self.runner = JobRunner(huey, self.completer)
        self.producers = {queue: Producer(self, queue, count) for queue, count in concurrency.items() if count > 0}
        self.listener = None

    def start(self):
        if is_postgres():
            from jobs.engine.notifier import PostgresListener

            dsn, options = session_dsn()
            self.listener = PostgresListener(
                dsn, self.stop_event, options, probe=_notify_through_pool, poll_s=POLL_INTERVAL_POSTGRES_S
            )
            self.listener.start()
            self.listener.ready.wait(5)
        self.completer.start()
        for producer in self.producers.values():
            producer.start()

    def take(self, queue, timeout=TAKE_TIMEOUT_S):
        return self.producers[queue].take(timeout)

    def finished(self, queue):
        self.producers[queue].finished()

    def stop_claiming(self):
        """No new claims; claimed jobs no worker started go back to the queue."""
        unstarted = []
        for producer in self.producers.values():
            unstarted.extend(producer.stop())
        self.hand_back(unstarted)

    def hand_back(self, jobs, state=AVAILABLE, delay_s=0):
        if not jobs:
            return
        by_worker = {}
        for job in jobs:
            by_worker.setdefault(job.worker_id, []).append(job.id)
        sql = job_sql()
        scheduled_at = utcnow() + _seconds(delay_s)
        for worker_id, ids in by_worker.items():
            sql.hand_back(ids, worker_id, state, scheduled_at)
        logger.info("handed jobs back to the queue", extra={"count": len(jobs), "state": state})

    def shutdown(self):
        """After the workers stopped: write outcomes, hand back what still runs."""
        self.stop_event.set()
        for producer in self.producers.values():
            producer.join(2)
        self.completer.join(2)
        for _ in range(3):
            if self.completer.flush():
                break
            time.sleep(0.5)
        interrupted = [context.job for context in self.runner.in_flight()]
        # Still running after the shutdown timeout: the process is about to
        # exit under them. Give them back a little later, attempt refunded.
        self.hand_back(interrupted, SCHEDULED, INTERRUPTED_RETRY_DELAY_S)


def release_connection():
    """Return a job thread's pooled PostgreSQL connection between jobs.

    28 job threads per worker process holding a connection each would
    exhaust a server's connections with a few replicas; the pool keeps them
    open for reuse. SQLite connections are cheap and stay with their thread.
    """
    if is_postgres() and not db.is_closed() and not db.in_transaction():
        db.close()


def _notify_through_pool(payload):
    """A notification sent as an insert sends its own: the listener's check that wake-ups arrive."""
    try:
        job_sql().notify([payload])
    finally:
        release_connection()


def _seconds(value):
    return datetime.timedelta(seconds=value)


def _short_trace(exc, frames=6):
    lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
    return "".join(lines[-frames:])
