"""Every integration test runs twice: on a SQLite file and on PostgreSQL."""

import pytest

from models.base import db
from ops import sealing
from tests.support import (
    backends,
    kinds,  # noqa: F401  (declares the test job kinds on jobs.huey)
)
from tests.support.ledger import ledger_problems

DEFAULT_PROCESS_SECONDS = 10


def pytest_collection_modifyitems(items):
    """Ordering for the parallel run (scripts/test.sh): tests that run real
    worker processes start first, longest first (by the seconds a test declares
    with `@pytest.mark.processes(seconds=…)`), so the run does not end waiting
    on a long one started last."""

    def seconds(item):
        marker = item.get_closest_marker("processes")
        return marker.kwargs.get("seconds", DEFAULT_PROCESS_SECONDS) if marker else 0

    items.sort(key=lambda item: (item.get_closest_marker("processes") is None, -seconds(item)))


# Fixed keys for tests only: the key sealing in tests, and a newer one for rotation.
TEST_DATA_KEY = "b21uaWZsb3ctdGVzdC1zZWFsaW5nLWtleS0wMDAwMDE="
NEWER_TEST_DATA_KEY = "b21uaWZsb3ctdGVzdC1zZWFsaW5nLWtleS0wMDAwMDI="


@pytest.fixture
def data_key():
    """This process seals with TEST_DATA_KEY (as bootstrap does with APP_DATA_ENCRYPTION_KEY), and with no key after."""
    sealing.use_keys(TEST_DATA_KEY)
    yield TEST_DATA_KEY
    sealing.use_keys(None)


@pytest.fixture(scope="session")
def pg_url():
    url = backends.create_pg_database()
    backends.prepare(url, postgres=True)
    db.close()
    db.obj.close_all()
    yield url
    if db.obj is not None and hasattr(db.obj, "close_all"):
        db.obj.close_all()
    backends.drop_pg_database(url)


@pytest.fixture(scope="session")
def pgbouncer():
    """A PgBouncer in transaction mode in front of the test server (tests/support/pgbouncer.py);
    the test is skipped, with the reason, where it cannot run."""
    from tests.support.pgbouncer import started

    bouncer = started(backends.PG_SERVER_URL)
    yield bouncer
    bouncer.stop()


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request):
    return request.param


@pytest.fixture
def database_url(backend, tmp_path, request):
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'omniflow.sqlite3'}"
    return request.getfixturevalue("pg_url")


@pytest.fixture
def database(backend, database_url):
    """models.db bound to a clean, migrated database of this backend."""
    if backend == "sqlite":
        bound = backends.prepare(database_url, postgres=False)
    else:
        bound = backends.bind(database_url)
        backends.truncate(bound)
    yield bound
    if not bound.is_closed():
        bound.close()
    if hasattr(bound, "close_all"):
        bound.close_all()


@pytest.fixture
def ledger_invariant(database):
    """Use in every test that moves money: the test fails if, at its end, a ledger
    transaction does not sum to zero in a currency or a wallet is below zero."""
    yield
    assert ledger_problems() == []


@pytest.fixture
def pg_database(pg_url):
    """models.db bound to the clean PostgreSQL test database, for PostgreSQL-only behaviour."""
    bound = backends.bind(pg_url)
    backends.truncate(bound)
    yield bound
    if not bound.is_closed():
        bound.close()
    bound.close_all()


@pytest.fixture
def workers(database, database_url, tmp_path):
    """Real worker processes against the test database; stopped (and their logs
    printed, so a failure shows them) at the end of the test."""
    from tests.support.processes import WorkerProcesses

    processes = WorkerProcesses(database_url, tmp_path)
    yield processes
    processes.stop_all()
    print(processes.logs())
