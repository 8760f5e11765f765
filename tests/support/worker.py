"""A real worker process for tests.

    python -m tests.support.worker [--periodic] [--crontab] [--newer-kinds] [--app-kinds] [--fast-takeover]
                                   [--fast-rescue] [--slow-bulk] [--fast-listen-check] [--shutdown-timeout S]

It starts exactly as `huey_consumer omniflow.huey` and `python omniflow.py
worker` do (`huey.create_consumer`: settings from the environment, the
database, the schema check); the differences from production are the job
kinds: the test kinds (so a test counts its own jobs only), the application's
own kinds and passes only with --app-kinds, the test passes asked for
(--periodic: a 15-second pass; --crontab: a pass on every minute; --newer-kinds:
a kind of "a newer release", tests/support/newer_kinds.py) and, with
--fast-takeover, a leader lease of 3 s renewed every second, so a killed
leader is replaced within seconds instead of 20, and, with --fast-rescue, a
heartbeat every second, a worker dead after 5 s of silence and a rescue pass
every second, so the job of a killed worker runs again within seconds instead
of 40; with --slow-bulk, the bulk_actions pass every second instead of 15, each of
its items a little slower and a fulfillment lease of seconds
(tests/support/slow_bulk.py), so a test can kill a worker in the middle of a
run and see the rest done within seconds; with --fast-listen-check, the LISTEN
connection checks its hearing every 3 s instead of after a minute of silence.
"""

import argparse

import omniflow
from jobs.engine import maintenance, notifier
from tests.support import kinds  # noqa: F401

FAST_LEADER_TTL_S = 3
FAST_ELECT_INTERVAL_S = 1
FAST_HEARTBEAT_INTERVAL_S = 1
FAST_WORKER_STALE_AFTER_S = 5
FAST_RESCUE_INTERVAL_S = 1
FAST_DEAF_AFTER_S = 2
FAST_PROBE_IDLE_S = 1

parser = argparse.ArgumentParser()
parser.add_argument("--periodic", action="store_true")
parser.add_argument("--crontab", action="store_true")
parser.add_argument("--newer-kinds", action="store_true")
parser.add_argument("--app-kinds", action="store_true", help="also declare the application's kinds and passes")
parser.add_argument("--fast-takeover", action="store_true")
parser.add_argument("--fast-rescue", action="store_true")
parser.add_argument("--slow-bulk", action="store_true")
parser.add_argument("--fast-listen-check", action="store_true")
parser.add_argument("--shutdown-timeout", type=float, default=omniflow.SHUTDOWN_TIMEOUT_S)
args = parser.parse_args()
if args.periodic:
    from tests.support import periodic  # noqa: F401
if args.crontab:
    from tests.support import minutely  # noqa: F401
if args.newer_kinds:
    from tests.support import newer_kinds  # noqa: F401
if not args.app_kinds:
    omniflow.JOB_KIND_MODULES = ()
    omniflow.CONDITIONAL_PASSES = ()
if args.fast_takeover:
    maintenance.LEADER_TTL_S = FAST_LEADER_TTL_S
    maintenance.ELECT_INTERVAL_S = FAST_ELECT_INTERVAL_S
if args.fast_rescue:
    maintenance.HEARTBEAT_INTERVAL_S = FAST_HEARTBEAT_INTERVAL_S
    maintenance.WORKER_STALE_AFTER_S = FAST_WORKER_STALE_AFTER_S
    maintenance.RESCUE_INTERVAL_S = FAST_RESCUE_INTERVAL_S
if args.slow_bulk:
    from tests.support import slow_bulk

    slow_bulk.install()
if args.fast_listen_check:
    notifier.DEAF_AFTER_S = FAST_DEAF_AFTER_S
    notifier.PROBE_IDLE_S = FAST_PROBE_IDLE_S

omniflow.huey.create_consumer(shutdown_timeout=args.shutdown_timeout).run()
