"""Real databases for tests: a SQLite file per test, one PostgreSQL database per session.

The PostgreSQL server comes from OMNIFLOW_TEST_PG_URL (a URL of any database
on the server; default: the local server). A test database is created for the
session, migrated once, truncated before each test, and dropped at the end.
"""

import os
import uuid
from urllib.parse import urlsplit, urlunsplit

import psycopg2

import migrations
from config.database import bind_database
from config.settings import parse_database_url

PG_SERVER_URL = os.environ.get("OMNIFLOW_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres")

TEST_TABLES_SQL = [
    """CREATE TABLE IF NOT EXISTS test_executions (
        id {auto} PRIMARY KEY,
        job_id BIGINT NOT NULL,
        attempt INTEGER NOT NULL,
        tag TEXT NOT NULL DEFAULT '',
        pid INTEGER NOT NULL,
        started_at DOUBLE PRECISION NOT NULL,
        finished_at DOUBLE PRECISION
    )""",
    """CREATE TABLE IF NOT EXISTS test_orders (
        id {auto} PRIMARY KEY,
        status TEXT NOT NULL
    )""",
]
KEEP_TABLES = ("schema_migrations", "maintenance_state")


def _with_database(url, name):
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


def admin_connection():
    connection = psycopg2.connect(PG_SERVER_URL)
    connection.autocommit = True
    return connection


def create_pg_database():
    name = f"omniflow_test_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    connection = admin_connection()
    try:
        connection.cursor().execute(f'CREATE DATABASE "{name}"')
    finally:
        connection.close()
    return _with_database(PG_SERVER_URL, name)


def drop_pg_database(url):
    name = urlsplit(url).path.lstrip("/")
    connection = admin_connection()
    try:
        cursor = connection.cursor()
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            [name],
        )
        cursor.execute(f'DROP DATABASE IF EXISTS "{name}"')
    finally:
        connection.close()


def create_test_tables(database, postgres):
    auto = "BIGSERIAL" if postgres else "INTEGER"
    for statement in TEST_TABLES_SQL:
        database.execute_sql(statement.format(auto=auto))


def bind(url, pool_size=20):
    return bind_database(parse_database_url(url), pool_size=pool_size)


def prepare(url, postgres):
    """Bind models.db to `url`, migrate it and create the test tables."""
    database = bind(url)
    migrations.apply(database)
    create_test_tables(database, postgres)
    return database


def truncate(database):
    """Empty every table but the migration history; maintenance mode off."""
    tables = [table for table in database.get_tables() if table not in KEEP_TABLES]
    database.execute_sql(f"TRUNCATE {', '.join(tables)} RESTART IDENTITY CASCADE")
    database.execute_sql("UPDATE maintenance_state SET active = FALSE, since = NULL, reason = NULL, set_by = NULL")
