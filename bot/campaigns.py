"""Campaign and announcement delivery (SPEC 6, 14.6): every pending recipient gets the text once, paced by
APP_TELEGRAM_DELIVERY_RATE.

Continuous while recipients are queued: a tick takes up to BATCH (200)
pending recipients of announcements, then up to BATCH of campaigns (service
news is not kept waiting behind a large sale), in id order (index
`campaign_recipients_due`), and sends each through a token bucket at the
configured rate (bot/pacing.py), SENDERS calls in flight at once (the
bucket, not the number of threads, sets the pace). When nothing is queued
the loop sleeps IDLE_S (30 s).

Paused within one send: the claim takes a recipient only while its campaign
is `sending`, so once an operator paused it (ops/campaigns.py) no further
message of it leaves, the batch in hand included; the calls already claimed
(at most SENDERS) finish. A campaign is `done` once the campaign_expansion
pass wrote all its recipients and none is left to send.

Never twice, also across a restart: a recipient is claimed (`sending`) in
its own transaction before the Telegram call and marked `sent` in another
once Telegram accepted it. The one bot (its lease) starts by failing the
recipients an earlier process left `sending` (`interrupted`): that process
died during or just after the call, and a campaign message lost is better
than one sent twice. What each answer means:

- accepted: `sent`;
- 429: nothing was sent; the recipient goes back to `pending`, every
  sender waits Telegram's `retry_after` (the bucket's pause) and this one
  sends it again;
- 403 (the customer blocked the bot): the recipient is `unreachable` and the
  customer's `telegram_unreachable_at` set, so later campaigns leave them
  out; never retried;
- 5xx: nothing was sent; back to `pending`, the batch stops (what is left
  of it stays pending) and the next tick waits BACKOFF_S; after
  MAX_ATTEMPTS the recipient is `failed`;
- a timeout or a broken connection: Telegram may have sent it, so `failed`
  (`unknown`) rather than risk a second copy;
- another 4xx: `failed` with the status (the request will never succeed).
"""

import logging
import queue
import threading

from peewee import fn

from bot.pacing import TokenBucket
from commerce import customers
from integrations import telegram
from models.base import db, utcnow
from models.campaigns import Campaign, CampaignRecipient

logger = logging.getLogger("omniflow.bot.campaigns")

BATCH = 200
SENDERS = 4  # calls in flight at once: one at a time, a Telegram round trip of 40 ms or more caps the rate below 25/s
IDLE_S = 30
BACKOFF_S = 5
MAX_ATTEMPTS = 5

INTERRUPTED = "interrupted"
UNKNOWN = "unknown"


