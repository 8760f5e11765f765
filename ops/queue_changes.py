"""Retry and cancel of queue rows by id (SPEC 4.1), each with its audit event (SPEC 4.5).

The admin API (actor `token`) and the CLI (actor `cli`) call these inside
their own `with db.atomic():`, so the change and its audit event commit
together; a refused change (JobNotFound, JobMutationRejected) writes neither.
"""

from jobs import JobMutationRejected, client
from models.fulfillment import FulfillmentOperation
from models.jobs import Job
from ops.records import record_audit

AUDIT_CATEGORY = "system"
RETRIED = "job.retried"
CANCELLED = "job.cancelled"
SUBJECT = "job"


def retry_job(job_id, actor, reason=None):
    _refuse_a_finished_operations_job(job_id)
    job = client.retry(job_id)
    record_audit(AUDIT_CATEGORY, RETRIED, actor, reason, SUBJECT, job_id, details={"kind": job.kind})
    return job


def cancel_job(job_id, actor, reason=None):
    job = client.cancel(job_id, reason=f"cancelled by {actor}" + (f": {reason}" if reason else ""))
    record_audit(AUDIT_CATEGORY, CANCELLED, actor, reason, SUBJECT, job_id, details={"kind": job.kind})
    return job


def _refuse_a_finished_operations_job(job_id):
    job = Job.get_or_none(Job.id == job_id)
    if job is None or job.kind != "fulfillment":
        return  # client.retry says what it says about a missing or other job
    operation_id = job.args_dict.get("operationId")
    operation = FulfillmentOperation.get_or_none(FulfillmentOperation.id == operation_id)
    if operation is not None and operation.status in ("succeeded", "failed", "cancelled"):
        # Running the job again would do nothing (the worker leaves a finished operation alone) yet take
        # it out of the dead letters: the operation is what to retry (SPEC 4.2), under its own key.
        raise JobMutationRejected(
            job_id,
            job.state,
            "retry",
            f"job {job_id}'s fulfillment operation {operation.id} is {operation.status}; retry the operation"
            f" instead (POST /v1/panel/system/jobs/{operation.id}/retry), which queues it again",
        )
