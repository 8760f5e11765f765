"""`lifecycle_sweep` (SPEC 5.1, 13.11): every 5 minutes, gift cards and personal offers past their expiry expire.

An active gift card whose `expires_at` has passed becomes `expired`: it was
never redeemed, and redemption takes active cards only. An active personal
offer past its expiry becomes `expired`, which no order can use. Each step
updates at most BATCH rows per statement, oldest expiry first, through the
partial indexes on active rows (`gift_cards_expiring`,
`personal_offers_expiring`), and the run checks `should_stop()` between
statements. A card being redeemed or an offer being used at the same moment
is left to whichever commits first: the update touches active rows only.

The pass is the steps of STEPS, in order. Gift and offer expiry need no key
and always run (SPEC 5.2); the blocklist refresh (SPEC 15.8, ops/blocklists.py:
up to 20 sources, conditional GET, then customers blocked and unblocked)
runs after them only with APP_DATA_ENCRYPTION_KEY, since source tokens are
sealed. Without the key it is skipped, and the first run in a process says
so in the log.
"""

import logging

from jobs import every, huey, should_stop
from models.base import utcnow
from models.catalogue import GiftCard, PersonalOffer
from ops import blocklists, sealing

logger = logging.getLogger("omniflow.passes.lifecycle")

NAME = "lifecycle_sweep"
INTERVAL_S = 5 * 60
BATCH = 500


def expire_gift_cards(now):
    """Active gift cards past their expiry → expired, BATCH per statement; returns how many."""
    return _expire(GiftCard, now)


def expire_offers(now):
    """Active personal offers past their expiry → expired, BATCH per statement; returns how many."""
    return _expire(PersonalOffer, now)


def refresh_blocklists(now):
    """Refresh the blocklist sources and apply them; returns how many customers were blocked or unblocked."""
    outcome = blocklists.refresh(now, should_stop=should_stop)
    return outcome["blocked"] + outcome["unblocked"]


STEPS = (("gift_cards", expire_gift_cards), ("personal_offers", expire_offers))
BLOCKLIST_STEP = ("blocklists", refresh_blocklists)
BLOCKLIST_SKIPPED = "blocklist refresh skipped: APP_DATA_ENCRYPTION_KEY is not set (source tokens are sealed)"
_skip_logged = False


def steps():
    """The steps of this run: STEPS, and the blocklist refresh when the key is configured."""
    global _skip_logged
    if sealing.available():
        return STEPS + (BLOCKLIST_STEP,)
    if not _skip_logged:
        _skip_logged = True
        logger.info(BLOCKLIST_SKIPPED, extra={"task": NAME})
    return STEPS


def _expire(model, now):
    expired = 0
    while True:
        due = (
            model.select(model.id)
            .where(model.status == "active", model.expires_at <= now)
            .order_by(model.expires_at, model.id)
            .limit(BATCH)
        )
        changed = model.update(status="expired").where(model.id.in_(due), model.status == "active").execute()
        expired += changed
        if changed < BATCH or should_stop():
            return expired


def sweep(now=None):
    """Run every step; returns {step: rows changed} for the steps that ran."""
    now = now or utcnow()
    expired = {}
    planned = steps()
    for table, step in planned:
        if should_stop():
            break
        expired[table] = step(now)
    stopped = len(expired) < len(planned) or should_stop()
    logger.info(
        f"lifecycle sweep {'stopped before its end' if stopped else 'finished'}",
        extra={
            "task": NAME,
            "count": sum(expired.values()),
            "state": ",".join(f"{table}={count}" for table, count in expired.items()),
        },
    )
    return expired


@huey.periodic_task(every(seconds=INTERVAL_S), name=NAME)
def lifecycle_sweep():
    sweep()
