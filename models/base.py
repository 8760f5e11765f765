"""The one database object every model and every job insert goes through.

`db` is a proxy so that the process entry point (or a test) decides which
database it points at; an insert inside `with db.atomic():` therefore shares
the caller's transaction whatever the backend.
"""

import datetime

from peewee import DatabaseProxy, Model

db = DatabaseProxy()


def utcnow():
    """Naive UTC: every timestamp column stores UTC without a zone."""
    return datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)


class BaseModel(Model):
    class Meta:
        database = db
        legacy_table_names = False
