"""`keys rotate` (SPEC 15.1): re-seal every sealed column with the newest key, in bounded, resumable batches.

Every SealedField of every model registers itself (ops/sealing.py), so a new
sealed column is rotated without being listed here. Per column, rows are
read in primary-key order (keyset: `id > last`), at most `batch_size` at a
time, skipping values that already begin with the newest key's prefix; each
batch is unsealed, re-sealed and written in its own short transaction, and
a row is written only if it still holds the value read (a concurrent change
is already under the newest key). So an interrupted rotation loses nothing
and a second run carries on with what is left: nothing to remember between
runs. Until it has finished, keep the old keys after the new one in
APP_DATA_ENCRYPTION_KEY.
"""

from peewee import fn

from models.base import db
from ops import sealing

DEFAULT_BATCH = 500


def rotate(batch_size=DEFAULT_BATCH, columns=None):
    """Yield (column, rows re-sealed, last row id) after each batch; UnsealError stops it."""
    ring = sealing.keyring()
    prefix = ring.current_prefix
    for field in columns if columns is not None else sealing.sealed_columns():
        model = field.model
        key = model._meta.primary_key
        last = None
        while True:
            with db.atomic():
                query = model.select(key, field).where(field.is_null(False), fn.SUBSTR(field, 1, len(prefix)) != prefix)
                if last is not None:
                    query = query.where(key > last)
                rows = list(query.order_by(key).limit(batch_size).tuples())
                for row_id, value in rows:
                    plaintext = sealing.unseal(value, field.context, row_id)
                    # A plaintext is sealed on write, with the newest key.
                    model.update({field: plaintext}).where(key == row_id, field == value).execute()
            if not rows:
                break
            last = rows[-1][0]
            yield field.context, len(rows), last
            if len(rows) < batch_size:
                break


def remaining(columns=None):
    """{column: values not yet under the newest key}."""
    prefix = sealing.keyring().current_prefix
    return {
        field.context: field.model.select()
        .where(field.is_null(False), fn.SUBSTR(field, 1, len(prefix)) != prefix)
        .count()
        for field in (columns if columns is not None else sealing.sealed_columns())
    }
