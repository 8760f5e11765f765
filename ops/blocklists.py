"""Blocklists (SPEC 15.8): up to 20 sources of Telegram ids; a customer any of them lists is blocked.

A source is a URL (http or https) answering a list of Telegram user ids, one
per line (blank lines and `#` comments ignored), and an optional bearer
token sent as `Authorization: Bearer …`, sealed at rest and never shown
again once added. Adding and removing are audited in the same transaction;
a removed source stays as an inactive row, its list is dropped and the
customers only it listed are unblocked in that transaction.

`refresh` is the blocklist step of `lifecycle_sweep` (commerce/passes/
lifecycle_sweep.py), every 5 minutes, only with APP_DATA_ENCRYPTION_KEY
(SPEC 5.2: the tokens are sealed). Each source is fetched outside any
transaction with a conditional GET (If-None-Match / If-Modified-Since from
the last good answer's ETag / Last-Modified):

- 304: the list stands; the source is `ok` and its last success moves.
- 200 with a readable list: the stored list becomes it (only the ids that
  came and went are written), with its validators.
- anything else (an HTTP error, a timeout, an unreachable host, a body over
  MAX_BODY_BYTES, a line that is not an id, an empty body): the source is
  `failed` with a code and a short reason (never the body), its failure
  count grows, and its last good list stays in force. A failing source
  never unblocks anyone.

Then `apply_to_customers` makes `customers.blocked` agree with the stored
lists: a customer whose Telegram id some active source lists is blocked
with `blocked_reason` = BLOCKED_BY; one blocked that way whom no list names
any more is unblocked. A customer blocked for another reason is never
touched either way, so the lists never undo a block they did not make. A
customer who first writes to the bot while listed is created blocked
(commerce/customers.py).
"""

import logging
import re
import time
from dataclasses import dataclass

import requests
from peewee import fn

from commerce.customers import BLOCKED_BY_LIST
from models.base import db, utcnow
from models.blocklists import BlocklistEntry, BlocklistSource
from models.commerce import Customer
from ops import sealing
from ops.outbox import display_url, well_formed_url
from ops.records import record_audit

logger = logging.getLogger("omniflow.blocklists")

MAX_SOURCES = 20  # SPEC 15.8
BLOCKED_BY = BLOCKED_BY_LIST  # customers.blocked_reason of a customer a list blocked
MAX_BODY_BYTES = 16 << 20  # about a million ids
CONNECT_TIMEOUT_S, READ_TIMEOUT_S = 5, 15
TOTAL_TIMEOUT_S = 30  # a source that trickles its answer is given up on after this
URL_MAX, TOKEN_MAX = 2000, 500
WRITE_BATCH = 1000
TELEGRAM_ID_MAX = 2**63 - 1
_ID = re.compile(r"^[0-9]{1,19}$")

# Why a source was refused: error codes the panel API answers with.
INVALID_URL = "invalid_url"
INVALID_TOKEN = "invalid_token"
TOO_MANY_SOURCES = "too_many_sources"

# Why a refresh failed: the first word of a source's last_error.
HTTP_PREFIX = "http_"
TIMEOUT = "timeout"
UNREACHABLE = "unreachable"
TOO_LARGE = "too_large"
INVALID_LIST = "invalid_list"
EMPTY_LIST = "empty_list"
TOKEN_UNSEALABLE = "token_unsealable"


class SourceRejected(ValueError):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


class SourceNotFound(LookupError):
    def __init__(self, source_id):
        super().__init__(f"blocklist source {source_id} does not exist (or was removed)")
        self.source_id = source_id


class ListRefused(Exception):
    """A refresh that brings no usable list: `code` and a short reason, never the body."""

    def __init__(self, code, reason):
        super().__init__(f"{code}: {reason}")
        self.code = code


@dataclass(frozen=True)
class Fetched:
    ids: frozenset = None  # None: 304, the stored list stands
    etag: str = None
    last_modified: str = None


def check_url(url):
    if not well_formed_url(url, URL_MAX):
        raise SourceRejected(INVALID_URL, f"the URL must be http:// or https:// with a host, at most {URL_MAX}")
    return url


def check_token(token):
    if token in (None, ""):
        return None
    if not (isinstance(token, str) and 0 < len(token) <= TOKEN_MAX and token.isascii() and token.isprintable()):
        raise SourceRejected(INVALID_TOKEN, f"a token is printable ASCII text of at most {TOKEN_MAX} characters")
    if " " in token:
        raise SourceRejected(INVALID_TOKEN, "a token has no spaces (it is sent as Authorization: Bearer <token>)")
    return token


