"""Retention (SPEC 7): the eight steps that delete disposable operational rows, in the spec's order.

Each step says declaratively what it deletes: its table, the column that
dates a row, the window (a Settings attribute in days, or none: the row's
own stamp has passed) and what else makes a row disposable. Every step is
declared here, in order, even for a table another area has not created yet:
such a step is skipped with one debug line until its migration lands, and
then runs with no change here. (The other way, each area registering its
own step, would spread the order of SPEC 7 over several modules.)

A step deletes in batches of BATCH rows, oldest first, each batch its own
short transaction that gives up on a lock after LOCK_TIMEOUT_S, so one locked
table fails its step (logged, skipped) instead of stalling the sweep; the
run checks `should_stop` between batches. Retention never deletes financial,
audit, consent, identity or entitlement history: DISPOSABLE_TABLES is the
whole list of tables it may touch, and a test keeps it that way.

Attachments are files named by content digest, so one file can back
several rows: a batch reads the candidate rows' digests inside the
transaction that deletes them, then asks which of those digests a surviving
row still names; after the commit only the others' files are removed. A
file that cannot be removed is logged and left; without an attachment
directory the rows are deleted all the same. A writer adding a row for a
digest stores the file first, inserts the row, and stores the file again
if it has gone meanwhile (a sweep between the two can remove it).
"""

import datetime
import logging
import os
import time
from dataclasses import dataclass

from config.database import transaction_with_lock_timeout
from models.base import db, utcnow
from models.bot import UPDATE_REPEAT_WINDOW
from ops.attachments import BadDigest, path_for

logger = logging.getLogger("omniflow.retention")

BATCH = 5000
LOCK_TIMEOUT_S = 5
ATTACHMENTS = "support_attachments"


@dataclass(frozen=True)
class Step:
    table: str
    dated_by: str  # the timestamp column a row's age is read from
    window: str = None  # Settings attribute with the window in days; None: deleted once the stamp has passed
    keep: datetime.timedelta = None  # a window fixed in code, for a table no setting names
    disposable_if: str = ""  # what else a row must satisfy, SQL
    files_named_by: str = None  # a column naming the file behind the row, removed when no row names it
    key: str = "id"

    def cutoff(self, settings, now):
        if self.window is not None:
            return now - datetime.timedelta(days=getattr(settings, self.window))
        return now - self.keep if self.keep is not None else now

    def condition(self, param):
        conditions = [self.disposable_if] if self.disposable_if else []
        return " AND ".join(conditions + [f"{self.dated_by} < {param}"])

    def batch_sql(self, param, resuming):
        """The next batch's rows, oldest first: parameters cutoff, [resume at,] limit.

        Each batch starts at the dating value the previous one ended at (ties
        included), so it never walks again over the entries the batches before
        it deleted and a step's work stays linear in the rows it deletes.
        Without that, every batch's scan would first step over all the dead
        rows of the batches before it (a million rows took a hundred times as long).
        """
        columns = [self.key, self.dated_by] + ([self.files_named_by] if self.files_named_by else [])
        condition = self.condition(param) + (f" AND {self.dated_by} >= {param}" if resuming else "")
        return f"SELECT {', '.join(columns)} FROM {self.table} WHERE {condition} ORDER BY {self.dated_by} LIMIT {param}"


STEPS = (
    Step("bot_sessions", "expires_at", key="chat_id"),
    Step("bot_shop_reviews", "expires_at"),
    Step("bot_checkout_sessions", "expires_at", disposable_if="order_id IS NULL"),
    Step("provider_webhook_events", "retain_until"),
    Step(ATTACHMENTS, "expires_at", files_named_by="digest"),
    Step("outbox_events", "published_at", "retention_outbox_days", disposable_if="published_at IS NOT NULL"),
    Step("telemetry_events", "received_at", "retention_telemetry_days"),
    Step("entitlement_drifts", "resolved_at", "retention_drift_days", disposable_if="status <> 'open'"),
    # Not in SPEC 7's list: an applied update's id only matters while Telegram may
    # deliver that update again; past the window the bot takes the id for a new update.
    Step("bot_updates", "applied_at", keep=UPDATE_REPEAT_WINDOW, key="update_id"),
    # Not in SPEC 7's list either: a session past its end (idle or absolute) can never be used again.
    Step("operator_sessions", "expires_at", key="token_hash"),
)
DISPOSABLE_TABLES = frozenset(step.table for step in STEPS)


