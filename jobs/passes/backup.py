"""`backup` (SPEC 15.3, 5.2): every APP_BACKUP_INTERVAL_HOURS, an encrypted backup into APP_BACKUP_DIR, then pruning.

Registered only when APP_BACKUP_DIR is set and APP_DATA_ENCRYPTION_KEY holds
a key (a backup is never written unencrypted); otherwise the worker logs it
as left out, with the reason. No timeout (SPEC 5): a large database takes as
long as it takes, and the leader's uniqueness keeps a second run from
starting beside a slow one. A run cancelled by an operator stops between
chunks and removes its partial file.
"""

from jobs import JobCancel, current_job, every, huey
from ops import backups


def register(settings):
    """Declare the pass when backups can be written (a directory, and a key to
    encrypt them with); otherwise answer why not."""
    if not settings.backup_dir:
        return "APP_BACKUP_DIR is not set"
    if not settings.data_encryption_key:
        return "APP_DATA_ENCRYPTION_KEY is not set (backups are encrypted with it)"

    @huey.periodic_task(every(hours=settings.backup_interval_hours), name="backup", timeout=None)
    def backup():
        job = current_job()
        try:
            backups.run_scheduled(settings, should_stop=job.should_stop if job else backups.never_stop)
        except backups.BackupStopped as stopped:
            raise JobCancel(str(stopped)) from None

    return None
