"""Inserting jobs and changing them by id: what web, bot, passes and the CLI call.

`insert` and `insert_many` run on the caller's connection: inside a
`with db.atomic():` block the job commits or rolls back with the caller's
own writes (SPEC 1.2). A duplicate of a unique job is not inserted; the
caller gets the existing job's id and `skipped_as_duplicate=True` (SPEC 1.4).
"""

import datetime
import json
from dataclasses import dataclass

from peewee import IntegrityError

from jobs.engine import notifier
from jobs.engine.kinds import canonical_args
from jobs.engine.sql import for_database
from jobs.engine.states import (
    AVAILABLE,
    DEAD_LETTER_STATES,
    SCHEDULED,
    JobMutationRejected,
    JobNotFound,
    can_cancel,
    can_retry,
)
from models.base import db, utcnow
from models.jobs import Job
from security.redactor import redact

INSERT_ROUNDS = 5
MAX_ERRORS_KEPT = 20


@dataclass(frozen=True)
class InsertResult:
    job_id: int
    skipped_as_duplicate: bool


@dataclass(frozen=True)
class JobInsert:
    kind: str
    args: dict
    scheduled_at: datetime.datetime = None
    priority: int = None


LIST_COLUMNS = (
    Job.id, Job.kind, Job.queue, Job.state, Job.args, Job.attempt, Job.max_attempts, Job.priority,
    Job.created_at, Job.scheduled_at, Job.attempted_at, Job.attempted_by, Job.finalized_at, Job.errors,
)  # fmt: skip


@dataclass(frozen=True)
class JobView:
    """A job row as listings show it: errors counted, the last one redacted."""

    id: int
    kind: str
    queue: str
    state: str
    args: dict
    attempt: int
    max_attempts: int
    priority: int
    created_at: datetime.datetime
    scheduled_at: datetime.datetime
    attempted_at: datetime.datetime
    attempted_by: str
    finalized_at: datetime.datetime
    error_count: int
    last_error: str

    @classmethod
    def from_values(cls, values):
        """From a row of LIST_COLUMNS (listings skip the ORM's objects: they show many rows)."""
        (job_id, kind, queue, state, args, attempt, max_attempts, priority, created_at, scheduled_at,
         attempted_at, attempted_by, finalized_at, errors) = values  # fmt: skip
        errors = json.loads(errors)
        return cls(
            id=job_id,
            kind=kind,
            queue=queue,
            state=state,
            args=json.loads(args),
            attempt=attempt,
            max_attempts=max_attempts,
            priority=priority,
            created_at=created_at,
            scheduled_at=scheduled_at,
            attempted_at=attempted_at,
            attempted_by=attempted_by,
            finalized_at=finalized_at,
            error_count=len(errors),
            last_error=redact(errors[-1]["error"]) if errors else None,
        )

    @classmethod
    def from_row(cls, job):
        errors = job.error_list
        return cls(
            id=job.id,
            kind=job.kind,
            queue=job.queue,
            state=job.state,
            args=job.args_dict,
            attempt=job.attempt,
            max_attempts=job.max_attempts,
            priority=job.priority,
            created_at=job.created_at,
            scheduled_at=job.scheduled_at,
            attempted_at=job.attempted_at,
            attempted_by=job.attempted_by,
            finalized_at=job.finalized_at,
            error_count=len(errors),
            last_error=redact(errors[-1]["error"]) if errors else None,
        )


def error_entry(attempt, message, at=None):
    """One element of a job's `errors` list; the text is always redacted."""
    return {"at": (at or utcnow()).isoformat(), "attempt": attempt, "error": redact(message)}


def append_error(errors, entry):
    return (list(errors) + [entry])[-MAX_ERRORS_KEPT:]


