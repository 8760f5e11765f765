"""Failed sign-ins, per username (known or not), so guessing passwords is throttled.

Kept for the throttle's window only; a success clears the name's rows.
"""

from peewee import PostgresqlDatabase


def up(migrator, db):
    key = "BIGSERIAL PRIMARY KEY" if isinstance(db, PostgresqlDatabase) else "INTEGER PRIMARY KEY AUTOINCREMENT"
    db.execute_sql(
        f"""CREATE TABLE operator_login_failures (
            id {key},
            username TEXT NOT NULL,
            failed_at TIMESTAMP NOT NULL
        )"""
    )
    db.execute_sql("CREATE INDEX operator_login_failures_recent ON operator_login_failures (username, failed_at)")


def down(migrator, db):
    db.execute_sql("DROP TABLE IF EXISTS operator_login_failures")
