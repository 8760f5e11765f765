"""SPEC 15.2: `omniflow.py outbox destinations add|list|remove` — a generated secret
is printed once, the list never shows it, and every change is audited."""

import os
import re
import subprocess
import sys
from pathlib import Path

from models.ops import AuditEvent, OutboxDestination
from ops import outbox
from tests.conftest import TEST_DATA_KEY

ROOT = Path(__file__).resolve().parents[2]
URL = "https://hooks.example.net/in/path-token-91c2"


def cli(database_url, *args, key=TEST_DATA_KEY):
    env = dict(os.environ, DATABASE_URL=database_url, APP_DATA_ENCRYPTION_KEY=key)
    return subprocess.run(
        [sys.executable, "omniflow.py", "outbox", "destinations", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_add_prints_a_generated_secret_once_list_never_shows_it_and_remove_is_audited(database, database_url, data_key):
    added = cli(database_url, "add", URL, "--topics", "order.paid,wallet.credited")
    assert added.returncode == 0, added.stderr
    secret = re.search(r"signing secret \(shown once, keep it for the receiver\): (whsec_\S+)", added.stdout).group(1)
    outbox.check_secret(secret)
    (row,) = OutboxDestination.select()
    assert row.secret == secret and row.url == URL and outbox.topics_of(row.topics) == ["order.paid", "wallet.credited"]

    given = outbox.generate_secret()
    second = cli(database_url, "add", "https://second.example.net/hooks", "--topics", "*", "--secret", given)
    assert second.returncode == 0 and given not in second.stdout and "signing secret" not in second.stdout

    listing = cli(database_url, "list")
    assert listing.returncode == 0
    assert "https://hooks.example.net/…" in listing.stdout and "order.paid,wallet.credited" in listing.stdout
    for leaked in (secret, given, "path-token-91c2"):
        assert leaked not in listing.stdout

    removed = cli(database_url, "remove", str(row.id), "--reason", "receiver retired")
    assert removed.returncode == 0 and f"destination {row.id} removed" in removed.stdout
    assert "https://hooks.example.net" not in cli(database_url, "list").stdout
    again = cli(database_url, "remove", str(row.id))
    assert again.returncode == 1 and "does not exist" in again.stderr
    audits = [(a.action, a.actor, a.reason) for a in AuditEvent.select().order_by(AuditEvent.id)]
    assert audits == [
        ("outbox.destination.added", "cli", "added from the command line"),
        ("outbox.destination.added", "cli", "added from the command line"),
        ("outbox.destination.removed", "cli", "receiver retired"),
    ]


def test_bad_input_and_a_missing_key_are_refused_with_a_message(database, database_url):
    for args, message in (
        (("add", "ftp://x", "--topics", "*"), "invalid_url"),
        (("add", URL, "--topics", "Bad Topic"), "invalid_topics"),
        (("add", URL, "--topics", "*", "--secret", "whsec_c2hvcnQ="), "invalid_secret"),
        (("add", "http://169.254.169.254/latest/meta-data/", "--topics", "*"), "private_destination"),
    ):
        result = cli(database_url, *args)
        assert result.returncode == 2 and message in result.stderr and "Traceback" not in result.stderr
    missing = cli(database_url, "add", URL, "--topics", "*", key="")
    assert missing.returncode == 2 and "APP_DATA_ENCRYPTION_KEY is not set" in missing.stderr
    assert OutboxDestination.select().count() == 0
