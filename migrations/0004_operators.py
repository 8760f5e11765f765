"""Operators of the panel (SPEC 4.5): accounts with permissions and sessions.

A password is kept only as a slow salted hash; a session only as the SHA-256
of its token, so a copy of the database opens no session.
"""

from peewee import PostgresqlDatabase

POSTGRES = [
    """CREATE TABLE operators (
        id BIGSERIAL PRIMARY KEY,
        username TEXT NOT NULL UNIQUE,
        password_hash TEXT NOT NULL,
        permissions TEXT NOT NULL DEFAULT '[]',
        created_at TIMESTAMP NOT NULL,
        disabled_at TIMESTAMP
    )""",
    """CREATE TABLE operator_sessions (
        token_hash TEXT PRIMARY KEY,
        operator_id BIGINT NOT NULL REFERENCES operators (id),
        created_at TIMESTAMP NOT NULL,
        expires_at TIMESTAMP NOT NULL
    )""",
    "CREATE INDEX operator_sessions_expiry ON operator_sessions (expires_at)",
]

SQLITE = [statement.replace("BIGSERIAL PRIMARY KEY", "INTEGER PRIMARY KEY AUTOINCREMENT") for statement in POSTGRES]


def up(migrator, db):
    for statement in POSTGRES if isinstance(db, PostgresqlDatabase) else SQLITE:
        db.execute_sql(statement)


def down(migrator, db):
    db.execute_sql("DROP TABLE IF EXISTS operator_sessions")
    db.execute_sql("DROP TABLE IF EXISTS operators")
