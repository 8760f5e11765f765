"""The durable queue and the job kinds.

`huey` is the application's queue: job kinds are declared on it with
`@huey.job(...)`, periodic passes with `@huey.periodic_task(every(...))` or
`@huey.periodic_task(crontab(...))` (Huey's own crontab, re-exported here).
Anything that needs work done later inserts a job with `insert(...)`,
inside its own `with db.atomic():` when the job belongs to a state change.
"""

from huey import crontab

from jobs.engine.client import InsertResult, JobInsert, JobView
from jobs.engine.executor import JobCancel, JobSnooze, current_job, should_stop
from jobs.engine.huey_app import INTERVAL, OmniflowHuey
from jobs.engine.kinds import UNIQUE_THROUGH_COMPLETED, UNIQUE_WHILE_ACTIVE
from jobs.engine.schedules import every
from jobs.engine.states import JobMutationRejected, JobNotFound

huey = OmniflowHuey("omniflow")
client = huey.client
insert = client.insert
insert_many = client.insert_many

__all__ = [
    "INTERVAL",
    "InsertResult",
    "JobCancel",
    "JobInsert",
    "JobMutationRejected",
    "JobNotFound",
    "JobSnooze",
    "JobView",
    "OmniflowHuey",
    "UNIQUE_THROUGH_COMPLETED",
    "UNIQUE_WHILE_ACTIVE",
    "client",
    "crontab",
    "current_job",
    "every",
    "huey",
    "insert",
    "insert_many",
    "should_stop",
]
