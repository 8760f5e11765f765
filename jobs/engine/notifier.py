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
import time

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

        backoff = 0.5
        while not self.stop_event.is_set():
            connection = None
            try:
                connection = psycopg2.connect(self.dsn, **self.connect_kwargs)
                connection.autocommit = True
                connection.cursor().execute(f"LISTEN {NOTIFY_CHANNEL}")
                self.ready.set()
                backoff = 0.5
                while not self.stop_event.is_set():
                    readable, _, _ = select.select([connection], [], [], 0.5)
                    if not readable:
                        continue
                    connection.poll()
                    while connection.notifies:
                        wake(connection.notifies.pop(0).payload)
            except Exception as exc:
                # Producers keep polling while the channel is down; say so once per outage.
                logger.warning(
                    "job notification channel lost; polling until it is back", extra={"error": type(exc).__name__}
                )
                time.sleep(backoff)
                backoff = min(backoff * 2, 10.0)
            finally:
                if connection is not None:
                    try:
                        connection.close()
                    except Exception:
                        pass
