"""The one database object every model and every job insert goes through.

`db` is a proxy so that the process entry point (or a test) decides which
database it points at; an insert inside `with db.atomic():` therefore shares
the caller's transaction whatever the backend.
"""

import datetime

from peewee import DatabaseProxy, Model


class _Proxy(DatabaseProxy):
    """peewee's proxy builds its own savepoints; this one asks the database it points at, so a
    database that sends savepoints its own way (config/database.py) gets to."""

    def savepoint(self):
        return self.obj.savepoint()


db = _Proxy()


def utcnow():
    """Naive UTC: every timestamp column stores UTC without a zone."""
    return datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)


class BaseModel(Model):
    class Meta:
        database = db
        legacy_table_names = False