@dataclass
class StepResult:
    table: str
    removed: int = 0
    batches: int = 0
    longest_batch_s: float = 0.0
    files_removed: int = 0
    files_kept: int = 0  # could not be removed: logged and left
    error: str = None


def never_stop():
    return False


def sweep(settings, now=None, batch=BATCH, lock_timeout_s=LOCK_TIMEOUT_S, should_stop=never_stop):
    """Run every step in order; returns a StepResult per step that ran (a missing table is not one)."""
    now = now or utcnow()
    present = set(db.get_tables())
    results = []
    for step in STEPS:
        if should_stop():
            logger.info("retention sweep stopped before its end", extra={"table": step.table})
            break
        if step.table not in present:
            logger.debug("retention step skipped: its table does not exist yet", extra={"table": step.table})
            continue
        result = StepResult(step.table)
        results.append(result)
        try:
            _run(step, step.cutoff(settings, now), settings, batch, lock_timeout_s, should_stop, result)
        except Exception as error:
            result.error = f"{type(error).__name__}: {error}".strip()
            logger.warning("retention step failed", extra={"table": step.table, "error": result.error})
        if result.removed:
            logger.info("retention sweep removed rows", extra={"table": step.table, "count": result.removed})
    failed = [result.table for result in results if result.error]
    logger.info(
        "retention sweep finished",
        extra={"count": sum(result.removed for result in results), "failed": ",".join(failed) or "none"},
    )
    return results


def sweep_table(table, settings=None, now=None, batch=BATCH, lock_timeout_s=LOCK_TIMEOUT_S, should_stop=never_stop):
    """Run the one step of `table` on its own, as the sweep runs it; returns its StepResult.

    commerce_maintenance drops saved carts every minute this way (SPEC 13.7),
    with the step that defines which carts are disposable. `settings` may be
    None for a step with no window set in the settings and no files."""
    [step] = [step for step in STEPS if step.table == table]
    now = now or utcnow()
    result = StepResult(step.table)
    _run(step, step.cutoff(settings, now), settings, batch, lock_timeout_s, should_stop, result)
    return result


def _run(step, cutoff, settings, batch, lock_timeout_s, should_stop, result):
    resume_at = None
    while True:
        started = time.monotonic()
        with transaction_with_lock_timeout(lock_timeout_s):
            candidates = _candidates(step, cutoff, resume_at, batch)
            unreferenced = _delete(step, candidates)
        result.longest_batch_s = max(result.longest_batch_s, time.monotonic() - started)
        result.batches += 1
        result.removed += len(candidates)
        if unreferenced:
            _remove_files(settings.support_attachment_dir, unreferenced, result)
        if len(candidates) < batch or should_stop():
            return
        resume_at = candidates[-1][1]


def _candidates(step, cutoff, resume_at, batch):
    """[(key, dating value[, file digest])] of the next batch, oldest first."""
    resuming = resume_at is not None
    params = [cutoff] + ([resume_at] if resuming else []) + [batch]
    return db.execute_sql(step.batch_sql(db.param, resuming), params).fetchall()


def _delete(step, candidates):
    """Delete the candidates inside the caller's transaction; returns the file digests no surviving row names."""
    if not candidates:
        return set()
    p = db.param
    keys = [row[0] for row in candidates]
    db.execute_sql(f"DELETE FROM {step.table} WHERE {step.key} IN ({', '.join([p] * len(keys))})", keys)
    if not step.files_named_by:
        return set()
    digests = sorted({row[2] for row in candidates})
    surviving = db.execute_sql(
        f"SELECT DISTINCT {step.files_named_by} FROM {step.table} "
        f"WHERE {step.files_named_by} IN ({', '.join([p] * len(digests))})",
        digests,
    ).fetchall()
    return set(digests) - {row[0] for row in surviving}


def _remove_files(directory, digests, result):
    if not directory:
        return  # no attachment directory configured: the rows go, there are no files to look for
    for digest in sorted(digests):
        try:
            os.remove(path_for(directory, digest))
        except FileNotFoundError:
            continue  # already gone: nothing is left to remove
        except (OSError, BadDigest) as error:
            result.files_kept += 1
            problem = getattr(error, "strerror", None) or str(error)
            logger.warning(
                "retention could not remove an attachment file; left in place",
                extra={"table": ATTACHMENTS, "error": f"{type(error).__name__}: {problem}"},
            )
            continue
        result.files_removed += 1
