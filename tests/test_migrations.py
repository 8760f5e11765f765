"""SPEC 0.5: migrations are versioned, idempotent and agree with the models."""

from peewee import Model, TextField
from psycopg2.extensions import TRANSACTION_STATUS_IDLE

import migrations
from models import ALL_MODELS
from models.jobs import Job

TYPE_FAMILIES = {
    "int": ("int", "serial"),
    "text": ("text", "char"),
    "blob": ("blob", "bytea"),
    "timestamp": ("timestamp", "datetime"),
    "bool": ("bool",),
}
FIELD_FAMILIES = {
    "AUTO": "int",
    "BIGAUTO": "int",
    "INT": "int",
    "BIGINT": "int",
    "TEXT": "text",
    "BLOB": "blob",
    "DATETIME": "timestamp",
}


def family(db_type):
    lowered = db_type.lower()
    for name, markers in TYPE_FAMILIES.items():
        if any(marker in lowered for marker in markers):
            return name
    return lowered


def schema_mismatches(database, models):
    """What differs between model definitions and the migrated tables."""
    problems = []
    for model in models:
        table = model._meta.table_name
        if not database.table_exists(table):
            problems.append(f"{table}: table missing")
            continue
        columns = {c.name: c for c in database.get_columns(table)}
        fields = {f.column_name: f for f in model._meta.sorted_fields}
        for name in sorted(set(fields) - set(columns)):
            problems.append(f"{table}.{name}: in the model, not in the migrations")
        for name in sorted(set(columns) - set(fields)):
            problems.append(f"{table}.{name}: in the migrations, not in the model")
        for name in sorted(set(fields) & set(columns)):
            field, column = fields[name], columns[name]
            expected = FIELD_FAMILIES.get(field.field_type, field.field_type.lower())
            if family(column.data_type) != expected:
                problems.append(f"{table}.{name}: type {column.data_type} vs model {field.field_type}")
            if column.null != field.null and not column.primary_key:
                problems.append(f"{table}.{name}: nullable {column.null} vs model {field.null}")
        primary = {c.name for c in columns.values() if c.primary_key}
        model_primary = {f.column_name for f in model._meta.get_primary_keys()}
        if primary != model_primary:
            problems.append(f"{table}: primary key {sorted(primary)} vs model {sorted(model_primary)}")
    return problems


def test_migrate_applies_everything_once_and_is_idempotent(database):
    assert migrations.pending(database) == []
    assert migrations.apply(database) == []
    names = [row.name for row in migrations.runner(database).History.select()]
    assert names == sorted(names) and names[0].startswith("0001_")


def test_models_and_migrations_agree(database):
    assert schema_mismatches(database, ALL_MODELS) == []


def test_a_model_that_drifted_from_the_migrations_is_reported(database):
    class DriftedJob(Model):
        note = TextField()

        class Meta:
            database = Job._meta.database
            table_name = "jobs"

    for name, field in Job._meta.fields.items():
        if name != "id":
            DriftedJob._meta.add_field(name, field.clone())
    problems = schema_mismatches(database, [DriftedJob])
    assert "jobs.note: in the model, not in the migrations" in problems


def test_fresh_database_migrates_from_nothing(tmp_path):
    from config.database import open_database
    from config.settings import parse_database_url

    database = open_database(parse_database_url(f"sqlite:///{tmp_path / 'fresh.sqlite3'}"))
    everything = [
        "0001_job_queue",
        "0002_commerce_fulfillment",
        "0003_hot_fulfillment_updates",
        "0004_operators",
        "0005_dead_letter_index",
        "0006_login_failures",
        "0007_hot_entitlement_updates",
        "0010_login_failures_per_address",
        "0011_catalogue_wallet",
        "0012_outbox_publisher",
        "0013_retention",
        "0014_bot",
        "0016_back_office",
        "0017_checkout_session_orders",
        "0018_commerce_passes",
        "0019_customer_notice_delivery",
        "0020_bot_loops",
        "0021_refunds",
        "0023_channel_members",
        "0025_gift_code_delivery",
        "0026_late_payment_polls",
        "0029_worker_declared_work",
        "0032_webhook_verdicts",
        "0033_operators_write",
        "0034_finished_outbox_events",
        "0035_jobs_autovacuum",
        "0036_blocklists",
        "0037_telemetry",
        "0038_anomaly_rules_shop_ratings",
        "0039_digital_goods",
        "0040_campaign_audiences",
        "0041_bulk_actions",
        "0043_order_payment_lists",
        "0045_name_search_code_revocation",
    ]
    assert migrations.pending(database) == everything
    assert migrations.apply(database) == everything
    assert migrations.apply(database) == []
    database.close()


INDEX = "payment_intents_pending_created"


def index_valid(database):
    return database.execute_sql(
        "SELECT (SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(%s))", (INDEX,)
    ).fetchone()[0]


def rerun_0026(database, monkeypatch):
    """Apply 0026 again through the runner; returns (statement, ran outside a transaction) of what it sent."""
    sent = []
    execute_sql = database.execute_sql

    def watched(sql, params=None, *args, **kwargs):
        # BEGIN waits to go out with the transaction's first statement (config/database.py): ask both sides.
        idle = (
            not database.in_transaction() and database.connection().get_transaction_status() == TRANSACTION_STATUS_IDLE
        )
        sent.append((sql, idle))
        return execute_sql(sql, params, *args, **kwargs)

    history = migrations.runner(database).History
    history.delete().where(history.name == "0026_late_payment_polls").execute()
    monkeypatch.setattr(database, "execute_sql", watched)
    try:
        assert migrations.apply(database) == ["0026_late_payment_polls"]
    finally:
        monkeypatch.undo()
    return [(sql, idle) for sql, idle in sent if INDEX in sql and not sql.startswith("SELECT")]


def test_an_index_on_a_growing_table_is_built_concurrently_outside_a_transaction_on_postgresql(
    pg_database, monkeypatch
):
    pg_database.execute_sql(f"DROP INDEX {INDEX}")
    built = rerun_0026(pg_database, monkeypatch)
    assert built == [
        (
            f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {INDEX} ON payment_intents (created_at) WHERE status = 'pending'",
            True,
        )
    ]
    assert index_valid(pg_database) is True


def test_an_interrupted_concurrent_build_is_dropped_and_built_again(pg_database, monkeypatch):
    # What a build killed halfway leaves: the index, marked invalid (PostgreSQL neither uses nor maintains it).
    pg_database.execute_sql(f"UPDATE pg_index SET indisvalid = false WHERE indexrelid = '{INDEX}'::regclass")
    assert index_valid(pg_database) is False
    built = rerun_0026(pg_database, monkeypatch)
    assert [(sql.split(INDEX)[0], idle) for sql, idle in built] == [
        ("DROP INDEX CONCURRENTLY IF EXISTS ", True),
        ("CREATE INDEX CONCURRENTLY IF NOT EXISTS ", True),
    ]
    assert index_valid(pg_database) is True
    assert rerun_0026(pg_database, monkeypatch)[0][0].startswith("CREATE INDEX CONCURRENTLY IF NOT EXISTS")
    assert index_valid(pg_database) is True
