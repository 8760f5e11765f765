"""OmniflowHuey: Huey's API over the durable queue, and the consumer that runs it.

- `@huey.job("fulfillment", queue="critical", max_attempts=12, unique_states=...)`
  declares a job kind; it is Huey's `@huey.task` plus the kind's rules.
  Calling the task (`fulfillment(operationId=7)`) inserts a job row and
  returns an InsertResult; `huey.client.insert(...)` does the same.
- `@huey.periodic_task(every(seconds=15))` or `@huey.periodic_task(crontab(...))`
  (Huey's own crontab) is Huey's decorator; the leader enqueues the pass as
  a `periodic_task` job when its schedule says so (schedules.py).
- `huey.create_consumer(**options)` is what a worker process starts from:
  `huey_consumer omniflow.huey` calls it with huey_consumer's options, and
  `python omniflow.py worker` calls it too. It maps or refuses the options
  (consumer_options.py), runs the process's start-up registered with
  `on_worker_start` (settings, logging, database, schema check, job kinds),
  then builds Huey's Consumer with one thread per queue slot (critical 16,
  default 8, bulk 4), a maintenance scheduler instead of Huey's minute
  ticker, a graceful shutdown on SIGTERM as well as SIGINT, and an exit
  when the database stays unreachable (outage.py).
  `huey.consumer(...)` builds the same consumer in a process that is
  already set up (tests, the demo).
- Plain `@huey.task()` functions keep Huey's own semantics (see storage.py).
"""

import logging
import os
import signal
import socket
import threading
import time
import uuid
from dataclasses import dataclass

from huey.api import Huey
from huey.consumer import Consumer, Scheduler, Worker, WorkerRecycle
from huey.exceptions import ConfigurationError

from jobs.engine import consumer_options
from jobs.engine.client import JobClient
from jobs.engine.consumer_options import SHUTDOWN_TIMEOUT_S, WorkerOptions
from jobs.engine.executor import (
    Executor,
    JobRunner,
    SyncRecorder,
    UnknownJobKind,
    UnrunnableTask,
    release_connection,
)
from jobs.engine.kinds import (
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_QUEUE,
    PERIODIC_KIND,
    QUEUES,
    RAW_HUEY_KIND,
    UNIQUE_WHILE_ACTIVE,
    DeclaredWork,
    KindRegistry,
    KindSpec,
    river_backoff,
)
from jobs.engine.maintenance import Maintenance
from jobs.engine.outage import give_up_if_unreachable, outage_limit_s
from jobs.engine.schedules import schedule_of
from jobs.engine.storage import JobStorage
from models.base import utcnow

logger = logging.getLogger("omniflow.jobs")

INTERVAL = "interval"  # periodic timeout: until the schedule's next run


@dataclass(frozen=True)
class PeriodicSpec:
    name: str
    schedule: object  # schedules.Every or schedules.Crontab
    timeout: object  # seconds, INTERVAL (until the schedule's next run) or None
    task_class: object

    def timeout_s(self, now):
        if self.timeout == INTERVAL:
            return self.schedule.seconds_to_next(now)
        return self.timeout


