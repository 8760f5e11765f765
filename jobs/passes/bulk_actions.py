"""`bulk_actions` (SPEC 15.6, 5.1): every 15 seconds (timeout 5 minutes), apply up to 50 pending items
of confirmed bulk actions, the oldest action's first, in position order (fulfillment/bulk.py).

Each item is its own transaction, which marks it and queues its fulfillment
operation (key `bulk:<id>:<position>`), so a run killed or stopped anywhere
leaves every item applied once or still pending for the next run; a run
past its timeout stops between two items. Registered only when
APP_DATA_ENCRYPTION_KEY is set (SPEC 5.2): `register()`, called by the
worker, answers why not otherwise, and confirmed actions wait meanwhile.
"""

import logging

from fulfillment import bulk
from jobs import every, huey, should_stop

logger = logging.getLogger("omniflow.passes.bulk_actions")

NAME = "bulk_actions"
INTERVAL_S = 15
TIMEOUT_S = 5 * 60


def bulk_actions():
    counts = bulk.apply_batch(bulk.BATCH, should_stop)
    logger.info(
        "bulk actions applied",
        extra={
            "task": NAME,
            "applied": counts["applied"],
            "skipped": counts["skipped"],
            "finished": counts["finished"],
        },
    )
    return counts


def register(settings):
    """Declare the pass when the worker has the data key; otherwise answer why not."""
    if not settings.data_encryption_key:
        return "APP_DATA_ENCRYPTION_KEY is not set"
    huey.periodic_task(every(seconds=INTERVAL_S), name=NAME, timeout=TIMEOUT_S)(bulk_actions)
    return None
