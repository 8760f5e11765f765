"""An outbox event whose deliveries have all ended is finished (SPEC 8.2, 7).

Events are now published once every delivery has ended, dead ones included
(ops/outbox.py `publish_complete`). Events whose deliveries went dead before
that stayed unpublished: they held up the pending gauge and
`/v1/admin/outbox`'s oldest age for ever and retention never reached them.
This marks them published now; it reads only the unpublished events
(`outbox_events_pending`).
"""

from models.base import utcnow

FINISH = (
    "UPDATE outbox_events SET published_at = {param} WHERE published_at IS NULL AND routed_at IS NOT NULL"
    " AND NOT EXISTS (SELECT 1 FROM outbox_deliveries d"
    " WHERE d.event_id = outbox_events.id AND d.status IN ('pending', 'retrying'))"
)


def up(migrator, db):
    db.execute_sql(FINISH.format(param=db.param), (utcnow(),))


def down(migrator, db):
    """Nothing to undo: the events are finished either way."""
