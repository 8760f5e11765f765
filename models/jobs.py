"""Models of the durable queue's tables (created by migrations/0001_job_queue.py).

The engine's hot path (claim, complete, rescue, elect) is hand-written SQL in
jobs/engine/sql.py; these models serve listings, the CLI and tests, and a
test keeps them and the migrations in agreement.
"""

import json

from peewee import (
    BigAutoField,
    BigIntegerField,
    BlobField,
    CompositeKey,
    DateTimeField,
    IntegerField,
    TextField,
)

from models.base import BaseModel


class Job(BaseModel):
    id = BigAutoField()
    kind = TextField()
    queue = TextField()
    state = TextField()
    args = TextField(default="{}")
    payload = BlobField(null=True)
    attempt = IntegerField(default=0)
    max_attempts = IntegerField()
    priority = IntegerField(default=0)
    errors = TextField(default="[]")
    unique_key = TextField(null=True)
    unique_states = IntegerField(default=0)
    created_at = DateTimeField()
    scheduled_at = DateTimeField()
    attempted_at = DateTimeField(null=True)
    attempted_by = TextField(null=True)
    finalized_at = DateTimeField(null=True)

    class Meta:
        table_name = "jobs"

    @property
    def args_dict(self):
        return json.loads(self.args)

    @property
    def error_list(self):
        return json.loads(self.errors)


class JobWorker(BaseModel):
    id = TextField(primary_key=True)
    hostname = TextField()
    pid = IntegerField()
    queues = TextField()
    kinds = TextField(default="[]")  # JSON: the job kinds this worker runs (migration 0029)
    passes = TextField(default="[]")  # JSON: the periodic passes it registered
    started_at = DateTimeField()
    heartbeat_at = DateTimeField()

    class Meta:
        table_name = "job_workers"


class JobLeader(BaseModel):
    name = TextField(primary_key=True)
    leader_id = TextField()
    elected_at = DateTimeField()
    expires_at = DateTimeField()

    class Meta:
        table_name = "job_leader"


class JobPeriodic(BaseModel):
    name = TextField(primary_key=True)
    last_run_at = DateTimeField()

    class Meta:
        table_name = "job_periodic"


class HueyKV(BaseModel):
    name = TextField()
    key = TextField()
    value = BlobField()
    expires_at = DateTimeField(null=True)

    class Meta:
        table_name = "huey_kv"
        primary_key = CompositeKey("name", "key")


class HueyCounter(BaseModel):
    name = TextField()
    key = TextField()
    value = BigIntegerField()

    class Meta:
        table_name = "huey_counters"
        primary_key = CompositeKey("name", "key")


QUEUE_MODELS = [Job, JobWorker, JobLeader, JobPeriodic, HueyKV, HueyCounter]
