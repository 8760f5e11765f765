"""Outbox destinations and what has reached them (SPEC 8.2, 15.2).

A destination is a URL, the topics it takes (`*` or a list such as
`order.paid,wallet.credited`) and a Standard Webhooks secret (`whsec_` and
24–64 bytes of base64), sealed at rest and never shown again once added.
Adding and removing are audited in the same transaction. A removed
destination stays as an inactive row; the publisher drops its unfinished
deliveries, and receives nothing more.

A URL whose host is a loopback, private, link-local, multicast or otherwise
non-public address (in any of its spellings: `2130706433` is 127.0.0.1), or
`localhost`, is refused unless APP_OUTBOX_ALLOW_PRIVATE_DESTINATIONS is set.
A name is checked on the addresses it resolves to as each connection opens
(integrations/webhooks.py), which also catches a name that turns inward later.

An event is published (`published_at`: finished) when every delivery it has
has ended — delivered, or dead after 24 h; a removed destination's unfinished
deliveries are deleted — so the pending gauge counts only events still on
their way, and retention applies to the rest. `publish_complete` decides
that with the event rows locked, so two destinations finishing the same
event at once cannot both miss it.
"""

import base64
import binascii
import json
import os
import re
import socket
from urllib.parse import urlsplit

from peewee import SQL, fn

from integrations.webhooks import refused_address
from models.base import db, utcnow
from models.ops import OutboxDelivery, OutboxDestination
from models.transactions import execute_all, is_postgres
from ops.records import record_audit

ALL_TOPICS = "*"
SECRET_PREFIX = "whsec_"
SECRET_BYTES = 32
SECRET_MIN_BYTES, SECRET_MAX_BYTES = 24, 64
URL_MAX = 2000
TOPICS_MAX = 50
TOPIC_PATTERN = r"^[a-z0-9][a-z0-9_.-]{0,63}$"
_TOPIC = re.compile(TOPIC_PATTERN)

PENDING, RETRYING, DELIVERED, DEAD = "pending", "retrying", "delivered", "dead"
UNFINISHED = (PENDING, RETRYING)
COUNTED = (PENDING, RETRYING, DEAD)

# Why a destination was refused: error codes the panel API and the CLI answer with.
INVALID_URL = "invalid_url"
INVALID_TOPICS = "invalid_topics"
INVALID_SECRET = "invalid_secret"
PRIVATE_DESTINATION = "private_destination"

_private_allowed = None


class DestinationRejected(ValueError):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


class DestinationNotFound(LookupError):
    def __init__(self, destination_id):
        super().__init__(f"outbox destination {destination_id} does not exist (or was removed)")
        self.destination_id = destination_id


def generate_secret():
    return SECRET_PREFIX + base64.b64encode(os.urandom(SECRET_BYTES)).decode()


