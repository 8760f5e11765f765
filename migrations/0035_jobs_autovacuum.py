"""Autovacuum settings of `jobs`, for installations where autovacuum is on.

Every claim and every completion writes a new version of a job row, and
`state` is in the table's indexes, so none of those updates is HOT: a burst
of jobs leaves two dead versions per job behind. PostgreSQL's defaults wait
for 20% of the table to be dead (and 10% changed for an ANALYZE); on a table
that keeps its history that is hundreds of thousands of dead entries the
claim steps over. These thresholds match the leader's own vacuum
(jobs/engine/maintenance.py, which also covers autovacuum being off): 5% of
the live rows, at least 20 000. SQLite reuses its free pages and has no
such setting.
"""

from peewee import PostgresqlDatabase

SETTINGS = {
    "autovacuum_vacuum_scale_factor": "0.05",
    "autovacuum_vacuum_threshold": "20000",
    "autovacuum_analyze_scale_factor": "0.05",
    "autovacuum_analyze_threshold": "20000",
}


def up(migrator, db):
    if isinstance(db, PostgresqlDatabase):
        db.execute_sql(f"ALTER TABLE jobs SET ({', '.join(f'{k} = {v}' for k, v in SETTINGS.items())})")


def down(migrator, db):
    if isinstance(db, PostgresqlDatabase):
        db.execute_sql(f"ALTER TABLE jobs RESET ({', '.join(SETTINGS)})")
