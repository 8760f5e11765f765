"""What was checked of a webhook delivery, and what audit keeps of a rejected one (SPEC 13.6).

- `verdict`: what proved (or disproved) the delivery — CryptoBot's signature
  (`signature_valid`, `signature_bad`), or for YooKassa, whose notifications
  carry no signature, what the confirming fetch said (`confirmed`,
  `contradicted`, `unknown`); NULL while nothing has been checked.
  `signature_ok` is true only where a signature verified: YooKassa rows stored
  before are set false (no signature was ever checked on them).
- `body_size`, `body_sha256`, `headers`: the delivery's size and digest, and
  the client address and the headers that matter, as JSON (binary, like the
  body: a logged statement shows neither). A rejected
  delivery keeps only the first KiB of its body, so these say what it was.
- Rejected deliveries stored before (bad signature, malformed) are kept days
  rather than a month from now on (commerce/webhooks.py REJECTED_RETENTION).
"""

import datetime

REJECTED_RETENTION = datetime.timedelta(days=3)  # commerce/webhooks.py's, as of this migration
REJECTED_OUTCOMES = ("bad_signature", "malformed_webhook")

UP = [
    "ALTER TABLE provider_webhook_events ADD COLUMN verdict TEXT",
    "ALTER TABLE provider_webhook_events ADD COLUMN body_size INTEGER",
    "ALTER TABLE provider_webhook_events ADD COLUMN body_sha256 TEXT",
    "ALTER TABLE provider_webhook_events ADD COLUMN headers BYTEA",
    "UPDATE provider_webhook_events SET verdict = 'signature_valid' WHERE provider = 'cryptobot' AND signature_ok",
    "UPDATE provider_webhook_events SET verdict = 'signature_bad' WHERE outcome = 'bad_signature'",
    "UPDATE provider_webhook_events SET signature_ok = FALSE WHERE provider = 'yookassa' AND signature_ok",
]
DOWN = [
    "ALTER TABLE provider_webhook_events DROP COLUMN headers",
    "ALTER TABLE provider_webhook_events DROP COLUMN body_sha256",
    "ALTER TABLE provider_webhook_events DROP COLUMN body_size",
    "ALTER TABLE provider_webhook_events DROP COLUMN verdict",
]


def up(migrator, db):
    for statement in UP:
        db.execute_sql(statement)
    kept_until = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None) + REJECTED_RETENTION
    p = db.param
    db.execute_sql(
        f"UPDATE provider_webhook_events SET retain_until = {p}"
        f" WHERE outcome IN ({', '.join([p] * len(REJECTED_OUTCOMES))}) AND retain_until > {p}",
        (kept_until, *REJECTED_OUTCOMES, kept_until),
    )


def down(migrator, db):
    for statement in DOWN:
        db.execute_sql(statement)
