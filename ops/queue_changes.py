"""Retry and cancel of queue rows by id (SPEC 4.1), each with its audit event (SPEC 4.5).

The admin API (actor `token`) and the CLI (actor `cli`) call these inside
their own `with db.atomic():`, so the change and its audit event commit
together; a refused change (JobNotFound, JobMutationRejected) writes neither.
"""

from jobs import client
from ops.records import record_audit

AUDIT_CATEGORY = "system"
RETRIED = "job.retried"
CANCELLED = "job.cancelled"
SUBJECT = "job"


def retry_job(job_id, actor, reason=None):
    job = client.retry(job_id)
    record_audit(AUDIT_CATEGORY, RETRIED, actor, reason, SUBJECT, job_id, details={"kind": job.kind})
    return job


def cancel_job(job_id, actor, reason=None):
    job = client.cancel(job_id, reason=f"cancelled by {actor}" + (f": {reason}" if reason else ""))
    record_audit(AUDIT_CATEGORY, CANCELLED, actor, reason, SUBJECT, job_id, details={"kind": job.kind})
    return job