def add_source(url, token, actor, reason):
    """A new active source, refreshed at the next lifecycle_sweep; SourceRejected, SealingUnavailable."""
    check_url(url)
    token = check_token(token)
    with db.atomic():
        if _active().count() >= MAX_SOURCES:
            raise SourceRejected(TOO_MANY_SOURCES, f"at most {MAX_SOURCES} sources; remove one first")
        source = BlocklistSource.create(url=url, token=token, created_at=utcnow())
        record_audit(
            "system",
            "blocklist.source.added",
            actor,
            reason=reason,
            subject_type="blocklist_source",
            subject_id=source.id,
            details={"url": display_url(url), "token": token is not None},
        )
    return source


def remove_source(source_id, actor, reason):
    """Make a source inactive and drop its list; the customers only it listed are unblocked now."""
    now = utcnow()
    with db.atomic():
        removed = (
            BlocklistSource.update(active=False, removed_at=now)
            .where(BlocklistSource.id == source_id, BlocklistSource.active == True)  # noqa: E712
            .execute()
        )
        if not removed:
            raise SourceNotFound(source_id)
        BlocklistEntry.delete().where(BlocklistEntry.source == source_id).execute()
        BlocklistSource.update(entry_count=0).where(BlocklistSource.id == source_id).execute()
        _, unblocked = apply_to_customers(now)
        record_audit(
            "system",
            "blocklist.source.removed",
            actor,
            reason=reason,
            subject_type="blocklist_source",
            subject_id=source_id,
            details={"unblocked": unblocked},
        )
    return BlocklistSource.get_by_id(source_id)


def active_sources():
    """Active sources, oldest first, without their tokens (those stay sealed)."""
    fields = [field for field in BlocklistSource._meta.sorted_fields if field.name != "token"]
    return list(_active(*fields, BlocklistSource.token.is_null(False).alias("has_token")).order_by(BlocklistSource.id))


def blocked_counts():
    """{source id: customers blocked now whom that source lists}."""
    rows = (
        BlocklistEntry.select(BlocklistEntry.source, fn.COUNT(Customer.id))
        .join(Customer, on=(Customer.telegram_id == BlocklistEntry.telegram_id))
        .where(Customer.blocked == True)  # noqa: E712
        .group_by(BlocklistEntry.source)
        .tuples()
    )
    return dict(rows)


def _active(*fields):
    return BlocklistSource.select(*fields).where(BlocklistSource.active == True)  # noqa: E712


# --- the refresh (lifecycle_sweep) ---------------------------------------------


def parse_list(body):
    """The Telegram ids of a list's body; ListRefused when it is not a list."""
    if not body.strip():
        raise ListRefused(EMPTY_LIST, "the source answered an empty body (a list with no ids says so in a comment)")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise ListRefused(INVALID_LIST, "the body is not UTF-8 text") from None
    ids = set()
    for number, line in enumerate(text.splitlines(), start=1):
        entry = line.split("#", 1)[0].strip()
        if not entry:
            continue
        if not _ID.match(entry) or not 0 < int(entry) <= TELEGRAM_ID_MAX:
            raise ListRefused(INVALID_LIST, f"line {number} is not a Telegram id")
        ids.add(int(entry))
    return frozenset(ids)


def fetch(source, session):
    """Fetched for a 200 with a list or a 304; ListRefused otherwise. Outside any transaction."""
    headers = {"Accept": "text/plain"}
    if source.etag:
        headers["If-None-Match"] = source.etag
    if source.last_modified:
        headers["If-Modified-Since"] = source.last_modified
    try:
        token = source.token
    except sealing.UnsealError as error:
        raise ListRefused(TOKEN_UNSEALABLE, error.reason) from None
    if token:
        headers["Authorization"] = f"Bearer {token}"
    started = time.monotonic()
    try:
        with session.get(
            source.url, headers=headers, timeout=(CONNECT_TIMEOUT_S, READ_TIMEOUT_S), stream=True
        ) as answer:
            if answer.status_code == 304:
                return Fetched()
            if answer.status_code != 200:
                raise ListRefused(f"{HTTP_PREFIX}{answer.status_code}", f"the source answered {answer.status_code}")
            body = bytearray()
            for chunk in answer.iter_content(64 << 10):
                body += chunk
                if len(body) > MAX_BODY_BYTES:
                    raise ListRefused(TOO_LARGE, f"the list is over {MAX_BODY_BYTES} bytes")
                if time.monotonic() - started > TOTAL_TIMEOUT_S:
                    raise ListRefused(TIMEOUT, f"the list took over {TOTAL_TIMEOUT_S} s to arrive")
            ids = parse_list(bytes(body))
            return Fetched(ids, answer.headers.get("ETag"), answer.headers.get("Last-Modified"))
    except requests.Timeout:
        raise ListRefused(TIMEOUT, "the source did not answer in time") from None
    except requests.ConnectionError as error:
        if "timed out" in str(error):
            raise ListRefused(TIMEOUT, "the source did not answer in time") from None
        raise ListRefused(UNREACHABLE, "the source could not be reached") from None
    except requests.RequestException as error:
        raise ListRefused(UNREACHABLE, type(error).__name__) from None