def new_worker_id():
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class OmniflowHuey(Huey):
    def __init__(self, name="omniflow", results=True, utc=True, **kwargs):
        super().__init__(name, results=results, utc=utc, storage_class=JobStorage, **kwargs)
        self.kinds = KindRegistry()
        self.kinds.register(
            KindSpec(PERIODIC_KIND, queue=DEFAULT_QUEUE, max_attempts=1, unique_states=UNIQUE_WHILE_ACTIVE)
        )
        self.periodic_schedules = {}
        self.left_out_passes = {}  # name → why this process does not register it (SPEC 5.2)
        self.client = JobClient(self.kinds)
        self.worker_id = f"direct:{new_worker_id()}"
        self.runner = JobRunner(self, SyncRecorder())
        self._worker_start = None
        self._undeclared_report = None

    # -- declaring work ------------------------------------------------------------

    def job(
        self,
        kind,
        queue=DEFAULT_QUEUE,
        max_attempts=DEFAULT_MAX_ATTEMPTS,
        unique_states=frozenset(),
        timeout=None,
        priority=0,
        backoff=river_backoff,
    ):
        """Declare a job kind: a Huey task whose calls insert durable job rows."""

        def decorator(fn):
            wrapper = self.task(name=kind)(fn)
            self.kinds.register(
                KindSpec(
                    kind, queue, max_attempts, frozenset(unique_states), timeout, priority, backoff, wrapper.task_class
                )
            )
            return wrapper

        return decorator

    def insert_only(self, kind, **rules):
        """Declare a kind this process inserts but does not run (yet): its rules (queue, attempts,
        uniqueness, backoff) for inserts, no task, so its claims take none of its rows. A module that
        runs it later declares it again with `job(kind, …)` and the same rules (SPEC 1.11, 3.3)."""
        self.kinds.register(KindSpec(kind, **rules))

    def periodic_task(self, validate_datetime, name=None, timeout=INTERVAL, **kwargs):
        """Huey's periodic_task with `every(...)` or Huey's `crontab(...)`, enqueued by the leader.

        `timeout`: seconds after which a run is asked to stop, INTERVAL (the
        default: when the schedule's next run is due) or None (never)."""
        schedule = schedule_of(validate_datetime)

        def decorator(fn):
            task_name = name or fn.__name__
            if task_name in self.periodic_schedules:
                raise ConfigurationError(f"periodic task {task_name!r} is declared twice")
            # Huey is given the schedule itself, which always answers "not now"
            # to its minute ticker: only the leader enqueues.
            wrapper = super(OmniflowHuey, self).periodic_task(schedule, name=task_name, **kwargs)(fn)
            self.periodic_schedules[task_name] = PeriodicSpec(task_name, schedule, timeout, wrapper.task_class)
            return wrapper

        return decorator

    def leave_out(self, name, reason):
        """Record that the periodic pass `name` is not registered here, and why (logged at worker start)."""
        self.left_out_passes[name] = reason

    def declared_work(self):
        """The kinds and periodic passes this process runs (its claims take no other rows)."""
        kinds = [spec.kind for spec in self.kinds if spec.task_class is not None]
        return DeclaredWork(tuple(sorted(kinds + [RAW_HUEY_KIND])), tuple(sorted(self.periodic_schedules)))

    def periodic_registrations(self):
        """(names of the registered periodic passes, {left-out pass: reason})."""
        return sorted(self.periodic_schedules), dict(sorted(self.left_out_passes.items()))

    # -- Huey's enqueue / dequeue / execute, routed to job rows ---------------------

    def _kind_of(self, task):
        name = type(task).__name__
        if name in self.kinds and self.kinds.get(name).task_class is type(task):
            return name
        spec = self.periodic_schedules.get(name)
        if spec is not None and spec.task_class is type(task):
            return PERIODIC_KIND
        return None

    def enqueue(self, task):
        kind = self._kind_of(task) if hasattr(task, "kwargs") else None
        if kind is None:
            return super().enqueue(task)
        if task.args:
            raise TypeError(f"{kind}: job arguments are keyword arguments (they are stored as a JSON object)")
        args = {"task": type(task).__name__} if kind == PERIODIC_KIND else task.kwargs
        return self.client.insert(kind, args, scheduled_at=task.eta, priority=task.priority)

    def dequeue(self, kind=None):
        """Claim one due job this process declared, of any queue, of `kind` if given (Huey's own
        consumer and tests use this)."""
        from jobs.engine.executor import ClaimedJob

        sql = self.client.sql
        rows = sql.claim(None, 1, self.worker_id, utcnow(), self.declared_work(), kind)
        if not rows:
            return None
        return self.task_for(ClaimedJob.from_row(rows[0], self.worker_id, sql))

    def execute(self, task, timestamp=None):
        job = getattr(task, "job", None)
        if job is None:
            return super().execute(task, timestamp)
        return self.runner.run(task, job)

    def task_for(self, job):
        """The Huey task instance that runs a claimed row."""
        try:
            task = self._build_task(job)
        except Exception as error:
            task = UnrunnableTask(error, id=str(job.id), retries=0)
        task.job = job
        return task

    def _build_task(self, job):
        if job.payload is not None:
            return self.deserialize_task(job.payload)
        if job.kind == PERIODIC_KIND:
            name = job.args_dict.get("task")
            spec = self.periodic_schedules.get(name)
            if spec is None:
                raise UnknownJobKind(f"periodic task {name!r} is not declared in this worker")
            return spec.task_class((), {}, id=str(job.id), retries=0)
        if job.kind not in self.kinds or self.kinds.get(job.kind).task_class is None:
            raise UnknownJobKind(f"job kind {job.kind!r} is not declared in this worker")
        return self.kinds.get(job.kind).task_class((), job.args_dict, id=str(job.id), retries=0)

    def timeout_for(self, job):
        if job.kind == PERIODIC_KIND:
            spec = self.periodic_schedules.get(job.args_dict.get("task"))
            return spec.timeout_s(utcnow()) if spec else None
        return self.kinds.get(job.kind).timeout_s if job.kind in self.kinds else None

    def backoff_for(self, job):
        backoff = self.kinds.get(job.kind).backoff if job.kind in self.kinds else river_backoff
        return backoff(job.attempt)

    # -- worker processes -------------------------------------------------------------

    def on_worker_start(self, start):
        """Register what a worker process does before its consumer exists: `start(WorkerOptions)`."""
        self._worker_start = start

    def on_undeclared_work(self, report):
        """Register `report(work, oldest_job_id)`: the leader calls it for work waiting that no
        running worker declares (maintenance.py), e.g. to raise an operator notice."""
        self._undeclared_report = report

    def report_undeclared(self, work, oldest_job_id):
        if self._undeclared_report is not None:
            self._undeclared_report(work, oldest_job_id)

    def create_consumer(self, concurrency=None, **options):
        """A worker process's consumer, from huey_consumer's options or `omniflow.py worker`'s.

        An option that cannot work ends the process with a message naming it.
        `concurrency` ({queue: threads}, not a huey_consumer option) is for
        benchmarks that measure one queue."""
        try:
            worker_options = consumer_options.resolve(consumer_options.given_options(options))
        except consumer_options.OptionRefused as refused:
            raise SystemExit(f"worker: {refused}") from None
        consumer_options.leave_logging_to_the_worker()
        if self._worker_start is not None:
            self._worker_start(worker_options)
        try:
            return OmniflowConsumer(self, worker_options, concurrency)
        except ConfigurationError as error:
            raise SystemExit(f"worker: {error}") from None

    def consumer(self, concurrency=None, shutdown_timeout=SHUTDOWN_TIMEOUT_S):
        """The same consumer in a process already set up (tests, the demo); no start-up runs."""
        return OmniflowConsumer(self, WorkerOptions(shutdown_timeout=shutdown_timeout), concurrency)


