"""`retention` (SPEC 7): every APP_RETENTION_INTERVAL_HOURS, the sweep of ops/retention.py.

Its timeout is the interval; the sweep checks `should_stop()` between
batches, so a run past its timeout ends after the batch in hand and the next
interval's run carries on where it stopped (the rows are still expired).
The interval is read from the settings when the worker loads its passes.
"""

from config.settings import load_settings
from jobs import current_job, every, huey
from ops import retention as sweeping

SETTINGS = load_settings()


@huey.periodic_task(every(hours=SETTINGS.retention_interval_hours), name="retention")
def retention():
    job = current_job()
    sweeping.sweep(SETTINGS, should_stop=job.should_stop if job else sweeping.never_stop)
