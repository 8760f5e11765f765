"""`anomaly_evaluation` (SPEC 15.7, 5.1): every 15 minutes, the anomaly rules of ops/anomalies.py.

Each enabled rule is measured over its window and compared with its stored
threshold; a breach queues one `anomaly` operator notice per rule and
window (a second run in the same window finds the notice there and queues
nothing), which the bot's notifier delivers. Then samples older than a week
are pruned, a bounded batch per run. The timeout is the interval.

Registered only when APP_DATA_ENCRYPTION_KEY is set (SPEC 5.2 puts anomaly
evaluation with the passes that need the key); without it the worker's
start log names the pass and the reason (`register()`).
"""

import logging

from jobs import every, huey
from ops import anomalies

logger = logging.getLogger("omniflow.passes.anomalies")

NAME = "anomaly_evaluation"
INTERVAL_S = 15 * 60


def run(now=None):
    """One evaluation; returns the verdicts (ops/anomalies.py)."""
    verdicts = anomalies.evaluate(now)
    pruned = anomalies.prune_samples(now)
    breached = [verdict.rule for verdict in verdicts if verdict.breached]
    logger.info(
        "anomaly evaluation finished",
        extra={
            "task": NAME,
            "count": len(verdicts),
            "state": f"breached={','.join(breached) or 'none'} queued={sum(v.queued for v in verdicts)}"
            f" pruned={pruned}",
        },
    )
    return verdicts


def anomaly_evaluation():
    run()


def register(settings):
    """Declare the pass when the worker has the data key (SPEC 5.2); otherwise answer why not."""
    if not settings.data_encryption_key:
        return "APP_DATA_ENCRYPTION_KEY is not set"
    huey.periodic_task(every(seconds=INTERVAL_S), name=NAME)(anomaly_evaluation)
    return None