def check_secret(secret):
    if not isinstance(secret, str) or not secret.startswith(SECRET_PREFIX):
        raise DestinationRejected(INVALID_SECRET, f"a secret is {SECRET_PREFIX} followed by base64")
    try:
        raw = base64.b64decode(secret[len(SECRET_PREFIX) :], validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if not SECRET_MIN_BYTES <= len(raw) <= SECRET_MAX_BYTES:
        raise DestinationRejected(
            INVALID_SECRET,
            f"a secret is {SECRET_PREFIX} followed by {SECRET_MIN_BYTES} to {SECRET_MAX_BYTES} bytes of base64",
        )
    return secret


def allow_private_destinations(allowed):
    """Whether this process adds and sends to non-public destinations (None: as the setting says)."""
    global _private_allowed
    _private_allowed = allowed


def private_destinations_allowed():
    global _private_allowed
    if _private_allowed is None:
        from config.settings import load_settings

        _private_allowed = load_settings().outbox_allow_private_destinations
    return _private_allowed


def well_formed_url(url, limit=URL_MAX):
    """An http(s) URL with a host (and a port in range, if any), printable, no spaces, at most `limit` characters."""
    if not isinstance(url, str) or len(url) > limit or not url.isprintable() or " " in url:
        return False
    try:
        parts = urlsplit(url)
        return parts.scheme in ("http", "https") and bool(parts.hostname) and parts.port != 0
    except ValueError:  # a port out of range, a malformed IPv6 host
        return False


def check_url(url):
    if not well_formed_url(url):
        raise DestinationRejected(INVALID_URL, f"the URL must be http:// or https:// with a host, at most {URL_MAX}")
    parts = urlsplit(url)
    refusal = None if private_destinations_allowed() else _refused_host(parts.hostname.split("%", 1)[0].rstrip("."))
    if refusal:
        raise DestinationRejected(
            PRIVATE_DESTINATION,
            f"the URL's host is not a public address ({refusal}): events go only to public addresses"
            " (APP_OUTBOX_ALLOW_PRIVATE_DESTINATIONS=true allows receivers on your own network)",
        )
    return url


def _refused_host(host):
    """Why a URL's host is refused as it is written, or None (a name's addresses are checked as it is connected to)."""
    if host == "localhost" or host.endswith(".localhost"):
        return "loopback"
    try:
        found = socket.getaddrinfo(host, None, flags=socket.AI_NUMERICHOST)
    except (socket.gaierror, UnicodeError):
        return None
    return next(filter(None, (refused_address(sockaddr[0]) for *_, sockaddr in found)), None)


def parse_topics(value):
    """'*', 'a,b' or ['a', 'b'] → '*' or a sorted list of distinct topics."""
    if isinstance(value, str):
        value = [part.strip() for part in value.split(",")]
    if not isinstance(value, list) or not value or not all(isinstance(topic, str) for topic in value):
        raise DestinationRejected(INVALID_TOPICS, "topics are '*' or a list of topic names")
    if value == [ALL_TOPICS]:
        return ALL_TOPICS
    if len(value) > TOPICS_MAX or not all(_TOPIC.match(topic) for topic in value):
        raise DestinationRejected(
            INVALID_TOPICS, f"topics are '*' or up to {TOPICS_MAX} names such as order.paid (a-z, 0-9, . _ -)"
        )
    return sorted(set(value))


def stored_topics(topics):
    return ALL_TOPICS if topics == ALL_TOPICS else json.dumps(topics)


def topics_of(stored):
    return ALL_TOPICS if stored == ALL_TOPICS else json.loads(stored)


def takes(stored, topic):
    """Does a destination with these stored topics take an event of `topic`?"""
    return stored == ALL_TOPICS or topic in topics_of(stored)


def display_url(url):
    """The URL as pages and answers show it: its origin only (a path or query may carry a token)."""
    parts = urlsplit(url)
    origin = f"{parts.scheme}://{parts.hostname}" + (f":{parts.port}" if parts.port else "")
    return origin + ("/…" if parts.path.strip("/") or parts.query else "")


def add_destination(url, topics, secret, actor, reason):
    check_url(url)
    topics = parse_topics(topics)
    check_secret(secret)
    with db.atomic():
        destination = OutboxDestination.create(
            url=url, topics=stored_topics(topics), secret=secret, active=True, created_at=utcnow()
        )
        record_audit(
            "system",
            "outbox.destination.added",
            actor,
            reason=reason,
            subject_type="outbox_destination",
            subject_id=destination.id,
            details={"url": display_url(url), "topics": topics},
        )
    return destination


def remove_destination(destination_id, actor, reason):
    """Make a destination inactive; the publisher drops its unfinished deliveries."""
    with db.atomic():
        removed = (
            OutboxDestination.update(active=False)
            .where(OutboxDestination.id == destination_id, OutboxDestination.active == True)  # noqa: E712
            .execute()
        )
        if not removed:
            raise DestinationNotFound(destination_id)
        record_audit(
            "system",
            "outbox.destination.removed",
            actor,
            reason=reason,
            subject_type="outbox_destination",
            subject_id=destination_id,
        )
    return OutboxDestination.get_by_id(destination_id)


def active_destinations():
    """Active destinations, oldest first, without their secrets (those stay sealed)."""
    return list(
        OutboxDestination.select(
            OutboxDestination.id,
            OutboxDestination.url,
            OutboxDestination.topics,
            OutboxDestination.active,
            OutboxDestination.created_at,
        )
        .where(OutboxDestination.active == True)  # noqa: E712
        .order_by(OutboxDestination.id)
    )


def delivery_counts():
    """{destination id: {"pending": n, "retrying": n, "dead": n}} of active destinations."""
    counts = {}
    rows = (
        OutboxDelivery.select(OutboxDelivery.destination, OutboxDelivery.status, fn.COUNT(SQL("*")))
        .join(OutboxDestination)
        .where(OutboxDelivery.status.in_(COUNTED), OutboxDestination.active == True)  # noqa: E712
        .group_by(OutboxDelivery.destination, OutboxDelivery.status)
        .tuples()
    )
    for destination_id, status, count in rows:
        counts.setdefault(destination_id, dict.fromkeys(COUNTED, 0))[status] = count
    return counts


def publish_complete(event_ids, now):
    """Set `published_at` on those of the events whose every delivery has ended (delivered or dead).

    Call inside the transaction that changed their deliveries, after the
    change: the event rows are locked first (in id order), and the check is
    the next statement, which under READ COMMITTED reads what was committed
    by the time it got the locks; so of two transactions finishing the last
    two deliveries of one event, the later one sees the other's and
    publishes it. (SQLite has one writer at a time.) Hand-written SQL, as the
    delivery job runs this for every event it delivers: on PostgreSQL both
    statements go out with the transaction's COMMIT, in one round trip.
    """
    ids = sorted(set(event_ids))
    if not ids:
        return
    marks = ", ".join(["%s"] * len(ids))
    execute_all(
        [
            (
                f"SELECT id FROM outbox_events WHERE id IN ({marks}) ORDER BY id"
                + (" FOR UPDATE" if is_postgres() else ""),
                ids,
            ),
            (
                f"UPDATE outbox_events SET published_at = %s WHERE id IN ({marks}) AND published_at IS NULL"
                " AND NOT EXISTS (SELECT 1 FROM outbox_deliveries d"
                " WHERE d.event_id = outbox_events.id AND d.status IN ('pending', 'retrying'))",
                [now, *ids],
            ),
        ]
    )
