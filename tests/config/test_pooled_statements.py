"""Nothing the application sends through DATABASE_URL needs a session, so every pooled connection can
go through a transaction-pooling PgBouncer (docs/deploying.md): no LISTEN but the worker's listener
(which connects to DATABASE_DIRECT_URL), no session advisory lock, no server-side prepared statement,
no SET that outlives its transaction (SET LOCAL only)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NOT_APPLICATION = {".venv", "tests", "bench", "fakes", "node_modules", "var", "site"}
SESSION_ONLY = {
    "LISTEN": re.compile(r"""["'][^"'\n]*\bLISTEN\s"""),
    "session advisory lock": re.compile(r"pg_(try_)?advisory_lock"),
    "prepared statement": re.compile(r"\bPREPARE\s+\w+\s+(\(|AS\b)"),
    "SET outside a transaction": re.compile(r"""(["']|;\s*)SET\s+(?!LOCAL\b|TRANSACTION\b)\w+\s*(=|TO\b)"""),
}
# The only place each may appear, and why it may.
ALLOWED = {("jobs/engine/notifier.py", "LISTEN")}  # on its own session connection (config.database.session_dsn)


def application_files():
    for path in ROOT.rglob("*.py"):
        relative = path.relative_to(ROOT)
        if not NOT_APPLICATION.intersection(relative.parts[:-1]):
            yield relative.as_posix(), path.read_text()


def test_nothing_sent_through_the_pooled_connection_needs_a_session():
    found = [
        (name, what, number)
        for name, text in application_files()
        for number, line in enumerate(text.splitlines(), 1)
        for what, pattern in SESSION_ONLY.items()
        if pattern.search(line)
    ]
    assert {(name, what) for name, what, _ in found} >= ALLOWED  # the listener's LISTEN is seen
    assert [place for place in found if place[:2] not in ALLOWED] == []


def test_the_check_recognises_what_it_looks_for():
    samples = {
        "LISTEN": 'cursor.execute(f"LISTEN {channel}")',
        "session advisory lock": 'db.execute_sql("SELECT pg_advisory_lock(42)")',
        "prepared statement": 'db.execute_sql("PREPARE claim (int) AS SELECT 1")',
        "SET outside a transaction": "db.execute_sql(\"SET statement_timeout = '5s'\")",
    }
    assert {what for what, line in samples.items() if SESSION_ONLY[what].search(line)} == set(samples)
    assert not SESSION_ONLY["SET outside a transaction"].search('db.execute_sql("SET LOCAL lock_timeout = 5")')
    assert not SESSION_ONLY["SET outside a transaction"].search('"UPDATE jobs SET state = %s"')
