"""Failed sign-ins are counted per username *and* client address, so five wrong
passwords typed somewhere else lock that place out, not the operator.

The rows kept so far carry no address; they only ever mattered for the
15-minute window, so they are dropped rather than given a made-up one.
"""


def up(migrator, db):
    db.execute_sql("DELETE FROM operator_login_failures")
    db.execute_sql("ALTER TABLE operator_login_failures ADD COLUMN client_address TEXT NOT NULL DEFAULT ''")
    db.execute_sql("DROP INDEX operator_login_failures_recent")
    db.execute_sql(
        "CREATE INDEX operator_login_failures_recent ON operator_login_failures (username, client_address, failed_at)"
    )


def down(migrator, db):
    db.execute_sql("DROP INDEX operator_login_failures_recent")
    db.execute_sql("ALTER TABLE operator_login_failures DROP COLUMN client_address")
    db.execute_sql("CREATE INDEX operator_login_failures_recent ON operator_login_failures (username, failed_at)")
