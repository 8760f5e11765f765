"""A small built-in load for development mode: a newcomer watches jobs move
through their states on a SQLite file before any real job kind exists.

Imported only by `python omniflow.py demo`, never by the production worker.
"""

import logging
import time

from jobs import UNIQUE_THROUGH_COMPLETED, JobInsert, JobSnooze, current_job, every, huey, insert_many

logger = logging.getLogger("omniflow.demo")

DEMO_ORDERS = 20
_snoozed_once = set()


@huey.job(
    "demo_fulfill", queue="critical", max_attempts=12, unique_states=UNIQUE_THROUGH_COMPLETED, backoff=lambda attempt: 2
)
def demo_fulfill(orderId):
    job = current_job()
    time.sleep(0.2)
    if orderId % 5 == 0 and job.attempt == 1:
        raise ConnectionError("panel unavailable (simulated)")
    if orderId % 7 == 0 and orderId not in _snoozed_once:
        _snoozed_once.add(orderId)  # a snooze gives the attempt back, so remember it here
        raise JobSnooze(3)
    logger.info("demo order fulfilled", extra={"job_id": job.id, "attempt": job.attempt})


@huey.job("demo_poison", queue="critical", max_attempts=3, backoff=lambda attempt: 1)
def demo_poison(orderId):
    raise ValueError("this job always fails; after 3 attempts it lands in the dead-letter view")


@huey.periodic_task(every(seconds=15), name="demo_report")
def demo_report():
    counts = huey.client.counts()
    summary = ", ".join(f"{queue}/{state}={n}" for (queue, state), n in sorted(counts.items()))
    logger.info(f"demo report: {summary}")


def enqueue_demo_load():
    """Insert the demo jobs; the second insert of order 1 collapses into the first."""
    inserts = [JobInsert("demo_fulfill", {"orderId": n}) for n in range(1, DEMO_ORDERS + 1)]
    inserts.append(JobInsert("demo_fulfill", {"orderId": 1}))
    inserts.append(JobInsert("demo_poison", {"orderId": 999}))
    return insert_many(inserts)
