"""The queue's SQL, read top to bottom: insert, claim, finish, rescue, elect, clean.

Statements are written once with `%s` placeholders; the two dialects differ
only where the databases do, and those differences are the small classes at
the bottom: PostgreSQL claims with `FOR UPDATE SKIP LOCKED` in one autocommit
statement and wakes listeners with pg_notify; SQLite claims inside an
IMMEDIATE transaction (one writer at a time) and returns BLOBs as bytes.

Every write that records a worker's outcome is guarded by
`state = 'running' AND attempted_by = <the worker that claimed it> AND
attempt = <the attempt it ran>`: a run whose job was rescued, cancelled or
handed back meanwhile changes nothing, and neither does an outcome written
late (held through a database outage) after the job was claimed again, even
by the same worker.
"""

import functools
import json

from jobs.engine.kinds import PERIODIC_KIND
from jobs.engine.states import CANCELLED, CLAIMABLE_STATES, COMPLETED, FINAL_STATES, SCHEDULED, STATE_BITS

CLAIM_COLUMNS = "id, kind, queue, args, payload, attempt, max_attempts, priority, errors, unique_states"
INSERT_COLUMNS = (
    "kind, queue, state, args, payload, max_attempts, priority, unique_key, unique_states, created_at, scheduled_at"
)
_CLAIMABLE = ", ".join(f"'{s}'" for s in CLAIMABLE_STATES)
_FINAL = ", ".join(f"'{s}'" for s in sorted(FINAL_STATES))
NOTIFY_CHANNEL = "omniflow_jobs"


def _keep_key_if(state):
    """SQL keeping unique_key only if `state` is in the row's unique set."""
    return f"CASE WHEN (unique_states & {STATE_BITS[state]}) <> 0 THEN unique_key ELSE NULL END"


def _marks(n):
    return ", ".join(["%s"] * n)


@functools.lru_cache(maxsize=8)
def _declared(declared):
    """(SQL, params) true for the rows of `declared` (a DeclaredWork): its kinds, and the
    periodic_task rows of its passes (their args are stored canonical, so compared as text).
    A worker's declared work never changes, so every claim reuses the fragment built once."""
    clauses, params = [], []
    if declared.kinds:
        clauses.append(f"kind IN ({_marks(len(declared.kinds))})")
        params += declared.kinds
    if declared.passes:
        clauses.append(f"(kind = '{PERIODIC_KIND}' AND args IN ({_marks(len(declared.passes))}))")
        params += declared.pass_args()
    return "(" + (" OR ".join(clauses) or "1 = 0") + ")", tuple(params)


