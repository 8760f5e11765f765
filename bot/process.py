"""`python omniflow.py bot`: the lease, the threads, the signals and the exit status of the one bot process.

Exit status: 0 after SIGTERM/SIGINT (polling stopped, the update in hand
finished, the lease released); 2 when another live instance holds the lease
(`another bot instance holds the lease`); 3 when this instance lost the
lease while running (another one took over: this one must not apply
anything more). The bot inserts jobs (through the services it calls) and
never runs them: it starts no consumer.

Threads: the main thread polls and applies updates; four send their answers
(bot/updates.py AnswerSender, a lane per user); one renews the lease; one delivers customer
notices (bot/customer_notices.py); one queues the customer lifecycle notices
(bot/lifecycle.py); one delivers campaigns and announcements
(bot/campaigns.py); one pushes operators' support replies
(bot/support_push.py); one runs the operator notifier when
APP_TELEGRAM_OPERATOR_CHAT_ID is set; one re-verifies channel members every
10 minutes when APP_TELEGRAM_REQUIRED_CHANNEL is set (bot/membership.py).
SIGTERM while the main thread waits in getUpdates aborts that call at once
(nothing read is lost: unconfirmed updates are delivered again); while it
applies an update, the update is finished first.
"""

import contextlib
import logging
import signal
import threading

from bot import handlers, services
from bot.campaigns import CampaignDelivery
from bot.customer_notices import CustomerNoticeLoop
from bot.lease import BotLease, LeaseLost
from bot.lifecycle import LifecycleNotices
from bot.membership import MembershipRecheck
from bot.notifier import OperatorNotifier
from bot.polling import Poller
from bot.support_push import SupportReplyPush
from bot.updates import AnswerSender, UpdateApplier
from integrations import telegram
from models.base import db

logger = logging.getLogger("omniflow.bot")

EXIT_STOPPED = 0
EXIT_LEASE_HELD = 2
EXIT_LEASE_LOST = 3
THREAD_JOIN_S = 15


class _Interrupted(BaseException):
    """Raised in the main thread by SIGTERM while it waits in getUpdates (BaseException: no library swallows it)."""


class BotProcess:
    def __init__(self, settings):
        self.settings = settings
        self.stop = threading.Event()
        self.lease = BotLease(settings.bot_lease_ttl_seconds)
        self._polling = False
        self._main_thread = threading.main_thread().ident

    def _on_signal(self, signum, frame):
        self.stop.set()
        if self._polling:
            self._polling = False
            raise _Interrupted()

    @contextlib.contextmanager
    def _interruptible(self):
        self._polling = True
        try:
            if self.stop.is_set():
                raise _Interrupted()
            yield
        finally:
            self._polling = False

    def _watch_lease(self):
        self.lease.renew_until(self.stop)
        if self.lease.lost.is_set() and not self.stop.is_set():
            signal.pthread_kill(self._main_thread, signal.SIGTERM)  # wakes the main thread out of getUpdates

    def run(self):
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self._on_signal)
        try:
            held = self.lease.acquire(self.stop)
        finally:
            db.close()
        if not held:
            if self.stop.is_set():
                return EXIT_STOPPED
            logger.error("another bot instance holds the lease")
            return EXIT_LEASE_HELD
        logger.info("bot lease taken; polling", extra={"worker_id": self.lease.holder_id})

        telegram.configure(self.settings.telegram_api_url)
        services.configure(self.settings)
        bot = telegram.new_bot(self.settings.telegram_bot_token)
        applier = UpdateApplier(bot, self.lease, self.stop)
        applier.sender = AnswerSender(applier.deliver)
        answers = threading.Thread(target=applier.sender.run, name="bot-answers", daemon=True)
        answers.start()
        handlers.register(bot, applier, self.settings)
        threads = [
            threading.Thread(target=self._watch_lease, name="bot-lease", daemon=True),
            threading.Thread(target=CustomerNoticeLoop(bot, self.stop).run, name="customer-notices", daemon=True),
            threading.Thread(target=LifecycleNotices(self.stop).run, name="lifecycle-notices", daemon=True),
            threading.Thread(
                target=CampaignDelivery(bot, self.stop, self.settings.telegram_delivery_rate).run,
                name="campaign-delivery",
                daemon=True,
            ),
            threading.Thread(target=SupportReplyPush(bot, self.stop).run, name="support-push", daemon=True),
        ]
        if self.settings.telegram_operator_chat_id:
            notifier = OperatorNotifier(bot, self.settings.telegram_operator_chat_id, self.stop)
            threads.append(threading.Thread(target=notifier.run, name="operator-notifier", daemon=True))
        else:
            logger.info("operator notifier off: APP_TELEGRAM_OPERATOR_CHAT_ID is not set")
        if self.settings.telegram_required_channel:
            recheck = MembershipRecheck(bot, self.settings.telegram_required_channel, self.stop)
            threads.append(threading.Thread(target=recheck.run, name="channel-membership", daemon=True))
        else:
            logger.info("channel membership off: APP_TELEGRAM_REQUIRED_CHANNEL is not set")
        for thread in threads:
            thread.start()

        status = EXIT_STOPPED
        try:
            Poller(bot, applier, self.stop, self._interruptible).run()
        except _Interrupted:
            pass
        except LeaseLost:
            pass
        finally:
            self.stop.set()
            applier.sender.close()  # the answers of what was applied still go out
            for thread in (answers, *threads):
                thread.join(THREAD_JOIN_S)
        if self.lease.lost.is_set():
            logger.error("bot lease lost: another instance runs now; exiting without applying more updates")
            status = EXIT_LEASE_LOST
        else:
            try:
                self.lease.release()
            finally:
                db.close()
            logger.info("bot stopped; lease released")
        return status