class CampaignDelivery:
    def __init__(self, bot, stop, rate, idle_s=IDLE_S, backoff_s=BACKOFF_S):
        self.bot = bot
        self.stop = stop
        self.bucket = TokenBucket(rate)
        self.idle_s = idle_s
        self.backoff_s = backoff_s

    def run(self):
        logger.info("campaign delivery started", extra={"task": "campaign_delivery"})
        try:
            self.recover()
        except Exception:
            logger.exception("campaign delivery could not recover claimed recipients", extra={"task": "campaigns"})
        while not self.stop.is_set():
            wait = self.idle_s
            try:
                sent, wait_hint = self.tick()
                if sent:
                    wait = wait_hint
            except Exception:
                logger.exception("campaign delivery tick failed", extra={"task": "campaign_delivery"})
            finally:
                db.close()
            if wait:
                self.stop.wait(wait)

    def recover(self):
        """Fail the recipients a bot that died left claimed; returns how many."""
        with db.atomic():
            count = (
                CampaignRecipient.update(status="failed", error_code=INTERRUPTED)
                .where(CampaignRecipient.status == "sending")
                .execute()
            )
        if count:
            logger.warning(
                "campaign recipients claimed by a stopped bot marked failed",
                extra={"task": "campaigns", "count": count},
            )
        return count

    def due(self):
        """Up to BATCH pending announcement recipients, then up to BATCH campaign ones, each in id order."""
        return [recipient for kind in ("announcement", "campaign") for recipient in self._due(kind)]

    def _due(self, kind):
        return list(
            CampaignRecipient.select(CampaignRecipient, Campaign.text)
            .join(Campaign, on=(CampaignRecipient.campaign == Campaign.id))
            .where(CampaignRecipient.status == "pending", Campaign.status == "sending", Campaign.kind == kind)
            .order_by(CampaignRecipient.id)
            .limit(BATCH)
            .objects()
        )

    def tick(self):
        """One batch; returns (recipients taken, how long to wait before the next tick)."""
        batch = self.due()
        if batch:
            work = queue.SimpleQueue()
            for recipient in batch:
                work.put(recipient)
            halted = threading.Event()  # a 5xx: the rest of the batch waits for the next tick
            senders = [
                threading.Thread(target=self._send_from, args=(work, halted), name=f"campaign-sender-{index}")
                for index in range(min(SENDERS, len(batch)))
            ]
            for sender in senders:
                sender.start()
            for sender in senders:
                sender.join()
        self.finish_campaigns()
        return len(batch), self.backoff_s if batch and halted.is_set() else 0

    def _send_from(self, work, halted):
        try:
            while not self.stop.is_set() and not halted.is_set():
                try:
                    recipient = work.get_nowait()
                except queue.Empty:
                    return
                if self.deliver(recipient):
                    halted.set()
        except Exception:
            halted.set()
            logger.exception("campaign sender failed", extra={"task": "campaign_delivery"})
        finally:
            db.close()

    def deliver(self, recipient):
        """Send one recipient its text (again after a 429); returns a wait before going on (0: go on)."""
        while not self.stop.is_set():
            if not self.bucket.take(self.stop):
                return 0
            if not self._claim(recipient):
                return 0  # not pending any more (two loops sending one campaign), or its campaign was paused
            try:
                telegram.call("sendMessage", self.bot.send_message, recipient.chat_id, recipient.text)
            except telegram.TelegramFailure as failure:
                if failure.code == telegram.RATE_LIMITED:
                    self._set(recipient, "pending")
                    logger.info(
                        "campaign delivery paused by Telegram",
                        extra={"task": "campaigns", "count": failure.retry_after},
                    )
                    self.bucket.pause(failure.retry_after)
                    continue
                if failure.code == telegram.FORBIDDEN:
                    self._unreachable(recipient)
                    return 0
                if failure.code == telegram.UNAVAILABLE and isinstance(failure.status, int):
                    attempts = recipient.attempts + 1
                    self._set(recipient, "failed" if attempts >= MAX_ATTEMPTS else "pending", str(failure.status))
                    logger.warning("campaign delivery: Telegram unavailable", extra={"task": "campaigns"})
                    return self.backoff_s
                if failure.code == telegram.UNAVAILABLE:
                    self._set(recipient, "failed", UNKNOWN)
                    return 0
                self._set(recipient, "failed", str(failure.status or failure.code))
                return 0
            self._set(recipient, "sent")
            return 0
        return 0

    def _claim(self, recipient):
        sending = Campaign.select(Campaign.id).where(Campaign.id == recipient.campaign_id, Campaign.status == "sending")
        with db.atomic():
            claimed = (
                CampaignRecipient.update(status="sending", attempts=CampaignRecipient.attempts + 1)
                .where(
                    CampaignRecipient.id == recipient.id,
                    CampaignRecipient.status == "pending",
                    CampaignRecipient.campaign.in_(sending),
                )
                .execute()
            )
        return claimed == 1

    def _set(self, recipient, status, error_code=None):
        with db.atomic():
            CampaignRecipient.update(
                status=status, error_code=error_code, sent_at=utcnow() if status == "sent" else None
            ).where(CampaignRecipient.id == recipient.id, CampaignRecipient.status == "sending").execute()

    def _unreachable(self, recipient):
        self._set(recipient, "unreachable", "403")
        customers.mark_unreachable(recipient.customer_id)

    def finish_campaigns(self):
        """Sending campaigns whose recipients are all written (expanded) and none left to send are `done`."""
        open_recipients = CampaignRecipient.select(fn.COUNT(CampaignRecipient.id)).where(
            CampaignRecipient.campaign == Campaign.id, CampaignRecipient.status.in_(("pending", "sending"))
        )
        with db.atomic():
            Campaign.update(status="done", finished_at=utcnow()).where(
                Campaign.status == "sending", Campaign.expanded_at.is_null(False), open_recipients == 0
            ).execute()
