"""The bulk_actions pass of a test worker (`--slow-bulk`): every second instead of every 15 s, so a test
goes through its runs in seconds, and ITEM_DELAY_S before each item, so a run of 50 items lasts long
enough for a test to SIGKILL the worker in the middle of it. A fulfillment claim's lease is LEASE_S
instead of 2 minutes (the fake panel answers in milliseconds), so an extend the killed worker was
pushing is taken over seconds after the rescue instead of minutes."""

import time

from fulfillment import bulk, rules
from jobs.passes import bulk_actions

INTERVAL_S = 1
ITEM_DELAY_S = 0.02
LEASE_S = 3


def install():
    bulk_actions.INTERVAL_S = INTERVAL_S
    rules.CLAIM_LEASE_S = LEASE_S
    apply_item = bulk.apply_item

    def slow_apply_item(item_id, now=None):
        time.sleep(ITEM_DELAY_S)
        return apply_item(item_id, now)

    bulk.apply_item = slow_apply_item
