"""SPEC 12.3, 15.1: secrets at rest are sealed with authenticated encryption under
APP_DATA_ENCRYPTION_KEY, carry the key's id, and a value that cannot be
unsealed is named (column and row) without being shown."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from config.settings import ConfigError, load_settings
from models.base import db
from models.ops import OutboxDestination
from ops import sealing
from tests.conftest import NEWER_TEST_DATA_KEY, TEST_DATA_KEY

ROOT = Path(__file__).resolve().parents[2]
SECRET = "whsec_c2VjcmV0LXRoYXQtbXVzdC1uZXZlci1iZS1zaG93bg=="


def destination(secret=SECRET):
    return OutboxDestination.create(url="https://hooks.example.net/in", topics="*", secret=secret)


def stored(destination_id):
    return db.execute_sql(
        "SELECT secret FROM outbox_destinations WHERE id = " + db.obj.param, [destination_id]
    ).fetchone()[0]


def test_a_sealed_value_round_trips_and_only_its_seal_is_stored(database, data_key):
    row = destination()
    raw = stored(row.id)
    newest = sealing.key_id(sealing.parse_keys(TEST_DATA_KEY)[0])
    assert raw.startswith(f"v1:{newest}:") and "c2VjcmV0" not in raw and SECRET not in raw
    assert OutboxDestination.get_by_id(row.id).secret == SECRET
    (as_tuple,) = OutboxDestination.select(OutboxDestination.secret).where(OutboxDestination.id == row.id).tuples()
    assert repr(as_tuple[0]) == "<sealed>" and SECRET not in str(as_tuple)
    assert sealing.unseal(as_tuple[0], OutboxDestination.secret.context, row.id) == SECRET
    assert destination().secret == SECRET and stored(row.id) != stored(row.id + 1)  # a fresh nonce each time


def test_a_row_saved_again_keeps_its_seal_and_a_changed_value_is_sealed_anew(database, data_key):
    row = OutboxDestination.get_by_id(destination().id)
    before = stored(row.id)
    row.active = False
    row.save()
    assert stored(row.id) == before
    row.secret = SECRET + "x"
    row.save()
    assert stored(row.id) != before and OutboxDestination.get_by_id(row.id).secret == SECRET + "x"


def test_a_wrong_key_names_the_column_and_row_and_never_the_value(database, data_key):
    row_id = destination().id
    sealing.use_keys(NEWER_TEST_DATA_KEY)
    with pytest.raises(sealing.UnsealError) as error:
        OutboxDestination.get_by_id(row_id).secret
    message = str(error.value)
    old_id = sealing.key_id(sealing.parse_keys(TEST_DATA_KEY)[0])
    assert message == (
        f"cannot unseal outbox_destinations.secret of row {row_id}: "
        f"it was sealed with key {old_id}, which APP_DATA_ENCRYPTION_KEY does not hold"
    )
    for leaked in (SECRET, stored(row_id), TEST_DATA_KEY, NEWER_TEST_DATA_KEY):
        assert leaked not in message and leaked not in repr(error.value)


def test_an_altered_value_does_not_unseal_and_says_so(database, data_key):
    row_id = destination().id
    raw = stored(row_id)
    tampered = raw[:-6] + ("A" if raw[-6] != "A" else "B") + raw[-5:]
    db.execute_sql(
        f"UPDATE outbox_destinations SET secret = {db.obj.param} WHERE id = {db.obj.param}", [tampered, row_id]
    )
    with pytest.raises(
        sealing.UnsealError, match=f"outbox_destinations.secret of row {row_id}: it does not authenticate"
    ):
        OutboxDestination.get_by_id(row_id).secret


def test_a_value_moved_to_another_sealed_column_does_not_unseal_there(data_key):
    sealed = sealing.seal(SECRET, "outbox_destinations.secret")
    with pytest.raises(sealing.UnsealError, match="does not authenticate"):
        sealing.unseal(sealed, "payment_providers.secret")
    assert sealing.unseal(sealed, "outbox_destinations.secret") == SECRET


def test_without_a_key_nothing_is_sealed_and_reading_names_what_is_missing(database, data_key):
    row_id = destination().id
    sealing.use_keys(None)
    with pytest.raises(sealing.SealingUnavailable, match="APP_DATA_ENCRYPTION_KEY is not set"):
        destination()
    with pytest.raises(sealing.UnsealError) as error:
        OutboxDestination.get_by_id(row_id).secret
    assert (
        str(error.value)
        == f"cannot unseal outbox_destinations.secret of row {row_id}: APP_DATA_ENCRYPTION_KEY is not set"
    )


def test_any_listed_key_unseals_and_the_first_one_seals(database, data_key):
    old_row = destination().id
    sealing.use_keys(f"{NEWER_TEST_DATA_KEY}, {TEST_DATA_KEY}")
    new_row = destination().id
    newest = sealing.key_id(sealing.parse_keys(NEWER_TEST_DATA_KEY)[0])
    assert stored(new_row).startswith(f"v1:{newest}:") and not stored(old_row).startswith(f"v1:{newest}:")
    assert {OutboxDestination.get_by_id(i).secret for i in (old_row, new_row)} == {SECRET}


@pytest.mark.parametrize(
    "value, problem",
    [
        ("short", "key 1 of 1 is not 32 bytes of base64"),
        (f"{TEST_DATA_KEY},,{NEWER_TEST_DATA_KEY}", "key 2 of 3 is empty"),
        (f"{TEST_DATA_KEY},{TEST_DATA_KEY}", "key 2 of 2 repeats an earlier key"),
        (TEST_DATA_KEY[:-4] + "!!!=", "key 1 of 1 is not 32 bytes of base64"),
    ],
)
def test_a_malformed_key_stops_the_settings_naming_the_variable_never_the_value(value, problem):
    with pytest.raises(ConfigError) as error:
        load_settings({"APP_DATA_ENCRYPTION_KEY": value})
    assert error.value.variable == "APP_DATA_ENCRYPTION_KEY" and problem in str(error.value)
    assert all(part not in str(error.value) for part in value.split(",") if part)


def test_a_process_with_a_malformed_key_exits_at_start_with_the_variable_named(tmp_path):
    env = dict(
        os.environ,
        DATABASE_URL=f"sqlite:///{tmp_path / 'x.sqlite3'}",
        APP_DATA_ENCRYPTION_KEY="not-a-key-at-all",
    )
    result = subprocess.run(
        [sys.executable, "omniflow.py", "migrate"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert result.returncode == 2
    assert "APP_DATA_ENCRYPTION_KEY: key 1 of 1 is not 32 bytes of base64" in result.stderr
    assert "not-a-key-at-all" not in result.stderr and "Traceback" not in result.stderr


def test_generated_keys_are_accepted_and_every_sealed_column_registers_itself():
    keys = sealing.parse_keys(f"{sealing.generate_key()},{sealing.generate_key()}")
    assert len(keys) == 2 and all(len(key) == sealing.KEY_BYTES for key in keys)
    assert "outbox_destinations.secret" in [field.context for field in sealing.sealed_columns()]