class QueueSQL:
    """Statements shared by both dialects; subclasses adapt the differences."""

    lock_clause = ""
    is_postgres = False

    def __init__(self, database):
        self.db = database

    # -- plumbing ---------------------------------------------------------

    def execute(self, sql, params=()):
        return self.db.execute_sql(self.adapt(sql), params)

    def adapt(self, sql):
        return sql

    def claim_transaction(self):
        """Context for a claim: SQLite needs the write lock up front."""
        return self.db.atomic()

    def blob(self, value):
        return bytes(value) if value is not None else None

    # -- insert -------------------------------------------------------------

    def insert_rows(self, rows):
        """Insert rows (tuples in INSERT_COLUMNS order) in one statement.

        Returns [(id, unique_key)] for the rows actually inserted; a row whose
        unique key is already held is skipped by ON CONFLICT DO NOTHING.
        """
        values = ", ".join(f"({_marks(11)})" for _ in rows)
        params = [value for row in rows for value in row]
        cursor = self.execute(
            f"INSERT INTO jobs ({INSERT_COLUMNS}) VALUES {values} "
            "ON CONFLICT (unique_key) WHERE unique_key IS NOT NULL DO NOTHING "
            "RETURNING id, unique_key",
            params,
        )
        return list(cursor.fetchall())

    def insert_rows_unread(self, rows):
        """insert_rows whose result nobody reads: on PostgreSQL inside a transaction it rides with
        the next round trip (config/database.py), elsewhere it runs at once."""
        values = ", ".join(f"({_marks(11)})" for _ in rows)
        sql = (
            f"INSERT INTO jobs ({INSERT_COLUMNS}) VALUES {values} "
            "ON CONFLICT (unique_key) WHERE unique_key IS NOT NULL DO NOTHING"
        )
        params = [value for row in rows for value in row]
        target = getattr(self.db, "obj", self.db)
        if hasattr(target, "defer"):
            target.defer([(self.adapt(sql), params)])
            return
        self.execute(sql, params)

    def ids_by_unique_key(self, keys):
        cursor = self.execute(f"SELECT unique_key, id FROM jobs WHERE unique_key IN ({_marks(len(keys))})", list(keys))
        return dict(cursor.fetchall())

    def notify(self, queues):
        """Wake workers in other processes (PostgreSQL only; SQLite polls)."""

    # -- claim ------------------------------------------------------------------

    def claim(self, queue, limit, worker_id, now, declared, kind=None):
        """Move up to `limit` due jobs of `queue` (any queue when None), of `kind` if given, to running.

        Only rows of the worker's `declared` work (a DeclaredWork) are taken: a row this worker
        cannot run waits, attempt untouched, for one that can (SPEC 1.11)."""
        queue_filter = ("queue = %s AND " if queue else "") + ("kind = %s AND " if kind else "")
        declared_sql, declared_params = _declared(declared)
        params = (
            [now, worker_id] + ([queue] if queue else []) + ([kind] if kind else []) + [*declared_params, now, limit]
        )
        with self.claim_transaction():
            cursor = self.execute(
                "UPDATE jobs SET state = 'running', attempt = attempt + 1, "
                "attempted_at = %s, attempted_by = %s "
                "WHERE id IN (SELECT id FROM jobs "
                f"WHERE {queue_filter}{declared_sql} AND state IN ({_CLAIMABLE}) AND scheduled_at <= %s "
                f"ORDER BY priority DESC, scheduled_at, id LIMIT %s{self.lock_clause}) "
                f"RETURNING {CLAIM_COLUMNS}",
                params,
            )
            rows = cursor.fetchall()
        # RETURNING order is unspecified; hand jobs out by priority, then age.
        return sorted(rows, key=lambda row: (-row[7], row[0]))

    def has_due(self, queue, now, declared):
        declared_sql, declared_params = _declared(declared)
        cursor = self.execute(
            f"SELECT 1 FROM jobs WHERE queue = %s AND {declared_sql} AND state IN ({_CLAIMABLE}) "
            "AND scheduled_at <= %s LIMIT 1",
            [queue, *declared_params, now],
        )
        return cursor.fetchone() is not None

    # -- finish -----------------------------------------------------------------

    def complete(self, ids, worker_id, attempt, now):
        """Mark jobs one worker ran on the same attempt completed in one statement (the completer's batch)."""
        cursor = self.execute(
            f"UPDATE jobs SET state = 'completed', finalized_at = %s, unique_key = {_keep_key_if(COMPLETED)} "
            f"WHERE id IN ({_marks(len(ids))}) AND state = 'running' AND attempted_by = %s AND attempt = %s",
            [now, *ids, worker_id, attempt],
        )
        return cursor.rowcount

    def finish(self, job_id, worker_id, attempt, state, scheduled_at, finalized_at, errors, attempt_delta=0):
        """Record one non-completion outcome: retryable, discarded, cancelled, scheduled (snooze)."""
        cursor = self.execute(
            f"UPDATE jobs SET state = %s, scheduled_at = COALESCE(%s, scheduled_at), "
            f"finalized_at = %s, errors = %s, attempt = attempt + %s, "
            f"unique_key = {self._key_for_param_state()} "
            "WHERE id = %s AND state = 'running' AND attempted_by = %s AND attempt = %s",
            [state, scheduled_at, finalized_at, json.dumps(errors), attempt_delta, state, job_id, worker_id, attempt],
        )
        return cursor.rowcount

    def _key_for_param_state(self):
        """SQL keeping unique_key only if the new state (a parameter) is in the row's set."""
        bit = "CASE %s " + " ".join(f"WHEN '{s}' THEN {b}" for s, b in STATE_BITS.items()) + " END"
        return f"CASE WHEN (unique_states & ({bit})) <> 0 THEN unique_key ELSE NULL END"

    def hand_back(self, ids, worker_id, state, scheduled_at):
        """Give back claimed jobs this worker will not finish; the attempt is refunded."""
        if not ids:
            return 0
        cursor = self.execute(
            "UPDATE jobs SET state = %s, scheduled_at = %s, attempt = attempt - 1 "
            f"WHERE id IN ({_marks(len(ids))}) AND state = 'running' AND attempted_by = %s",
            [state, scheduled_at, *ids, worker_id],
        )
        return cursor.rowcount

    def states_of(self, ids):
        cursor = self.execute(f"SELECT id, state FROM jobs WHERE id IN ({_marks(len(ids))})", list(ids))
        return dict(cursor.fetchall())

    # -- workers and rescue -----------------------------------------------------

    def register_worker(self, worker_id, hostname, pid, queues, declared, now):
        self.execute(
            "INSERT INTO job_workers (id, hostname, pid, queues, kinds, passes, started_at, heartbeat_at) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
            [worker_id, hostname, pid, queues, json.dumps(declared.kinds), json.dumps(declared.passes), now, now],
        )

    def heartbeat(self, worker_id, now):
        """False when this worker's row is gone: it was declared dead and rescued."""
        cursor = self.execute("UPDATE job_workers SET heartbeat_at = %s WHERE id = %s", [now, worker_id])
        return cursor.rowcount == 1

    def deregister_worker(self, worker_id):
        self.execute("DELETE FROM job_workers WHERE id = %s", [worker_id])

    def forget_dead_workers(self, stale_before):
        cursor = self.execute("DELETE FROM job_workers WHERE heartbeat_at < %s", [stale_before])
        return cursor.rowcount

    def declared_by_live_workers(self, alive_since):
        """[(kinds, passes)] as JSON text, of every worker whose heartbeat is newer than `alive_since`."""
        cursor = self.execute("SELECT kinds, passes FROM job_workers WHERE heartbeat_at >= %s", [alive_since])
        return cursor.fetchall()

    def undeclared_waiting(self, declared, due_before):
        """[(kind, args, oldest id)] of job rows due since before `due_before` that are not of
        `declared`'s kinds or passes (args only for periodic_task rows, None otherwise)."""
        declared_sql, declared_params = _declared(declared)
        cursor = self.execute(
            f"SELECT kind, CASE WHEN kind = '{PERIODIC_KIND}' THEN args END, MIN(id) FROM jobs "
            f"WHERE state IN ({_CLAIMABLE}) AND scheduled_at <= %s AND payload IS NULL AND NOT {declared_sql} "
            "GROUP BY 1, 2",
            [due_before, *declared_params],
        )
        return cursor.fetchall()

    def orphaned_jobs(self, limit):
        """Running jobs whose worker has no live heartbeat row."""
        cursor = self.execute(
            "SELECT id, attempted_by, attempt, max_attempts, errors FROM jobs "
            "WHERE state = 'running' AND (attempted_by IS NULL OR attempted_by NOT IN "
            "(SELECT id FROM job_workers)) ORDER BY id LIMIT %s",
            [limit],
        )
        return cursor.fetchall()

    def rescue(self, job_id, dead_worker, state, now, finalized_at, errors):
        guard = "attempted_by = %s" if dead_worker is not None else "attempted_by IS NULL"
        cursor = self.execute(
            f"UPDATE jobs SET state = %s, scheduled_at = %s, finalized_at = %s, errors = %s, "
            f"unique_key = {self._key_for_param_state()} "
            f"WHERE id = %s AND state = 'running' AND {guard}",
            [state, now, finalized_at, json.dumps(errors), state, job_id]
            + ([dead_worker] if dead_worker is not None else []),
        )
        return cursor.rowcount

    # -- leadership ---------------------------------------------------------------

    def elect(self, name, candidate, now, expires_at):
        """Take or renew the lease; True when `candidate` holds it afterwards."""
        cursor = self.execute(
            "INSERT INTO job_leader (name, leader_id, elected_at, expires_at) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT (name) DO UPDATE SET leader_id = excluded.leader_id, "
            "elected_at = CASE WHEN job_leader.leader_id = excluded.leader_id "
            "THEN job_leader.elected_at ELSE excluded.elected_at END, "
            "expires_at = excluded.expires_at "
            "WHERE job_leader.leader_id = excluded.leader_id OR job_leader.expires_at < %s "
            "RETURNING leader_id",
            [name, candidate, now, expires_at, now],
        )
        row = cursor.fetchone()
        return row is not None and row[0] == candidate

    def resign(self, name, leader_id):
        self.execute("DELETE FROM job_leader WHERE name = %s AND leader_id = %s", [name, leader_id])

    def holds_lease(self, name, leader_id, now):
        cursor = self.execute(
            "SELECT 1 FROM job_leader WHERE name = %s AND leader_id = %s AND expires_at > %s",
            [name, leader_id, now],
        )
        return cursor.fetchone() is not None

    # -- periodic schedule ----------------------------------------------------------

    def periodic_last_runs(self):
        cursor = self.execute("SELECT name, last_run_at FROM job_periodic")
        return {name: self.timestamp(value) for name, value in cursor.fetchall()}

    def record_periodic_run(self, name, previous, run_at):
        """Move a pass's last run from `previous` (None: it never ran) to `run_at`.

        False when the stored run is no longer `previous`: another leader ran
        the pass meanwhile, and the caller rolls its insert back."""
        if previous is None:
            cursor = self.execute(
                "INSERT INTO job_periodic (name, last_run_at) VALUES (%s, %s) ON CONFLICT (name) DO NOTHING",
                [name, run_at],
            )
        else:
            cursor = self.execute(
                "UPDATE job_periodic SET last_run_at = %s WHERE name = %s AND last_run_at = %s",
                [run_at, name, previous],
            )
        return cursor.rowcount == 1

    def timestamp(self, value):
        return value

    # -- reading for operators ---------------------------------------------------------

    minute_of_finalized = "to_char(date_trunc('minute', finalized_at), 'YYYY-MM-DD HH24:MI')"

    def finished_per_minute(self, since):
        """[(minute 'YYYY-MM-DD HH:MM', state, count)] of jobs finalized since `since` (index jobs_finalized)."""
        cursor = self.execute(
            f"SELECT {self.minute_of_finalized}, state, COUNT(*) FROM jobs "
            "WHERE state IN ('completed', 'discarded', 'cancelled') AND finalized_at >= %s "
            "GROUP BY 1, 2",
            [since],
        )
        return [(minute, state, count) for minute, state, count in cursor.fetchall()]

    # -- cleaning ---------------------------------------------------------------------

    def clean(self, state, finalized_before, batch):
        cursor = self.execute(
            "DELETE FROM jobs WHERE id IN (SELECT id FROM jobs WHERE state = %s AND finalized_at < %s "
            "ORDER BY finalized_at LIMIT %s)",
            [state, finalized_before, batch],
        )
        return cursor.rowcount

    # -- operator changes ---------------------------------------------------------------

    def lock_job(self, job_id):
        cursor = self.execute(
            f"SELECT id, kind, state, args, attempt, max_attempts, errors, unique_key FROM jobs "
            f"WHERE id = %s{' FOR UPDATE' if self.is_postgres else ''}",
            [job_id],
        )
        return cursor.fetchone()

    def cancel_job(self, job_id, now, errors):
        cursor = self.execute(
            f"UPDATE jobs SET state = 'cancelled', finalized_at = %s, errors = %s, "
            f"unique_key = {_keep_key_if(CANCELLED)} "
            f"WHERE id = %s AND state NOT IN ({_FINAL})",
            [now, json.dumps(errors), job_id],
        )
        return cursor.rowcount

    def retry_job(self, job_id, now, unique_key):
        cursor = self.execute(
            "UPDATE jobs SET state = 'available', scheduled_at = %s, finalized_at = NULL, "
            "max_attempts = CASE WHEN attempt >= max_attempts THEN attempt + 1 ELSE max_attempts END, "
            "unique_key = %s WHERE id = %s AND state <> 'running'",
            [now, unique_key, job_id],
        )
        return cursor.rowcount

    # -- Huey's raw message lane (see storage.py) ---------------------------------------

    def pop_raw(self, now):
        with self.claim_transaction():
            cursor = self.execute(
                "DELETE FROM jobs WHERE id = (SELECT id FROM jobs WHERE payload IS NOT NULL "
                f"AND state IN ({_CLAIMABLE}) AND scheduled_at <= %s "
                f"ORDER BY priority DESC, scheduled_at, id LIMIT 1{self.lock_clause}) RETURNING payload",
                [now],
            )
            row = cursor.fetchone()
        return self.blob(row[0]) if row else None

    def pop_raw_schedule(self, now):
        with self.claim_transaction():
            cursor = self.execute(
                f"DELETE FROM jobs WHERE payload IS NOT NULL AND state = '{SCHEDULED}' "
                "AND scheduled_at <= %s RETURNING scheduled_at, id, payload",
                [now],
            )
            rows = cursor.fetchall()
        return [self.blob(payload) for _, _, payload in sorted(rows, key=lambda r: (str(r[0]), r[1]))]

    def raw_items(self, state, limit, due_before=None):
        due = " AND scheduled_at <= %s" if due_before is not None else ""
        cursor = self.execute(
            f"SELECT payload FROM jobs WHERE payload IS NOT NULL AND state = %s{due} "
            "ORDER BY priority DESC, scheduled_at, id" + (" LIMIT %s" if limit else ""),
            [state] + ([due_before] if due_before is not None else []) + ([limit] if limit else []),
        )
        return [self.blob(payload) for (payload,) in cursor.fetchall()]

    def raw_count(self, state):
        cursor = self.execute("SELECT COUNT(*) FROM jobs WHERE payload IS NOT NULL AND state = %s", [state])
        return cursor.fetchone()[0]

    def raw_flush(self, state):
        self.execute("DELETE FROM jobs WHERE payload IS NOT NULL AND state = %s", [state])

    # -- Huey's key/value store and counters --------------------------------------------

    def kv_put(self, name, key, value, expires_at=None):
        self.execute(
            "INSERT INTO huey_kv (name, key, value, expires_at) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT (name, key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at",
            [name, key, self.binary(value), expires_at],
        )

    def kv_put_if_empty(self, name, key, value, expires_at, now):
        cursor = self.execute(
            "INSERT INTO huey_kv (name, key, value, expires_at) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT (name, key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at "
            "WHERE huey_kv.expires_at IS NOT NULL AND huey_kv.expires_at <= %s RETURNING key",
            [name, key, self.binary(value), expires_at, now],
        )
        return cursor.fetchone() is not None

    def kv_get_many(self, name, keys, now):
        cursor = self.execute(
            f"SELECT key, value FROM huey_kv WHERE name = %s AND key IN ({_marks(len(keys))}) "
            "AND (expires_at IS NULL OR expires_at > %s)",
            [name, *keys, now],
        )
        return {key: self.blob(value) for key, value in cursor.fetchall()}

    def kv_pop(self, name, key, now):
        cursor = self.execute(
            "DELETE FROM huey_kv WHERE name = %s AND key = %s RETURNING value, expires_at", [name, key]
        )
        row = cursor.fetchone()
        if row is None:
            return None
        value, expires_at = row
        expires_at = self.timestamp(expires_at)
        if expires_at is not None and expires_at <= now:
            return None
        return self.blob(value)

    def kv_items(self, name, now):
        cursor = self.execute(
            "SELECT key, value FROM huey_kv WHERE name = %s AND (expires_at IS NULL OR expires_at > %s)",
            [name, now],
        )
        return {key: self.blob(value) for key, value in cursor.fetchall()}

    def kv_count(self, name, now):
        cursor = self.execute(
            "SELECT COUNT(*) FROM huey_kv WHERE name = %s AND (expires_at IS NULL OR expires_at > %s)",
            [name, now],
        )
        return cursor.fetchone()[0]

    def kv_flush(self, name):
        self.execute("DELETE FROM huey_kv WHERE name = %s", [name])

    def kv_clean_expired(self, now):
        cursor = self.execute("DELETE FROM huey_kv WHERE expires_at IS NOT NULL AND expires_at <= %s", [now])
        return cursor.rowcount

    def counter_incr(self, name, key, amount):
        cursor = self.execute(
            "INSERT INTO huey_counters (name, key, value) VALUES (%s, %s, %s) "
            "ON CONFLICT (name, key) DO UPDATE SET value = huey_counters.value + excluded.value "
            "RETURNING value",
            [name, key, amount],
        )
        return cursor.fetchone()[0]

    def counter_delete(self, name, key=None):
        if key is None:
            self.execute("DELETE FROM huey_counters WHERE name = %s", [name])
        else:
            self.execute("DELETE FROM huey_counters WHERE name = %s AND key = %s", [name, key])

    def binary(self, value):
        return value


