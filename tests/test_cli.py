"""The CLI an operator uses on a worker: migrate, jobs list|retry|cancel."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from jobs import insert
from models.base import utcnow
from models.jobs import Job
from models.ops import AuditEvent

ROOT = Path(__file__).resolve().parents[1]


def cli(database_url, *args):
    env = dict(os.environ, DATABASE_URL=database_url)
    return subprocess.run(
        [sys.executable, "omniflow.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )


def test_migrate_twice_reports_up_to_date(database, database_url):
    result = cli(database_url, "migrate")
    assert result.returncode == 0 and "up to date" in result.stdout


def test_jobs_list_shows_rows_and_states_and_dead_letter_filter(database, database_url):
    insert("t_record", {"n": 1})
    dead = insert("t_fail", {}).job_id
    Job.update(state="discarded", finalized_at=utcnow(), attempt=3).where(Job.id == dead).execute()
    listing = cli(database_url, "jobs", "list")
    assert listing.returncode == 0
    assert "t_record" in listing.stdout and "available" in listing.stdout and "discarded" in listing.stdout
    dead_letter = cli(database_url, "jobs", "list", "--state", "dead_letter")
    assert "t_fail" in dead_letter.stdout and "t_record" not in dead_letter.stdout.split("totals:")[0]


def test_jobs_retry_and_cancel_follow_the_state_rules(database, database_url):
    job_id = insert("t_record", {"n": 1}).job_id
    cancelled = cli(database_url, "jobs", "cancel", str(job_id))
    assert cancelled.returncode == 0 and "cancelled" in cancelled.stdout
    again = cli(database_url, "jobs", "cancel", str(job_id))
    assert again.returncode == 1 and "not allowed" in again.stderr
    retried = cli(database_url, "jobs", "retry", str(job_id))
    assert retried.returncode == 0 and "available" in retried.stdout


def test_jobs_retry_and_cancel_are_audited_with_the_cli_as_actor_and_a_refusal_writes_none(database, database_url):
    job_id = insert("t_record", {"n": 1}).job_id
    assert cli(database_url, "jobs", "cancel", str(job_id), "--reason", "stuck behind a bad deploy").returncode == 0
    assert cli(database_url, "jobs", "cancel", str(job_id)).returncode == 1  # cancelled already: refused
    assert cli(database_url, "jobs", "retry", str(job_id)).returncode == 0
    trail = [(a.action, a.actor, a.reason, a.subject_id) for a in AuditEvent.select().order_by(AuditEvent.id)]
    assert trail == [
        ("job.cancelled", "cli", "stuck behind a bad deploy", str(job_id)),
        ("job.retried", "cli", None, str(job_id)),
    ]


@pytest.mark.parametrize("args", [("jobs", "list", "--state", "bogus"), ("jobs", "retry", "999999")])
def test_bad_input_is_refused_with_a_message(database, database_url, args):
    result = cli(database_url, *args)
    assert result.returncode in (1, 2) and result.stderr.strip()
    assert "Traceback" not in result.stderr
