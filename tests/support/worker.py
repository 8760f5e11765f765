"""A real worker process for tests.

    python -m tests.support.worker [--periodic] [--shutdown-timeout S]

It starts exactly as `huey_consumer omniflow.huey` and `python omniflow.py
worker` do (`huey.create_consumer`: settings from the environment, the
database, the schema check, the job kinds); the only differences from
production are the test job kinds and, with --periodic, a 15-second test
pass.
"""

import argparse

import omniflow
from tests.support import kinds  # noqa: F401

parser = argparse.ArgumentParser()
parser.add_argument("--periodic", action="store_true")
parser.add_argument("--shutdown-timeout", type=float, default=omniflow.SHUTDOWN_TIMEOUT_S)
args = parser.parse_args()
if args.periodic:
    from tests.support import periodic  # noqa: F401

omniflow.huey.create_consumer(shutdown_timeout=args.shutdown_timeout).run()
