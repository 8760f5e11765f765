"""Where support attachment files live: one file per content digest, `<APP_SUPPORT_ATTACHMENT_DIR>/<sha256 hex>`.

Several attachment rows can name one digest and so share one file. A digest
read back from the database is checked before it becomes a path, so a bad
row can never name a file outside the directory.
"""

import os
import re

DIGEST = re.compile(r"[0-9a-f]{64}")


class BadDigest(ValueError):
    code = "bad_attachment_digest"


def path_for(directory, digest):
    if not DIGEST.fullmatch(digest or ""):
        raise BadDigest("an attachment digest is 64 lowercase hex characters")
    return os.path.join(directory, digest)
