"""GET /metrics (SPEC 11), in Prometheus' text format, over the metrics bearer token.

The token is APP_METRICS_TOKEN, read-only and nothing else: the operator token,
which also takes payments and changes jobs, does not open it, so a scraper's
configuration never holds a credential worth more than the numbers.

Several worker processes and web replicas run at once, so each series comes
from the one place where it is whole:

- what the database knows — jobs by queue and state
  (`omniflow_queue_jobs`), pending outbox events
  (`omniflow_outbox_pending_events`) — is read from it at scrape time by
  any web replica (each answers the same totals; scrape one, or take max);
- what only a worker process knows — `omniflow_jobs_total{kind,outcome}`,
  `omniflow_job_duration_seconds{kind}` — is served by each worker process
  on its own port (`APP_WORKER_METRICS_PORT`, on 127.0.0.1 unless
  `APP_WORKER_METRICS_ADDRESS` says otherwise), and Prometheus sums over
  the processes. prometheus_client's multiprocess mode would need one
  shared directory for all processes, which replicas on different
  machines do not have.
"""

import bottle
from peewee import fn
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily

from models.base import db
from models.jobs import Job
from models.ops import OutboxEvent
from web import problems
from web.answers import bearer_refusal

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class DatabaseCollector:
    """Gauges read from the database at each scrape."""

    def collect(self):
        depth = GaugeMetricFamily("omniflow_queue_jobs", "Job rows by queue and state.", labels=["queue", "state"])
        try:
            rows = Job.select(Job.queue, Job.state, fn.COUNT(Job.id).alias("n")).group_by(Job.queue, Job.state)
            for row in rows:
                depth.add_metric([row.queue, row.state], row.n)
            pending = OutboxEvent.select().where(OutboxEvent.published_at.is_null()).count()
        finally:
            if not db.is_closed() and not db.in_transaction():
                db.close()
        yield depth
        yield GaugeMetricFamily("omniflow_outbox_pending_events", "Outbox events not yet published.", value=pending)


def build(metrics_token):
    app = bottle.Bottle()
    problems.install(app)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(DatabaseCollector())

    @app.get("/metrics")
    def metrics():
        refusal = bearer_refusal(metrics_token, "metrics")
        if refusal is not None:
            return refusal
        try:
            body = generate_latest(registry)
        except Exception:
            return problems.problem(503, problems.METRICS_UNAVAILABLE, "the database could not be read")
        bottle.response.content_type = CONTENT_TYPE
        return body

    return app
