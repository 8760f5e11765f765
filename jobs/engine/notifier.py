"""Wake-ups for idle producers: a job inserted anywhere reaches a waiting
worker without waiting for its poll.

In one process an insert wakes its own producers after commit. Across
processes, PostgreSQL carries `pg_notify('omniflow_jobs', <queue>)` from the
inserting transaction to a LISTEN connection in every worker; SQLite has no
such channel, so SQLite producers poll with a short interval instead.

A LISTEN can succeed and hear nothing: through a transaction-pooling
PgBouncer the LISTEN lands on a server connection the client leaves at the
end of the statement, and the pooler drops every notification that arrives
there. So the listener checks its own hearing: when it starts listening, and
whenever it has heard nothing for PROBE_IDLE_S, it sends a notification of
its own through the pool (the way inserts send theirs); if that one has not
come back after DEAF_AFTER_S, it logs once that wake-ups are not arriving
and what to set (DATABASE_DIRECT_URL). Producers poll meanwhile, as they do
whenever the channel is down.
"""

import logging
import select
import threading
import time
import uuid

from jobs.engine.outage import Backoff, report_failure
from jobs.engine.sql import NOTIFY_CHANNEL

logger = logging.getLogger("omniflow.jobs.notifier")

PROBE_PREFIX = "probe:"  # payloads of hearing checks; never a queue's name
DEAF_AFTER_S = 5.0
PROBE_IDLE_S = 60.0
DEAF_WARNING = (
    "wake-ups are not arriving: this worker's own notification did not come back to its LISTEN connection "
    "within {seconds:.0f} s, so new jobs wait for the {poll:.0f} s poll. DATABASE_URL is probably a "
    "transaction-pooling PgBouncer, which drops notifications: set DATABASE_DIRECT_URL to a direct "
    "(session) connection to PostgreSQL for the worker's LISTEN"
)

_lock = threading.Lock()
_listeners = {}  # queue -> set of threading.Event


def subscribe(queue, event):
    with _lock:
        _listeners.setdefault(queue, set()).add(event)


def unsubscribe(queue, event):
    with _lock:
        _listeners.get(queue, set()).discard(event)


def wake(queue):
    with _lock:
        events = list(_listeners.get(queue, ()))
    for event in events:
        event.set()


def wake_all():
    with _lock:
        events = [event for subscribed in _listeners.values() for event in subscribed]
    for event in events:
        event.set()


class PostgresListener(threading.Thread):
    """LISTEN on a dedicated connection (outside the pool) and wake producers.

    `probe(payload)` sends a notification the way an insert does (through
    the pool); without it the listener does not check its hearing. `poll_s`
    is how often producers poll when no wake-up comes, for the warning.
    """

    def __init__(self, dsn, stop_event, connect_kwargs=None, probe=None, poll_s=1.0):
        super().__init__(name="JobNotifyListener", daemon=True)
        self.dsn = dsn
        self.connect_kwargs = connect_kwargs or {}
        self.stop_event = stop_event
        self.ready = threading.Event()
        self.probe = probe
        self.poll_s = poll_s
        self.token = f"{PROBE_PREFIX}{uuid.uuid4().hex[:12]}"
        self.deaf_warned = False
        self._probe_sent_at = None  # monotonic time of the check waiting for its notification
        self._quiet_since = 0.0  # last notification heard, or check sent or given up on

    def run(self):
        import psycopg2

        backoff = Backoff(first=0.5, maximum=10.0)
        lost = False
        while not self.stop_event.is_set():
            connection = None
            try:
                connection = psycopg2.connect(self.dsn, **self.connect_kwargs)
                connection.autocommit = True
                connection.cursor().execute(f"LISTEN {NOTIFY_CHANNEL}")
                self.ready.set()
                backoff.reset()
                if lost:
                    # Inserts made while the channel was down woke nobody, and
                    # producers backing off from failed claims can try now.
                    lost = False
                    wake_all()
                self._probe_sent_at = None
                self._send_probe()
                while not self.stop_event.is_set():
                    readable, _, _ = select.select([connection], [], [], 0.5)
                    if readable:
                        connection.poll()
                        while connection.notifies:
                            self._heard(connection.notifies.pop(0).payload)
                    self._check_hearing()
            except Exception as error:
                # Producers keep polling while the channel is down.
                lost = True
                report_failure(
                    logger, "job notification channel lost; polling until it is back", error, level=logging.WARNING
                )
                self.stop_event.wait(backoff.next())
            finally:
                if connection is not None:
                    try:
                        connection.close()
                    except Exception:
                        pass

    def _heard(self, payload):
        self._quiet_since = time.monotonic()
        if payload == self.token:
            self._probe_sent_at = None
        elif not payload.startswith(PROBE_PREFIX):  # another worker's check is not a wake-up
            wake(payload)

    def _check_hearing(self):
        if self.probe is None:
            return
        now = time.monotonic()
        if self._probe_sent_at is None:
            if now - self._quiet_since >= PROBE_IDLE_S:
                self._send_probe()
            return
        if now - self._probe_sent_at < DEAF_AFTER_S:
            return
        self._probe_sent_at = None
        self._quiet_since = now
        if not self.deaf_warned:
            self.deaf_warned = True
            logger.warning(DEAF_WARNING.format(seconds=DEAF_AFTER_S, poll=self.poll_s))

    def _send_probe(self):
        self._quiet_since = time.monotonic()
        if self.probe is None:
            return
        try:
            self.probe(self.token)
        except Exception as error:
            # The loops that need the database report it not answering; this checks again later.
            report_failure(logger, "could not check that job wake-ups arrive", error, level=logging.WARNING)
            return
        self._probe_sent_at = time.monotonic()
