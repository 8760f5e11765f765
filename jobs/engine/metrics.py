"""Job metrics (SPEC 11): how many jobs ended how, and how long they ran.

`outcome` is the state the run left the job in: completed, retryable,
discarded, cancelled or snoozed. Only the worker process that ran a job
knows these, so each worker serves its own on APP_WORKER_METRICS_PORT
(web/metrics.py says why not the client's multiprocess mode).
"""

from prometheus_client import Counter, Histogram

JOBS_TOTAL = Counter(
    "omniflow_jobs_total",
    "Job runs by kind and outcome.",
    ["kind", "outcome"],
)
JOB_DURATION = Histogram(
    "omniflow_job_duration_seconds",
    "Wall time of a job run by kind.",
    ["kind"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
)


def observe_run(kind, outcome, seconds):
    JOBS_TOTAL.labels(kind=kind, outcome=outcome).inc()
    JOB_DURATION.labels(kind=kind).observe(seconds)


def serve(port):
    """This process's metrics over HTTP on `port` (0: none)."""
    if port:
        from prometheus_client import start_http_server

        start_http_server(port)