class QueueWorker(Worker):
    """A Huey worker thread bound to one queue; it takes claimed jobs from that queue's producer."""

    def __init__(
        self, huey, stop_flag, default_delay, max_delay, backoff, max_tasks=None, queue=DEFAULT_QUEUE, executor=None
    ):
        super().__init__(huey, stop_flag, default_delay, max_delay, backoff, max_tasks)
        self.queue = queue
        self.executor = executor

    def loop(self, now=None):
        try:
            job = self.executor.take(self.queue)
        except Exception:
            self._logger.exception("taking a job failed")
            self.stop_flag.wait(1)
            return
        if job is None:
            return
        self.task_count += 1
        try:
            self.executor.runner.run_claimed(job)
        except Exception:
            self._logger.exception("unhandled error while running job %s", job.id)
        finally:
            self.executor.finished(self.queue)
        if self.max_tasks and self.task_count >= self.max_tasks:
            raise WorkerRecycle()


class MaintenanceScheduler(Scheduler):
    """Replaces Huey's minute ticker: once a second, run queue maintenance."""

    def __init__(self, huey, stop_flag, interval, periodic, maintenance=None):
        super().__init__(huey, stop_flag, interval, False)
        self.maintenance = maintenance

    def loop(self, now=None):
        started = time.monotonic()
        self.maintenance.tick()
        self.sleep_for_interval(started, self.interval)