class JobClient:
    def __init__(self, kinds):
        self.kinds = kinds
        self._sql = None

    @property
    def sql(self):
        if self._sql is None or self._sql.db is not db.obj:
            self._sql = for_database(db.obj)
        return self._sql

    # -- insert -------------------------------------------------------------

    def insert(self, kind, args, scheduled_at=None, priority=None):
        return self.insert_many([JobInsert(kind, args, scheduled_at, priority)])[0]

    def insert_many(self, inserts):
        """Insert many jobs with one multi-row statement; one InsertResult each, in order."""
        if not inserts:
            return []
        now = utcnow()
        rows = [self._row(item, now) for item in inserts]
        results = [None] * len(rows)
        first_with_key = {}
        to_insert = []
        for index, row in enumerate(rows):
            key = row[7]
            if key is not None and key in first_with_key:
                continue  # resolved after the first row with this key
            if key is not None:
                first_with_key[key] = index
            to_insert.append(index)

        sql = self.sql
        with db.atomic():
            for _ in range(INSERT_ROUNDS):
                inserted = sql.insert_rows([rows[i] for i in to_insert])
                unkeyed_ids = iter([job_id for job_id, key in inserted if key is None])
                inserted_by_key = {key: job_id for job_id, key in inserted if key is not None}
                missing = []
                for index in to_insert:
                    key = rows[index][7]
                    if key is None:
                        results[index] = InsertResult(next(unkeyed_ids), False)
                    elif key in inserted_by_key:
                        results[index] = InsertResult(inserted_by_key[key], False)
                    else:
                        missing.append(index)
                if missing:
                    existing = sql.ids_by_unique_key([rows[i][7] for i in missing])
                    for index in missing:
                        job_id = existing.get(rows[index][7])
                        if job_id is not None:
                            results[index] = InsertResult(job_id, True)
                # A conflicting row may have finished (and released its key)
                # between the insert and the lookup: insert those again.
                to_insert = [i for i in missing if results[i] is None]
                if not to_insert:
                    break
            else:
                raise RuntimeError("could not insert unique jobs: their keys kept changing hands")

            for index, row in enumerate(rows):
                if results[index] is None:
                    first = results[first_with_key[row[7]]]
                    results[index] = InsertResult(first.job_id, True)

            due_queues = {
                row[1] for row, result in zip(rows, results) if row[2] == AVAILABLE and not result.skipped_as_duplicate
            }
            if due_queues:
                sql.notify(due_queues)
                db.after_commit(lambda: [notifier.wake(queue) for queue in due_queues])
        return results

    def insert_new(self, inserts):
        """Insert jobs that no job can be a duplicate of yet (their unique keys name rows inserted
        in the caller's transaction, such as a fulfillment operation's new id), when the caller
        needs no job id back. On PostgreSQL inside a transaction the INSERT and the workers'
        notification ride with its next round trip; a key held after all is skipped by ON
        CONFLICT, as insert_many skips it."""
        if not inserts:
            return
        now = utcnow()
        rows = [self._row(item, now) for item in inserts]
        with db.atomic():
            self.sql.insert_rows_unread(rows)
            due_queues = {row[1] for row in rows if row[2] == AVAILABLE}
            if due_queues:
                self.sql.notify(due_queues)
                db.after_commit(lambda: [notifier.wake(queue) for queue in due_queues])

    def _row(self, item, now):
        spec = self.kinds.get(item.kind)
        if not isinstance(item.args, dict):
            raise TypeError(f"job args for {item.kind} must be a JSON object")
        scheduled_at = item.scheduled_at or now
        state = SCHEDULED if scheduled_at > now else AVAILABLE
        priority = spec.priority if item.priority is None else item.priority
        return (
            spec.kind,
            spec.queue,
            state,
            canonical_args(item.args),
            None,
            spec.max_attempts,
            priority,
            spec.unique_key(item.args),
            spec.unique_bits,
            now,
            scheduled_at,
        )

    # -- operator changes -------------------------------------------------------

    def cancel(self, job_id, reason="cancelled by operator"):
        """Cancel any job that has not finished (River's rule); final jobs are rejected."""
        sql = self.sql
        with db.atomic():
            row = sql.lock_job(job_id)
            if row is None:
                raise JobNotFound(job_id)
            state, attempt, errors = row[2], row[4], json.loads(row[6])
            if not can_cancel(state):
                raise JobMutationRejected(job_id, state, "cancel")
            errors = append_error(errors, error_entry(attempt, reason))
            if sql.cancel_job(job_id, utcnow(), errors) != 1:
                raise JobMutationRejected(job_id, self.get(job_id).state, "cancel")
        return self.get(job_id)

    def retry(self, job_id):
        """Make a job available now; any state but running (River's rule)."""
        sql = self.sql
        with db.atomic():
            row = sql.lock_job(job_id)
            if row is None:
                raise JobNotFound(job_id)
            kind, state, args, unique_key = row[1], row[2], json.loads(row[3]), row[7]
            if not can_retry(state):
                raise JobMutationRejected(job_id, state, "retry")
            if unique_key is None and kind in self.kinds:
                unique_key = self.kinds.get(kind).unique_key(args)
            try:
                with db.atomic():
                    changed = sql.retry_job(job_id, utcnow(), unique_key)
            except IntegrityError:
                raise JobMutationRejected(job_id, state, "retry (an identical job is already queued)") from None
            if changed != 1:
                raise JobMutationRejected(job_id, self.get(job_id).state, "retry")
            queue = Job.get_by_id(job_id).queue
            sql.notify([queue])
            db.after_commit(lambda: notifier.wake(queue))
        return self.get(job_id)

    # -- reading ------------------------------------------------------------------

    def get(self, job_id):
        job = Job.get_or_none(Job.id == job_id)
        if job is None:
            raise JobNotFound(job_id)
        return JobView.from_row(job)

    def list(self, states=None, kind=None, limit=50):
        query = Job.select(*LIST_COLUMNS).order_by(Job.id.desc()).limit(limit)
        if states:
            query = query.where(Job.state.in_(list(states)))
        if kind:
            query = query.where(Job.kind == kind)
        return [JobView.from_values(values) for values in query.tuples()]

    def dead_letter(self, limit=50):
        """Jobs that ended without completing: discarded and cancelled."""
        return self.list(DEAD_LETTER_STATES, limit=limit)

    def counts(self):
        """{(queue, state): count} over the whole table."""
        from peewee import fn

        query = Job.select(Job.queue, Job.state, fn.COUNT(Job.id).alias("n")).group_by(Job.queue, Job.state)
        return {(row.queue, row.state): row.n for row in query}
