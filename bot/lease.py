"""Exactly one bot (SPEC 0.2, 14.2): a lease row in `job_leader`, taken at start, renewed, checked per update.

The lease is the queue's leadership row under the name `bot`, through the
same dialect SQL (jobs/engine/sql.py `elect`, `resign`). It lasts
`ttl_s` (30 s) and is renewed every ttl/6 (5 s) by a thread of its own.
Every transaction that applies updates checks it (bot/updates.py): the
statement that records their ids inserts nothing unless this process's row
reads live, and on PostgreSQL it locks the row FOR SHARE until the
transaction ends, while on SQLite the transaction holds the write lock, so
no takeover commits in between and no update commits unless this process
held the lease when it committed. A row that reads expired is renewed in
that transaction (`confirm`), which raises LeaseLost when another process
holds it: a process that lost the lease (a long pause, a partition) finds
out before it applies anything.

A starting bot that finds the lease held watches it for two renewal
intervals. A holder that renews is alive: the newcomer refuses to run (exit
2). A holder that does not is presumed dead (a crash leaves its lease to
expire): the newcomer waits for the expiry and takes over, at most `ttl_s`
after the holder's last renewal. A supervisor restarting a crashed bot
therefore gets a running bot back within 30 s, not a refusal.
"""

import datetime
import logging
import os
import socket
import threading
import time
import uuid

from jobs.engine.sql import for_database
from models.base import db, utcnow
from models.jobs import JobLeader

logger = logging.getLogger("omniflow.bot.lease")

LEASE_NAME = "bot"
RENEWALS_PER_TTL = 6  # 30 s TTL: renewed every 5 s
WATCH_RENEWALS = 2  # how many renewal intervals a newcomer waits to see a live holder renew
POLL_S = 0.25


class LeaseLost(Exception):
    """This process no longer holds the bot lease: it must stop handling updates."""


class BotLease:
    def __init__(self, ttl_s):
        self.ttl_s = ttl_s
        self.renew_interval_s = ttl_s / RENEWALS_PER_TTL
        self.holder_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.lost = threading.Event()

    def _elect(self):
        now = utcnow()
        return for_database(db.obj).elect(LEASE_NAME, self.holder_id, now, now + datetime.timedelta(seconds=self.ttl_s))

    def _holder(self):
        row = JobLeader.get_or_none(JobLeader.name == LEASE_NAME)
        return None if row is None else (row.leader_id, str(row.expires_at))

    def acquire(self, stop):
        """True once this process holds the lease; False when a live holder has it (or `stop` was set)."""
        if self._elect():
            return True
        seen = self._holder()
        watch_until = time.monotonic() + WATCH_RENEWALS * self.renew_interval_s + 1
        while not stop.wait(POLL_S):
            if self._elect():
                logger.info("took over the bot lease from a holder that stopped renewing it")
                return True
            now_held = self._holder()
            if now_held is not None and now_held != seen:
                return False  # renewed, or taken by another newcomer: someone alive holds it
            if now_held is None:
                continue  # released a moment ago: the next elect takes it
            if time.monotonic() > watch_until + self.ttl_s:
                return False  # never expired, never renewed: a clock we cannot reason about
        return False

    def confirm(self):
        """Renew inside the caller's transaction; LeaseLost when another process holds the lease now."""
        if not self._elect():
            self.lost.set()
            raise LeaseLost("another bot instance took the lease")

    def renew_until(self, stop):
        """The renewal thread's body: renew every interval until `stop`; on a loss, set `lost` and return."""
        while not stop.wait(self.renew_interval_s):
            try:
                with db.atomic():
                    self.confirm()
            except LeaseLost:
                logger.error("the bot lease was taken by another instance; this bot stops handling updates")
                return
            except Exception:
                logger.exception("renewing the bot lease failed; retrying")
            finally:
                db.close()

    def release(self):
        if not self.lost.is_set():
            for_database(db.obj).resign(LEASE_NAME, self.holder_id)