class OmniflowConsumer(Consumer):
    worker_class = QueueWorker
    scheduler_class = MaintenanceScheduler

    def __init__(self, huey, options=WorkerOptions(), concurrency=None):
        self.concurrency = dict(QUEUES if concurrency is None else concurrency)
        self._queue_plan = [queue for queue, count in self.concurrency.items() for _ in range(count)]
        self.executor = Executor(huey, self.concurrency, new_worker_id())
        self.maintenance = Maintenance(huey, self.executor, self._register, options.stand_for_leader)
        super().__init__(
            huey,
            workers=len(self._queue_plan),
            periodic=options.stand_for_leader,  # Huey only logs it; the leader enqueues passes
            scheduler_interval=1,
            worker_type="thread",
            check_worker_health=options.check_worker_health,
            health_check_interval=options.health_check_interval,
            flush_locks=options.flush_locks,
            extra_locks=options.extra_locks,
            max_tasks=options.max_tasks,
            shutdown_timeout=options.shutdown_timeout,
            graceful_signal=options.graceful_signal or "INT",
        )
        if options.graceful_signal is None:
            # Both SIGTERM (what a platform sends) and SIGINT finish running
            # jobs or hand them back; a second signal cuts the wait short.
            self._signal_actions[signal.SIGINT] = (False, True)
            self._signal_actions[signal.SIGTERM] = (False, True)
        self._cleaned_up = False
        self.outage_limit_s = outage_limit_s()

    @property
    def worker_id(self):
        return self.executor.worker_id

    def _create_worker(self):
        queue = self._queue_plan.pop(0) if self._queue_plan else DEFAULT_QUEUE
        return self.worker_class(
            huey=self.huey,
            stop_flag=self.stop_flag,
            default_delay=self.default_delay,
            max_delay=self.max_delay,
            backoff=self.backoff,
            max_tasks=self.max_tasks,
            queue=queue,
            executor=self.executor,
        )

    def _create_scheduler(self):
        return self.scheduler_class(
            huey=self.huey,
            stop_flag=self.stop_flag,
            interval=self.scheduler_interval,
            periodic=False,
            maintenance=self.maintenance,
        )

    def loop(self, health_check_ts=None):
        # While the worker runs this thread sends no statements, so no stuck
        # one keeps it from noticing the database stopped answering the others.
        give_up_if_unreachable(self.outage_limit_s)
        return super().loop(health_check_ts)

    def check_worker_health(self):
        # A replacement worker serves the queue of the one that died.
        self._queue_plan = [
            worker.queue for worker, thread in self.worker_threads if not self.environment.is_alive(thread)
        ]
        return super().check_worker_health()

    def _register(self, initial=False):
        sql = self.huey.client.sql
        if not initial:
            self.executor.worker_id = new_worker_id()
        queues = ",".join(f"{queue}:{count}" for queue, count in self.concurrency.items())
        sql.register_worker(
            self.executor.worker_id, socket.gethostname(), os.getpid(), queues, self.huey.declared_work(), utcnow()
        )

    def start(self):
        # Huey sets its signal handlers after starting the worker threads; a
        # SIGTERM in between (a deploy right at start-up) would kill the
        # process with jobs already claimed. Handle signals from the start.
        if threading.current_thread() is threading.main_thread():
            self._set_signal_handlers()
        self._register(initial=True)
        self.huey.runner = self.executor.runner
        self.executor.start()
        super().start()
        logger.info(
            "worker started",
            extra={"worker_id": self.worker_id, "queue": ",".join(f"{q}={n}" for q, n in self.concurrency.items())},
        )
        registered, left_out = self.huey.periodic_registrations()
        logger.info("periodic passes registered", extra={"task": ",".join(registered) or "-"})
        for name, reason in left_out.items():
            logger.info("periodic pass left out", extra={"task": name, "reason": reason})

    def stop(self, graceful=False):
        self.stop_flag.set()
        self.executor.stop_claiming()
        super().stop(graceful=graceful)
        self._clean_up()

    def _clean_up(self):
        if self._cleaned_up:
            return
        self._cleaned_up = True
        try:
            # This thread's connection has sat idle since start-up; handed
            # back, the pool checks it before the bookkeeping below (a server
            # restart meanwhile would have cut it).
            release_connection()
            self.executor.shutdown()
            self.maintenance.resign()
            self.huey.client.sql.deregister_worker(self.executor.worker_id)
        except Exception:
            logger.exception("worker shutdown could not finish its bookkeeping; rescue will finish it")
        self.huey.runner = JobRunner(self.huey, SyncRecorder())
        logger.info("worker stopped", extra={"worker_id": self.worker_id})
