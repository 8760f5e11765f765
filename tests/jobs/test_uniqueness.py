"""SPEC 1.4: a duplicate insert collapses into the existing job in the kind's
unique states, and is a new job once the existing one left them."""

import subprocess
import sys
import threading

import pytest

from jobs import JobInsert, client, insert, insert_many
from models.jobs import Job
from tests.support.direct import run_next

THROUGH_COMPLETED_HOLD = ["available", "scheduled", "running", "retryable", "completed"]


def put_in_state(job_id, state):
    finalized = state in ("completed", "discarded", "cancelled")
    key = Job.get_by_id(job_id).unique_key
    spec = client.kinds.get(Job.get_by_id(job_id).kind)
    keep = state in spec.unique_states
    from models.base import utcnow

    Job.update(state=state, finalized_at=utcnow() if finalized else None, unique_key=key if keep else None).where(
        Job.id == job_id
    ).execute()


@pytest.mark.parametrize("state", THROUGH_COMPLETED_HOLD)
def test_duplicate_collapses_while_existing_job_is_in_a_unique_state(database, state):
    first = insert("t_unique", {"operationId": 7})
    put_in_state(first.job_id, state)
    second = insert("t_unique", {"operationId": 7})
    assert second.skipped_as_duplicate
    assert second.job_id == first.job_id
    assert Job.select().count() == 1


@pytest.mark.parametrize("state", ["discarded", "cancelled"])
def test_duplicate_is_a_new_job_once_the_existing_one_is_discarded_or_cancelled(database, state):
    first = insert("t_unique", {"operationId": 7})
    put_in_state(first.job_id, state)
    second = insert("t_unique", {"operationId": 7})
    assert not second.skipped_as_duplicate
    assert second.job_id != first.job_id


def test_periodic_style_uniqueness_releases_the_key_when_the_run_completes(database):
    first = insert("t_unique_active", {"task": "sweep"})
    assert insert("t_unique_active", {"task": "sweep"}).skipped_as_duplicate
    assert run_next() == first.job_id
    assert Job.get_by_id(first.job_id).state == "completed"
    again = insert("t_unique_active", {"task": "sweep"})
    assert not again.skipped_as_duplicate


def test_completion_through_the_worker_keeps_the_key_for_through_completed_kinds(database):
    first = insert("t_unique", {"operationId": 1})
    assert run_next() == first.job_id
    assert Job.get_by_id(first.job_id).state == "completed"
    assert insert("t_unique", {"operationId": 1}).skipped_as_duplicate


def test_different_args_are_different_jobs(database):
    a = insert("t_unique", {"operationId": 1})
    b = insert("t_unique", {"operationId": 2})
    assert a.job_id != b.job_id and not b.skipped_as_duplicate


def test_key_ignores_argument_order(database):
    first = insert("t_unique", {"operationId": 1, "source": "panel"})
    second = insert("t_unique", {"source": "panel", "operationId": 1})
    assert second.skipped_as_duplicate and second.job_id == first.job_id


def test_kinds_without_uniqueness_never_collapse(database):
    a = insert("t_record", {"n": 1})
    b = insert("t_record", {"n": 1})
    assert a.job_id != b.job_id and not b.skipped_as_duplicate
    assert Job.get_by_id(a.job_id).unique_key is None


def test_duplicates_inside_one_multi_row_insert_collapse(database):
    results = insert_many(
        [
            JobInsert("t_unique", {"operationId": 5}),
            JobInsert("t_unique", {"operationId": 6}),
            JobInsert("t_unique", {"operationId": 5}),
        ]
    )
    assert [r.skipped_as_duplicate for r in results] == [False, False, True]
    assert results[0].job_id == results[2].job_id
    assert Job.select().count() == 2


def test_multi_row_insert_reports_existing_jobs_as_skipped(database):
    existing = insert("t_unique", {"operationId": 5})
    results = insert_many([JobInsert("t_unique", {"operationId": n}) for n in (4, 5, 6)])
    assert [r.skipped_as_duplicate for r in results] == [False, True, False]
    assert results[1].job_id == existing.job_id


def test_concurrent_duplicate_inserts_from_threads_make_one_job(database):
    barrier = threading.Barrier(8)
    results, errors = [], []

    def worker():
        try:
            barrier.wait()
            for _ in range(10):
                results.append(insert("t_unique", {"operationId": 42}))
        except Exception as exc:  # surfaced below
            errors.append(exc)
        finally:
            from models.base import db

            db.close()

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert Job.select().count() == 1
    assert len({r.job_id for r in results}) == 1
    assert sum(not r.skipped_as_duplicate for r in results) == 1


INSERTER = """
import sys
from tests.support import backends, kinds
from jobs import insert
backends.bind(sys.argv[1])
fresh = sum(not insert("t_unique", {"operationId": 99}).skipped_as_duplicate for _ in range(20))
print(fresh)
"""


def test_concurrent_duplicate_inserts_from_processes_make_one_job(database, database_url):
    processes = [
        subprocess.Popen([sys.executable, "-c", INSERTER, database_url], stdout=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    fresh = sum(int(p.communicate(timeout=60)[0].strip()) for p in processes)
    assert all(p.returncode == 0 for p in processes)
    assert fresh == 1
    assert Job.select().count() == 1


def test_retrying_a_finished_job_while_a_duplicate_is_queued_is_rejected(database):
    from jobs import JobMutationRejected

    first = insert("t_unique", {"operationId": 3})
    client.cancel(first.job_id)
    second = insert("t_unique", {"operationId": 3})
    assert not second.skipped_as_duplicate
    with pytest.raises(JobMutationRejected):
        client.retry(first.job_id)
    assert Job.get_by_id(first.job_id).state == "cancelled"