class PostgresQueueSQL(QueueSQL):
    lock_clause = " FOR UPDATE SKIP LOCKED"
    is_postgres = True

    def claim_transaction(self):
        # One UPDATE in autocommit mode is its own transaction: no BEGIN/COMMIT
        # round trips on the hottest path.
        return _NoTransaction()

    def notify(self, queues):
        statements = [("SELECT pg_notify(%s, %s)", [NOTIFY_CHANNEL, queue]) for queue in sorted(set(queues))]
        target = getattr(self.db, "obj", self.db)  # the database behind models.db's proxy
        if hasattr(target, "defer"):
            # A notification is delivered at COMMIT whenever it was sent: inside a transaction
            # it rides with the next round trip (config/database.py), outside it goes at once.
            target.defer(statements)
            return
        for sql, params in statements:
            self.execute(sql, params)

    def binary(self, value):
        import psycopg2

        return psycopg2.Binary(value)

    # -- vacuum (leader only) ---------------------------------------------------------

    def jobs_row_versions(self):
        """(live, dead, changed since the last ANALYZE) row versions of `jobs`, as the statistics
        count them (a second or so behind)."""
        cursor = self.execute(
            "SELECT n_live_tup, n_dead_tup, n_mod_since_analyze FROM pg_stat_user_tables "
            "WHERE relid = 'jobs'::regclass"
        )
        return cursor.fetchone() or (0, 0, 0)

    def vacuum_jobs(self, vacuum):
        """VACUUM (ANALYZE) `jobs`, or only ANALYZE it when `vacuum` is false, in autocommit (VACUUM
        refuses a transaction); False when another vacuum or analyze held the table."""
        notices = self.db.connection().notices
        del notices[:]
        self.execute(f"{'VACUUM (ANALYZE, SKIP_LOCKED)' if vacuum else 'ANALYZE (SKIP_LOCKED)'} jobs")
        return not any("skipping" in notice for notice in notices)


class SqliteQueueSQL(QueueSQL):
    minute_of_finalized = "strftime('%Y-%m-%d %H:%M', finalized_at)"

    def adapt(self, sql):
        return sql.replace("%s", "?")

    def claim_transaction(self):
        # BEGIN IMMEDIATE (the database's default lock type): the claim's read
        # and write happen under the one write lock, so two processes can
        # never claim the same row.
        return self.db.atomic()

    def timestamp(self, value):
        import datetime

        if value is None or isinstance(value, datetime.datetime):
            return value
        return datetime.datetime.fromisoformat(value)


class _NoTransaction:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def for_database(database):
    """The statement set for a concrete peewee database."""
    from peewee import PostgresqlDatabase

    if isinstance(database, PostgresqlDatabase):
        return PostgresQueueSQL(database)
    return SqliteQueueSQL(database)
