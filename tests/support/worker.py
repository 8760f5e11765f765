"""A real worker process for tests: `python -m tests.support.worker [--periodic] [--app-kinds] [--shutdown-timeout S]`.

It goes through omniflow.py's own bootstrap and worker loop (DATABASE_URL
from the environment); the only difference from production is that the test
job kinds (and, with --periodic, the 15-second test pass) are declared, and
the application's own kinds and passes only with --app-kinds.
"""

import argparse

import omniflow
from jobs.engine import metrics
from jobs.engine.kinds import QUEUES
from tests.support import kinds  # noqa: F401

parser = argparse.ArgumentParser()
parser.add_argument("--periodic", action="store_true")
parser.add_argument("--app-kinds", action="store_true", help="also declare the application's kinds and passes")
parser.add_argument("--shutdown-timeout", type=float, default=omniflow.SHUTDOWN_TIMEOUT_S)
args = parser.parse_args()
if args.periodic:
    from tests.support import periodic  # noqa: F401

settings = omniflow.bootstrap(pool_size=sum(QUEUES.values()) + omniflow.WORKER_POOL_EXTRA)
omniflow.require_current_schema()
if args.app_kinds:
    omniflow.log_passes(*omniflow.load_job_kinds(settings))
metrics.serve(settings.worker_metrics_port)
omniflow.run_worker(shutdown_timeout=args.shutdown_timeout)
