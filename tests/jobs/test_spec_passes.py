"""SPEC 5.1's table of periodic passes, read against what a worker registers: every
row is a registered pass with the table's interval and timeout when the worker has
what the pass needs (SPEC 5.2), and each conditional one is left out, with its
reason, when it does not. Read from a fresh `python` process, as a worker starts,
so no other test's declarations are in the registry."""

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import TEST_DATA_KEY

ROOT = Path(__file__).resolve().parents[2]
MINUTE, HOUR = 60, 3600
INTERVAL = "interval"  # the run is asked to stop when its next one is due
# SPEC 5.1: task -> (interval in seconds, timeout).
SPEC_5_1 = {
    "commerce_maintenance": (MINUTE, INTERVAL),
    "payment_reconcile": (MINUTE, INTERVAL),
    "renewal": (MINUTE, 5 * MINUTE),
    "fulfillment_reconcile": (15 * MINUTE, INTERVAL),
    "fulfillment_revive": (5 * MINUTE, INTERVAL),
    "lifecycle_sweep": (5 * MINUTE, INTERVAL),
    "anomaly_evaluation": (15 * MINUTE, INTERVAL),
    "campaign_expansion": (MINUTE, 5 * MINUTE),
    "bulk_actions": (15, 5 * MINUTE),
    "retention": (HOUR, INTERVAL),  # APP_RETENTION_INTERVAL_HOURS, 1 h by default
    "goods_delivery_schedule": (30, INTERVAL),
    "backup": (24 * HOUR, None),  # APP_BACKUP_INTERVAL_HOURS, 24 h by default
}
# SPEC 15.2: the outbox publisher's dispatcher is a periodic pass too (not in 5.1's table).
BEYOND_THE_TABLE = {"outbox_publish"}
# SPEC 5.2: what each conditional pass needs.
NEEDS_THE_KEY = {"goods_delivery_schedule", "anomaly_evaluation", "bulk_actions", "outbox_publish", "backup"}

PROBE = """
import json, omniflow
from config.settings import load_settings
from jobs import huey
omniflow.load_job_kinds(load_settings())
registered, left_out = huey.periodic_registrations()
print(json.dumps({
    "passes": {name: [getattr(spec.schedule, "seconds", None), spec.timeout]
               for name, spec in huey.periodic_schedules.items()},
    "left_out": left_out,
}))
"""


def registry(tmp_path, **env):
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("APP_", "DATABASE_"))}
    environment["DATABASE_URL"] = f"sqlite:///{tmp_path / 'probe.db'}"
    answer = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, env={**environment, **env}, capture_output=True, text=True, timeout=60
    )
    assert answer.returncode == 0, answer.stderr
    return json.loads(answer.stdout.strip().splitlines()[-1])


def test_every_pass_of_spec_5_1_is_registered_with_its_interval_and_timeout(tmp_path):
    found = registry(tmp_path, APP_DATA_ENCRYPTION_KEY=TEST_DATA_KEY, APP_BACKUP_DIR=str(tmp_path / "backups"))
    assert found["left_out"] == {}
    assert set(found["passes"]) == set(SPEC_5_1) | BEYOND_THE_TABLE
    for name, (interval, timeout) in SPEC_5_1.items():
        assert found["passes"][name] == [interval, timeout], name


def test_without_the_key_the_passes_that_need_it_are_left_out_with_the_reason_and_the_rest_run(tmp_path):
    found = registry(tmp_path, APP_BACKUP_DIR=str(tmp_path / "backups"))
    assert set(found["left_out"]) == NEEDS_THE_KEY
    assert all("APP_DATA_ENCRYPTION_KEY" in reason for reason in found["left_out"].values()), found["left_out"]
    assert set(found["passes"]) == set(SPEC_5_1) - NEEDS_THE_KEY
