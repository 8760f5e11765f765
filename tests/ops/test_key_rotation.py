"""SPEC 15.1: `keys rotate` re-seals every sealed column with the newest key in
bounded batches, and an interrupted rotation resumes where it stopped."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from models.ops import OutboxDestination
from ops import key_rotation, sealing
from tests.conftest import NEWER_TEST_DATA_KEY, TEST_DATA_KEY

ROOT = Path(__file__).resolve().parents[2]
ROWS = 45
COLUMN = "outbox_destinations.secret"
GIFT_CODES = "customer_notices.secret"  # a bought gift card's code until the bot delivers it (migration 0025)
BLOCKLIST_TOKENS = "blocklist_sources.token"
GOODS_TOKENS = "goods_providers.api_token"
EMPTY = {field.context: 0 for field in sealing.sealed_columns()}  # every sealed column, nothing to re-seal


def test_rotation_knows_every_sealed_column():
    assert set(EMPTY) == {COLUMN, GIFT_CODES, BLOCKLIST_TOKENS, GOODS_TOKENS}


def populate(count=ROWS):
    secrets = {}
    for n in range(count):
        row = OutboxDestination.create(url=f"https://hooks.example.net/{n}", topics="*", secret=f"whsec_secret-{n:03d}")
        secrets[row.id] = f"whsec_secret-{n:03d}"
    return secrets


def secrets_read():
    return {row.id: row.secret for row in OutboxDestination.select().order_by(OutboxDestination.id)}


def under_newest():
    prefix = sealing.keyring().current_prefix
    return [
        row_id
        for row_id, value in OutboxDestination.select(OutboxDestination.id, OutboxDestination.secret).tuples()
        if value.text.startswith(prefix)
    ]


def test_rotation_across_two_keys_interrupted_halfway_resumes_and_then_the_old_key_can_go(database, data_key):
    secrets = populate()
    sealing.use_keys(f"{NEWER_TEST_DATA_KEY},{TEST_DATA_KEY}")
    assert key_rotation.remaining() == {**EMPTY, COLUMN: ROWS}

    rotation = key_rotation.rotate(batch_size=10)
    first, second = next(rotation), next(rotation)
    rotation.close()  # interrupted after two batches
    ids = sorted(secrets)
    assert (first, second) == ((COLUMN, 10, ids[9]), (COLUMN, 10, ids[19]))
    assert sorted(under_newest()) == ids[:20]
    assert key_rotation.remaining() == {**EMPTY, COLUMN: ROWS - 20}
    assert secrets_read() == secrets  # half rotated, every value still opens

    written_meanwhile = OutboxDestination.create(url="https://hooks.example.net/new", topics="*", secret="whsec_new")
    resumed = list(key_rotation.rotate(batch_size=10))
    assert [count for _, count, _ in resumed] == [10, 10, 5]
    assert key_rotation.remaining() == EMPTY

    sealing.use_keys(NEWER_TEST_DATA_KEY)
    assert secrets_read() == {**secrets, written_meanwhile.id: "whsec_new"}
    assert list(key_rotation.rotate(batch_size=10)) == []  # nothing left: a rerun is a no-op


def test_rotation_stops_at_a_value_no_listed_key_opens_and_names_it(database, data_key):
    secrets = populate(5)
    sealing.use_keys(NEWER_TEST_DATA_KEY)  # the old key was dropped too early
    with pytest.raises(sealing.UnsealError) as error:
        list(key_rotation.rotate(batch_size=2))
    first = min(secrets)
    assert str(error.value).startswith(f"cannot unseal {COLUMN} of row {first}: it was sealed with key")
    assert secrets[first] not in str(error.value)
    sealing.use_keys(TEST_DATA_KEY)
    assert secrets_read() == secrets  # the failed batch wrote nothing


def test_keys_rotate_command_reseals_everything_in_batches(database, database_url, data_key):
    secrets = populate(12)
    env = dict(os.environ, DATABASE_URL=database_url, APP_DATA_ENCRYPTION_KEY=f"{NEWER_TEST_DATA_KEY},{TEST_DATA_KEY}")
    result = subprocess.run(
        [sys.executable, "omniflow.py", "keys", "rotate", "--batch", "5"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:3] == [
        f"{COLUMN}: 5 re-sealed (through row {sorted(secrets)[4]})",
        f"{COLUMN}: 10 re-sealed (through row {sorted(secrets)[9]})",
        f"{COLUMN}: 12 re-sealed (through row {sorted(secrets)[11]})",
    ]
    newest = sealing.key_id(sealing.parse_keys(NEWER_TEST_DATA_KEY)[0])
    assert lines[-1] == f"every sealed value is under key {newest} (12 re-sealed now)"
    sealing.use_keys(NEWER_TEST_DATA_KEY)
    assert secrets_read() == secrets
    for secret in secrets.values():
        assert secret not in result.stdout + result.stderr


def test_keys_rotate_without_a_key_refuses_with_a_message(database, database_url):
    env = {k: v for k, v in os.environ.items() if k != "APP_DATA_ENCRYPTION_KEY"}
    result = subprocess.run(
        [sys.executable, "omniflow.py", "keys", "rotate"],
        cwd=ROOT,
        env=dict(env, DATABASE_URL=database_url),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and "APP_DATA_ENCRYPTION_KEY is not set" in result.stderr


def test_rotation_reseals_a_gift_code_waiting_for_delivery_and_leaves_delivered_ones_empty(database, data_key):
    from models.ops import CustomerNotice
    from tests.support import sales
    from tests.support.shop import rub_plan

    buyer, plan = sales.customer(), rub_plan()
    sales.paid_order(buyer, plan, kind="gift")
    sales.paid_order(buyer, plan, kind="gift")
    waiting, delivered = CustomerNotice.select().order_by(CustomerNotice.id)
    code = waiting.secret
    CustomerNotice.update(status="sent", secret=None).where(CustomerNotice.id == delivered.id).execute()
    sealing.use_keys(f"{NEWER_TEST_DATA_KEY},{TEST_DATA_KEY}")
    assert key_rotation.remaining()[GIFT_CODES] == 1
    assert [(column, count) for column, count, _ in key_rotation.rotate()] == [(GIFT_CODES, 1)]
    sealing.use_keys(NEWER_TEST_DATA_KEY)
    assert CustomerNotice.get_by_id(waiting.id).secret == code and CustomerNotice.get_by_id(delivered.id).secret is None
