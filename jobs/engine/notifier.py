"""Wake-ups for idle producers: a job inserted anywhere reaches a waiting
worker without waiting for its poll.

In one process an insert wakes its own producers after commit. Across
processes, PostgreSQL carries `pg_notify('omniflow_jobs', <queue>)` from the
inserting transaction to a LISTEN connection in every worker; SQLite has no
such channel, so SQLite producers poll with a short interval instead.
"""

import logging
import select
import threading

from jobs.engine.outage import Backoff, report_failure
from jobs.engine.sql import NOTIFY_CHANNEL

logger = logging.getLogger("omniflow.jobs.notifier")

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
    """LISTEN on a dedicated connection (outside the pool) and wake producers."""

    def __init__(self, dsn, stop_event, connect_kwargs=None):
        super().__init__(name="JobNotifyListener", daemon=True)
        self.dsn = dsn
        self.connect_kwargs = connect_kwargs or {}
        self.stop_event = stop_event
        self.ready = threading.Event()

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
                while not self.stop_event.is_set():
                    readable, _, _ = select.select([connection], [], [], 0.5)
                    if not readable:
                        continue
                    connection.poll()
                    while connection.notifies:
                        wake(connection.notifies.pop(0).payload)
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