def refresh(now=None, should_stop=lambda: False):
    """Refresh every active source, then apply the lists to customers.
    Returns {"ok": n, "failed": n, "blocked": n, "unblocked": n}."""
    now = now or utcnow()
    outcome = {"ok": 0, "failed": 0}
    with requests.Session() as http:
        for source in list(_active().order_by(BlocklistSource.id)):
            if should_stop():
                break
            try:
                fetched = fetch(source, http)
            except ListRefused as refused:
                _record_failure(source, refused, now)
                outcome["failed"] += 1
                continue
            _record_success(source, fetched, now)
            outcome["ok"] += 1
    with db.atomic():
        outcome["blocked"], outcome["unblocked"] = apply_to_customers(now)
    return outcome


def _record_failure(source, refused, now):
    logger.warning(
        "blocklist source refresh failed; its last good list stays",
        extra={"task": "lifecycle_sweep", "state": f"source {source.id}", "error": refused.code},
    )
    BlocklistSource.update(
        status="failed",
        last_refresh_at=now,
        last_error=str(refused)[:300],
        failure_count=BlocklistSource.failure_count + 1,
    ).where(BlocklistSource.id == source.id, BlocklistSource.active == True).execute()  # noqa: E712


def _record_success(source, fetched, now):
    changes = {"status": "ok", "last_refresh_at": now, "last_success_at": now, "last_error": None, "failure_count": 0}
    if fetched.ids is not None:
        changes.update(
            etag=fetched.etag, last_modified=fetched.last_modified, list_changed_at=now, entry_count=len(fetched.ids)
        )
    with db.atomic():
        # The row first: a source removed meanwhile is left as its removal made it (no list written back).
        still_active = (
            BlocklistSource.update(**changes)
            .where(BlocklistSource.id == source.id, BlocklistSource.active == True)  # noqa: E712
            .execute()
        )
        if still_active and fetched.ids is not None:
            _replace_list(source.id, fetched.ids)


def _replace_list(source_id, ids):
    """Write only the difference between the stored list and the new one."""
    stored = {
        row[0]
        for row in BlocklistEntry.select(BlocklistEntry.telegram_id).where(BlocklistEntry.source == source_id).tuples()
    }
    gone, new = sorted(stored - ids), sorted(ids - stored)
    for start in range(0, len(gone), WRITE_BATCH):
        batch = gone[start : start + WRITE_BATCH]
        BlocklistEntry.delete().where(
            BlocklistEntry.source == source_id, BlocklistEntry.telegram_id.in_(batch)
        ).execute()
    for start in range(0, len(new), WRITE_BATCH):
        rows = [(source_id, telegram_id) for telegram_id in new[start : start + WRITE_BATCH]]
        BlocklistEntry.insert_many(rows, fields=[BlocklistEntry.source, BlocklistEntry.telegram_id]).execute()


BLOCK = (
    "UPDATE customers SET blocked = {p}, blocked_reason = {p}, blocked_at = {p}"
    " WHERE blocked = {p} AND telegram_id IN (SELECT telegram_id FROM blocklist_entries)"
)
UNBLOCK = (
    "UPDATE customers SET blocked = {p}, blocked_reason = NULL, blocked_at = NULL"
    " WHERE blocked = {p} AND blocked_reason = {p}"
    " AND NOT EXISTS (SELECT 1 FROM blocklist_entries e WHERE e.telegram_id = customers.telegram_id)"
)


def apply_to_customers(now):
    """Block the customers a list names, unblock those blocked by a list no list names; (blocked, unblocked).
    In the caller's transaction; a customer blocked for another reason is left as it is."""
    p = db.param
    blocked = db.execute_sql(BLOCK.format(p=p), (True, BLOCKED_BY, now, False)).rowcount
    unblocked = db.execute_sql(UNBLOCK.format(p=p), (False, True, BLOCKED_BY)).rowcount
    if blocked or unblocked:
        logger.info(
            "blocklists applied to customers",
            extra={
                "task": "lifecycle_sweep",
                "count": blocked + unblocked,
                "state": f"blocked={blocked},unblocked={unblocked}",
            },
        )
    return blocked, unblocked
