"""Workers name the job kinds and periodic passes they run in their heartbeat row (SPEC 1.11).

The leader reads them to find waiting rows no running worker will take (a
kind from a newer release, a pass no worker's configuration registers).
JSON arrays; a worker of an earlier release writes neither and is read as
declaring nothing.
"""

UP = [
    "ALTER TABLE job_workers ADD COLUMN kinds TEXT NOT NULL DEFAULT '[]'",
    "ALTER TABLE job_workers ADD COLUMN passes TEXT NOT NULL DEFAULT '[]'",
]
DOWN = [
    "ALTER TABLE job_workers DROP COLUMN passes",
    "ALTER TABLE job_workers DROP COLUMN kinds",
]


def up(migrator, db):
    for statement in UP:
        db.execute_sql(statement)


def down(migrator, db):
    for statement in DOWN:
        db.execute_sql(statement)
