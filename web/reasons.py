"""The operator's reason for a change: the `X-Operator-Reason` header, in any language.

An HTTP header carries bytes, and a browser's fetch() refuses a header value
outside Latin-1, so a reason typed in Cyrillic could not be sent as it is.
The panel's forms send it as an RFC 8187 extended value, `UTF-8''` and the
reason percent-encoded; a script may send that too, or plain UTF-8 bytes
(curl -H does). Both arrive here as the same text. The WSGI server hands
over a header's bytes as Latin-1 text, so plain UTF-8 is recovered by
reading those bytes again as UTF-8; a value that is not UTF-8 stays as
Latin-1 text.
"""

from urllib.parse import unquote

import bottle

from web import problems
from web.problems import Problem

REASON_HEADER = "X-Operator-Reason"
REASON_MAX = 500
EXTENDED_PREFIX = "utf-8''"


def header_reason():
    """The reason the request gives (stripped), or ''; a 400 reason_too_long over REASON_MAX characters,
    rather than an audit that keeps less than was said."""
    return within_limit(decoded(bottle.request.get_header(REASON_HEADER) or "").strip())


def within_limit(reason):
    """The reason as given, or a 400 reason_too_long over REASON_MAX characters."""
    if len(reason) > REASON_MAX:
        raise Problem(400, problems.REASON_TOO_LONG, f"a reason is at most {REASON_MAX} characters")
    return reason


def decoded(raw):
    if raw[: len(EXTENDED_PREFIX)].lower() == EXTENDED_PREFIX:
        return unquote(raw[len(EXTENDED_PREFIX) :], encoding="utf-8", errors="replace")
    try:
        return raw.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return raw
