"""Telemetry (SPEC 15.9, 6): an anonymous heartbeat, and the collector that stores others' heartbeats.

Off by default. With APP_TELEMETRY_URL set, every web process sends an
`installation.heartbeat` there once at start and every 24 hours (an hour
after a failed send): this release's version, the database's kind and a
few whole-table counts. It carries no customer, operator or order id, no
name, username, token, link, URL or secret: `heartbeat` builds it from
counts and constants only, and its one id is the installation's own random
id (`telemetry_installation`), made by the first heartbeat. A send that
fails is logged and left for the next tick.

With APP_TELEMETRY_COLLECTOR on, the web process accepts heartbeats at
POST /v1/telemetry/heartbeat (web/telemetry.py): a body of exactly the
heartbeat's shape is stored in `telemetry_events`, anything else is
refused with a code and writes nothing. The collector's web process
deletes stored heartbeats older than COLLECTOR_KEEP_DAYS (180) once at
start and every 24 hours, with the retention pass's own `telemetry_events`
step (ops/retention.py), which the worker also runs with
APP_RETENTION_TELEMETRY_DAYS.
"""

import dataclasses
import json
import logging
import re
import threading
import uuid

import requests
from peewee import IntegrityError

from config import VERSION
from models.base import db, utcnow
from models.commerce import Customer, Order, Plan, Subscription
from models.fulfillment import Entitlement
from models.operators import Operator
from models.telemetry import TelemetryEvent, TelemetryInstallation
from models.transactions import is_postgres

logger = logging.getLogger("omniflow.telemetry")

KIND = "installation.heartbeat"
INTERVAL_S = 24 * 60 * 60
RETRY_S = 60 * 60
SEND_TIMEOUT_S = 10
COLLECTOR_KEEP_DAYS = 180
COLLECTOR_SWEEP_S = 24 * 60 * 60
PAID_STATUSES = ("paid", "fulfilled", "partially_refunded", "refunded")
DATABASES = ("postgres", "sqlite")
COUNTS = ("customers", "subscriptions", "activeEntitlements", "plansOnSale", "paidOrders", "operators")
COUNT_MAX = 2**63 - 1
_INSTALLATION_ID = re.compile(r"^[0-9a-f]{32}$")
_VERSION = re.compile(r"^[0-9A-Za-z.+-]{1,32}$")
_SENT_AT = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]{8,15}Z$")

# Why a heartbeat was refused by the collector: error codes web/telemetry.py answers with.
INVALID_HEARTBEAT = "invalid_heartbeat"


class HeartbeatRefused(ValueError):
    def __init__(self, message):
        super().__init__(message)
        self.code = INVALID_HEARTBEAT


def installation_id():
    """This installation's random id, made once (two processes at once agree on the first one stored)."""
    row = TelemetryInstallation.get_or_none(TelemetryInstallation.id == 1)
    if row is None:
        try:
            with db.atomic():
                TelemetryInstallation.create(id=1, installation_id=uuid.uuid4().hex, created_at=utcnow())
        except IntegrityError:
            pass  # another process made it first
        row = TelemetryInstallation.get_by_id(1)
    return row.installation_id


def heartbeat(now=None):
    """The heartbeat as it is sent: version, database kind, counts — nothing that names a person or a secret."""
    now = now or utcnow()
    counts = {
        "customers": Customer.select().count(),
        "subscriptions": Subscription.select().count(),
        "activeEntitlements": Entitlement.select().where(Entitlement.status == "active").count(),
        "plansOnSale": Plan.select().where(Plan.active == True).count(),  # noqa: E712
        "paidOrders": Order.select().where(Order.status.in_(PAID_STATUSES)).count(),
        "operators": Operator.select().count(),
    }
    return {
        "type": KIND,
        "installationId": installation_id(),
        "version": VERSION,
        "database": "postgres" if is_postgres() else "sqlite",
        "sentAt": now.replace(microsecond=0).isoformat() + "Z",
        "counts": counts,
    }


