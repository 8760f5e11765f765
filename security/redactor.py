"""The redactor: every error text that leaves the process passes through here.

It removes configured secret values, bearer tokens, credentials in URLs and
query strings, Telegram bot tokens, JWTs, subscription links (any URL path:
a Remnawave subscription link is a URL whose path is the secret), UUIDs (squad
and user ids) and anything that looks like a provider body (a JSON object or
array). What is left says what went wrong without saying to whom or with what.
"""

import re
import threading

REDACTED = "[redacted]"
MAX_LENGTH = 2000

_known_secrets = set()
_known_lock = threading.Lock()

_PATTERNS = [
    # Authorization headers and bearer tokens.
    (re.compile(r"(?i)\b(bearer|basic|token)\s+[A-Za-z0-9._~+/=-]{8,}"), r"\1 " + REDACTED),
    # key=value / "key": "value" pairs whose key names a secret.
    (
        re.compile(
            r"(?i)(\"?\b(?:password|passwd|secret|token|api[_-]?key|access[_-]?key|authorization|"
            r"auth|signature|sig|key)\b\"?\s*[:=]\s*\"?)[^\s\"&,;}]+"
        ),
        r"\1" + REDACTED,
    ),
    # Telegram bot tokens: <digits>:<35 url-safe chars>.
    (re.compile(r"\b\d{6,12}:[A-Za-z0-9_-]{30,}\b"), REDACTED),
    # JWTs.
    (re.compile(r"\beyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*"), REDACTED),
    # URLs: keep scheme and host (useful: which service failed), drop
    # user-info, path and query (where subscription links and tokens live).
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^\s/@\"'<>]+@"), r"\1" + REDACTED + "@"),
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^\s/?#\"'<>]+)[/?#][^\s\"'<>]+"), r"\1/" + REDACTED),
    # UUIDs (squads, users, subscriptions).
    (re.compile(r"(?i)\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), REDACTED),
    # Long opaque tokens: runs of 32+ url-safe characters mixing letters and
    # digits (identifiers in tracebacks have no digits and survive).
    (re.compile(r"\b(?=[A-Za-z0-9_-]*\d)(?=[A-Za-z0-9_-]*[A-Za-z])[A-Za-z0-9_-]{32,}\b"), REDACTED),
]

# Provider bodies: a JSON object or array embedded in an error message.
_BODY = re.compile(r"[\[{]\s*\"[^\n]*[\]}]")


def register_secret(value):
    """Remember a secret value (token, key, password) so it is always removed."""
    if value and len(value) >= 4:
        with _known_lock:
            _known_secrets.add(value)


def register_settings(settings):
    for value in settings.secrets():
        register_secret(value)


def redact(text):
    """Return `text` with secrets, links, ids and bodies replaced by [redacted]."""
    if text is None:
        return None
    text = str(text)
    with _known_lock:
        secrets = sorted(_known_secrets, key=len, reverse=True)
    for secret in secrets:
        text = text.replace(secret, REDACTED)
    text = _BODY.sub("[redacted body]", text)
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    if len(text) > MAX_LENGTH:
        text = text[:MAX_LENGTH] + "…[truncated]"
    return text
