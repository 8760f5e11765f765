"""`payment_reconcile` (SPEC 5.1, 5.3, 13.7): every minute, a `payment_poll` job for up to 100
payment intents whose provider has not been asked for GRACE.

A dispatcher, because the work is one HTTP call per intent: the pass only
finds the intents — `pending` at a hosted provider (YooKassa, CryptoBot),
not polled (or, never polled, not created) in the last two minutes, the
longest-waiting first, through `payment_intents_reconcile` — and inserts
one job per intent in one transaction, one multi-row insert. The two
minutes are the grace: a webhook usually arrives before them, and a poll
just made is not made again at once. Ordering by the last poll rather than
by creation means intents abandoned at the provider, which stay pending
until their order expires (commerce_maintenance), take their turn instead
of keeping a newer intent, whose webhook was lost, from its poll.

`payment_poll(intentId)` asks the provider (`commerce.payments.poll_intent`:
the call is made outside any transaction, the answer applied in one):
paid → settled as `provider_poll` (a lost webhook costs at most a couple
of minutes), canceled or expired → the intent and its pending order
follow, still pending → only `last_polled_at` moves. A provider that does
not answer leaves the intent pending for the next pass and logs its
classified code. Jobs are unique by their arguments while queued, running
or retrying, so a pass that finds an intent whose poll has not run yet
counts it as skipped-as-duplicate.
"""

import datetime
import logging

from peewee import fn

import jobs
from commerce import payments
from commerce.providers import HOSTED
from jobs import UNIQUE_WHILE_ACTIVE, JobInsert, every, huey
from models.base import utcnow
from models.payments import PaymentIntent

logger = logging.getLogger("omniflow.passes.payments")

NAME = "payment_reconcile"
POLL_KIND = "payment_poll"
INTERVAL_S = 60
RECONCILE_BATCH = 100
GRACE = datetime.timedelta(minutes=2)
POLL_ATTEMPTS = 3
# What a poll answers when it applied the provider's word; anything else says why it could not ask.
APPLIED = (
    payments.SETTLED,
    payments.REPLAYED,
    payments.PENDING,
    payments.CANCELED,
    payments.AMOUNT_MISMATCH,
    payments.UNKNOWN_ORDER,
    payments.UNAPPLIED,
)

WAITING_SINCE = fn.COALESCE(PaymentIntent.last_polled_at, PaymentIntent.created_at)  # the index's expression


def due_intents(now, limit=None):
    return (
        PaymentIntent.select(PaymentIntent.id)
        .where(PaymentIntent.status == "pending", WAITING_SINCE < now - GRACE, PaymentIntent.provider.in_(HOSTED))
        .order_by(WAITING_SINCE, PaymentIntent.id)
        .limit(limit or RECONCILE_BATCH)
    )


def dispatch(now=None):
    """One `payment_poll` job per due intent, in one statement; returns (enqueued, skipped_as_duplicate)."""
    now = now or utcnow()
    due = [intent.id for intent in due_intents(now)]
    results = jobs.insert_many([JobInsert(POLL_KIND, {"intentId": intent_id}) for intent_id in due])
    enqueued = sum(not result.skipped_as_duplicate for result in results)
    skipped = len(results) - enqueued
    logger.info(
        "payment reconcile dispatched", extra={"task": NAME, "enqueued": enqueued, "skipped_as_duplicate": skipped}
    )
    return enqueued, skipped


@huey.periodic_task(every(seconds=INTERVAL_S), name=NAME)
def payment_reconcile():
    dispatch()


@huey.job(POLL_KIND, max_attempts=POLL_ATTEMPTS, unique_states=UNIQUE_WHILE_ACTIVE)
def payment_poll(intentId):
    """Poll one intent's payment and apply the answer; an intent no longer pending is left alone."""
    intent = PaymentIntent.get_or_none(PaymentIntent.id == intentId)
    if intent is None or intent.status != "pending":
        return None
    applied = payments.poll_intent(intent)
    if applied.outcome not in APPLIED:
        logger.warning(
            "payment poll could not ask the provider; the next pass asks again",
            extra={"reason": f"intent {intent.id} at {intent.provider}: {applied.outcome}"},
        )
    return applied.outcome