def send(url, session=None, now=None):
    """Build and POST one heartbeat; True when the collector took it (2xx). Never raises."""
    try:
        body = heartbeat(now)
        answer = (session or requests).post(url, json=body, timeout=SEND_TIMEOUT_S)
        if 200 <= answer.status_code < 300:
            logger.info("telemetry heartbeat sent", extra={"task": "telemetry"})
            return True
        error = f"http_{answer.status_code}"
    except requests.RequestException as failure:
        error = type(failure).__name__
    except Exception as failure:  # a heartbeat must never take the web process down
        error = type(failure).__name__
    # The URL is not logged: it may carry a collector's key in its path.
    logger.warning("telemetry heartbeat not sent; tried again later", extra={"task": "telemetry", "error": error})
    return False


def start(settings):
    """The web process's telemetry loops for these settings; returns their stop event (None when both are off)."""
    if not settings.telemetry_url and not settings.telemetry_collector:
        return None
    stop = threading.Event()
    if settings.telemetry_url:
        threading.Thread(target=_heartbeats, args=(settings.telemetry_url, stop), name="Telemetry", daemon=True).start()
    if settings.telemetry_collector:
        threading.Thread(
            target=_collector_sweeps, args=(settings, stop), name="TelemetryRetention", daemon=True
        ).start()
    return stop


def _heartbeats(url, stop):
    session = requests.Session()
    while True:
        wait = INTERVAL_S if send(url, session) else RETRY_S
        _release_connection()
        if stop.wait(wait):
            return


def collector_sweep(settings, now=None):
    """Delete stored heartbeats older than COLLECTOR_KEEP_DAYS; returns how many."""
    from ops import retention

    kept = dataclasses.replace(settings, retention_telemetry_days=COLLECTOR_KEEP_DAYS)
    return retention.sweep_table("telemetry_events", kept, now=now).removed


def _collector_sweeps(settings, stop):
    while True:
        try:
            removed = collector_sweep(settings)
            if removed:
                logger.info(
                    "telemetry collector removed old heartbeats", extra={"table": "telemetry_events", "count": removed}
                )
        except Exception as failure:
            logger.warning(
                "telemetry collector sweep failed", extra={"table": "telemetry_events", "error": type(failure).__name__}
            )
        _release_connection()
        if stop.wait(COLLECTOR_SWEEP_S):
            return


def _release_connection():
    if not db.is_closed() and not db.in_transaction():
        db.close()


def store(body, now=None):
    """Validate a received heartbeat and store it; HeartbeatRefused (nothing written) when it is not one."""
    checked = check_heartbeat(body)
    return TelemetryEvent.create(
        kind=KIND,
        installation_id=checked["installationId"],
        version=checked["version"],
        payload=json.dumps(checked, sort_keys=True),
        received_at=now or utcnow(),
    )


def check_heartbeat(body):
    """The heartbeat itself if it has exactly the shape `heartbeat` sends; HeartbeatRefused otherwise."""
    expected = {"type", "installationId", "version", "database", "sentAt", "counts"}
    if not isinstance(body, dict) or set(body) != expected:
        raise HeartbeatRefused(f"a heartbeat has exactly the fields {', '.join(sorted(expected))}")
    if body["type"] != KIND:
        raise HeartbeatRefused(f"type must be {KIND}")
    for name, pattern in (("installationId", _INSTALLATION_ID), ("version", _VERSION), ("sentAt", _SENT_AT)):
        if not isinstance(body[name], str) or not pattern.match(body[name]):
            raise HeartbeatRefused(f"{name} is malformed")
    if body["database"] not in DATABASES:
        raise HeartbeatRefused(f"database is one of {', '.join(DATABASES)}")
    counts = body["counts"]
    if not isinstance(counts, dict) or set(counts) != set(COUNTS):
        raise HeartbeatRefused(f"counts has exactly the fields {', '.join(COUNTS)}")
    for name, value in counts.items():
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= COUNT_MAX:
            raise HeartbeatRefused(f"counts.{name} is a whole number from 0")
    return body
