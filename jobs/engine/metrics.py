"""Job metrics (SPEC 11): how many jobs ended how, and how long they ran.

`outcome` is the state the run left the job in: completed, retryable,
discarded, cancelled or snoozed. Only the worker process that ran a job
knows these, so each worker serves its own on APP_WORKER_METRICS_PORT
(web/metrics.py says why not the client's multiprocess mode), on 127.0.0.1
unless APP_WORKER_METRICS_ADDRESS says otherwise, and only to the metrics
bearer token when APP_METRICS_TOKEN is set (settings require it for any
address but loopback).
"""

import hmac
import threading
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import Counter, Histogram, make_wsgi_app

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


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format, *args):
        """A scrape every few seconds is not worth a log line."""


def _bearer_only(app, token):
    def guarded(environ, start_response):
        scheme, _, credentials = environ.get("HTTP_AUTHORIZATION", "").partition(" ")
        given = credentials.lstrip(" ") if scheme.lower() == "bearer" else ""
        if hmac.compare_digest(given.encode(), token.encode()):
            return app(environ, start_response)
        start_response("401 Unauthorized", [("WWW-Authenticate", "Bearer"), ("Content-Type", "text/plain")])
        return [b"a valid metrics bearer token is required\n"]

    return guarded


def serve(port, address, token):
    """This process's metrics over HTTP on `address`:`port` (port 0: none), only to
    `Authorization: Bearer <token>` when a token is given. Returns the server, or None."""
    if not port:
        return None
    app = make_wsgi_app()
    server = make_server(address, port, _bearer_only(app, token) if token else app, _Server, _QuietHandler)
    threading.Thread(target=server.serve_forever, name="MetricsServer", daemon=True).start()
    return server
