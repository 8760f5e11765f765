"""Huey's own storage test suite (huey.tests.test_storage.StorageTests) against
our storage, on SQLite and PostgreSQL, slow tests included.

Nothing is excluded: plain Huey messages keep Huey's semantics in our
storage (dequeue removes, the schedule is read and re-enqueued by Huey's
scheduler), and the suite's consumer test runs tasks, a chord, results and
revocation through Huey's stock Consumer over our storage.
"""

import os

os.environ.setdefault("HUEY_SLOW_TESTS", "1")

import pytest  # noqa: E402
from huey.tests.base import BaseTestCase  # noqa: E402
from huey.tests.test_storage import StorageTests  # noqa: E402

from jobs import OmniflowHuey  # noqa: E402
from tests.support import backends  # noqa: E402


@pytest.fixture(autouse=True)
def _bound_database(request, tmp_path):
    if request.cls.backend == "sqlite":
        database = backends.prepare(f"sqlite:///{tmp_path / 'huey.sqlite3'}", postgres=False)
    else:
        database = backends.bind(request.getfixturevalue("pg_url"))
        backends.truncate(database)
    yield
    database.close()
    if hasattr(database, "close_all"):
        database.close_all()


class StorageOnSqliteTest(StorageTests, BaseTestCase):
    backend = "sqlite"

    def get_huey(self):
        return OmniflowHuey("conformance", utc=False)


class StorageOnPostgresTest(StorageOnSqliteTest):
    backend = "postgres"
