"""The dead-letter view's own index (SPEC 4.1).

`GET /v1/admin/jobs?state=dead_letter` asks for the newest discarded or
cancelled jobs. Without this index PostgreSQL walks the primary key
backwards and filters, which is quick while dead letters are common among
recent jobs and reads most of the table when they are rare or old; with it,
the 50 newest dead letters are the first 50 entries of a small index.
"""


def up(migrator, db):
    db.execute_sql("CREATE INDEX jobs_dead_letter ON jobs (id) WHERE state IN ('discarded', 'cancelled')")


def down(migrator, db):
    db.execute_sql("DROP INDEX jobs_dead_letter")
