"""`campaign_expansion` (SPEC 5.1, 15.5): every minute (timeout 5 minutes), started campaigns get their recipients.

First, scheduled campaigns whose start has come begin sending. Then every
started campaign (sending or paused) whose audience is not all written gets
it written, oldest campaign first, BATCH (5 000) customers per transaction
(ops/campaigns.py `expand_batch`: unique per campaign and customer, blocked
and unreachable customers left out and counted, the cursor moved in the same
transaction). The run checks `should_stop()` between batches: one past its
timeout returns, and the next run carries on from the cursor. The bot sends
a campaign's recipients as they are written and marks it `done` only once
its expansion has finished.
"""

import logging

from jobs import every, huey, should_stop
from models.base import utcnow
from ops import campaigns

logger = logging.getLogger("omniflow.passes.campaign_expansion")

NAME = "campaign_expansion"
INTERVAL_S = 60
TIMEOUT_S = 5 * 60


def run(now=None, batch=campaigns.BATCH):
    """Start the due campaigns and expand every started one; returns {"started", "recipients", "campaigns"}
    (campaigns: how many finished their expansion in this run)."""
    now = now or utcnow()
    started = campaigns.start_due(now)
    inserted = finished = 0
    stopped = False
    for campaign in campaigns.to_expand(now):
        done = False
        while not done:
            if should_stop():
                stopped = True
                break
            try:
                added, done = campaigns.expand_batch(campaign, now, batch)
            except campaigns.CampaignRejected:  # another run moved its cursor: that run carries on with it
                break
            inserted += added
        finished += done
        if stopped:
            break
    logger.info(
        f"campaign expansion {'stopped before its end' if stopped else 'finished'}",
        extra={"task": NAME, "count": inserted, "state": f"started={started},expanded={finished}"},
    )
    return {"started": started, "recipients": inserted, "campaigns": finished}


@huey.periodic_task(every(seconds=INTERVAL_S), name=NAME, timeout=TIMEOUT_S)
def campaign_expansion():
    run()
