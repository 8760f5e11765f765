"""The `fulfillment` job: apply one operation to the Remnawave panel, exactly once (SPEC 2.3–2.15).

A run is three steps, and only the middle one talks to the panel:

1. claim  — a short serializable transaction locks the operation, decides
            whether to run at all (finished, superseded, refunded, not yet
            effective, leased by another run, another operation of the same
            entitlement at the panel, maintenance), and if so builds what the
            panel should hold (the operation's own fields on top of the
            entitlement as last applied) and marks it `running` with a fresh
            attempt and a 2-minute lease;
2. call   — the panel requests, with no transaction, lock or pooled
            connection held;
3. record — a second short serializable transaction writes the outcome only
            if the claim is still this run's (still running, same attempt);
            a success writes the operation's own fields to the entitlement.

Every outcome writes a history row. Serialization failures of either
transaction are retried in place; the panel is never called twice for one
claim. A run that dies between claim and record leaves a lease that expires:
the next run (the queue's retry, or the revive pass) takes it over.
"""

import datetime
import json
import logging
import threading
from dataclasses import dataclass, field, replace

from fulfillment import rules
from fulfillment.desired_state import DesiredState, InvalidDesiredState, observed_summary
from fulfillment.usernames import candidate_usernames, username_for
from jobs import UNIQUE_THROUGH_COMPLETED, JobCancel, JobSnooze, huey
from jobs.engine.executor import release_connection
from models.base import utcnow
from models.fulfillment import OPERATIONS, Entitlement, EntitlementDrift, FulfillmentOperation
from models.transactions import execute_all, fetch_one, is_postgres, retry_serializable
from ops.records import queue_notice

logger = logging.getLogger("omniflow.fulfillment")

FINISHED = ("succeeded", "cancelled", "failed")
PAID_ORDER_STATES = ("paid", "fulfilled", "partially_refunded")
REMOTE_STATUS = {"ACTIVE": "active", "LIMITED": "limited", "DISABLED": "disabled", "EXPIRED": "expired"}
USERNAME_EXISTS = "A019"
EXPIRY_TOLERANCE = datetime.timedelta(seconds=1)

# Claim and record transactions one worker process runs at once. Its 16
# critical threads would otherwise run up to 16 SERIALIZABLE transactions on
# neighbouring operations together, and PostgreSQL refuses to serialize most
# of them once the machine is busy: at load 10 on 2 cores, 16 at once cost
# ~5 serialization retries per operation (37 ops/s), 8 ~5, 4 ~2, 2 ~0.3, and
# every retry is more round trips and GIL hand-offs for all threads (4 slots:
# 75-93 ops/s, 2: 64-79). Four keep the database busy on a quiet machine
# (a claim or record is about 2 ms there) while the others wait for the panel.
TRANSACTION_SLOTS = 4
_transaction_slots = threading.BoundedSemaphore(TRANSACTION_SLOTS)
_panel = None


def use_panel(client):
    """Set the panel client this process's runs use (tests, the demo, bootstrap)."""
    global _panel
    _panel = client


def panel():
    global _panel
    if _panel is None:
        from config.settings import load_settings
        from integrations.remnawave import RemnawaveClient

        settings = load_settings()
        _panel = RemnawaveClient(settings.remnawave_url, settings.remnawave_token)
    return _panel


# -- what claim and record decide --------------------------------------------------


@dataclass(frozen=True)
class Done:
    reason: str


@dataclass(frozen=True)
class Snooze:
    seconds: float


@dataclass(frozen=True)
class Cancel:
    code: str


@dataclass(frozen=True)
class Retry:
    code: str


@dataclass(frozen=True)
class Claim:
    operation_id: int
    attempt: int
    operation: str
    correlation_id: str
    desired: DesiredState
    entitlement_id: int
    grace_period_hours: int
    paused: bool
    subscription_id: str
    customer_id: str
    slot: int
    remote_user_id: str
    has_open_drifts: bool = True
    has_earlier_entitlements: bool = True
    revoked: bool = False  # the order was refunded: its user is kept disabled (SPEC 2.10)


@dataclass
class Applied:
    remote: object  # None: a refunded order's user that is not on the panel (nothing to revoke)
    drifts: list = field(default_factory=list)  # (kind, expected, observed, corrected)


@dataclass(frozen=True)
class Failed:
    code: str


class FulfillmentRetry(Exception):
    """The run failed with a classified code; the queue retries the job with backoff."""

    def __init__(self, code):
        super().__init__(code)
        self.code = code


class RemoteUserMissing(Exception):
    code = rules.REMOTE_USER_NOT_FOUND


# -- the job ---------------------------------------------------------------------------


@huey.job(
    "fulfillment",
    queue="critical",
    max_attempts=rules.QUEUE_ATTEMPTS,
    unique_states=UNIQUE_THROUGH_COMPLETED,
    backoff=rules.backoff_seconds,
)
def fulfillment(operationId):
    decision = _in_slot(lambda: claim(operationId))
    if isinstance(decision, Claim):
        outcome = call(decision)
        try:
            decision = _in_slot(lambda: record(decision, outcome))
        except Exception:
            give_back_lease(decision)
            raise
    if isinstance(decision, Snooze):
        raise JobSnooze(decision.seconds)
    if isinstance(decision, Retry):
        raise FulfillmentRetry(decision.code)
    if isinstance(decision, Cancel):
        raise JobCancel(decision.code)


def _in_slot(fn):
    """Run a claim or record in one of the process's transaction slots (retried as ever)."""
    return retry_serializable(fn, gate=_transaction_slots)


# -- 1. claim ----------------------------------------------------------------------------


@dataclass
class OperationRow:
    """The operation as claim and record read it (a plain row: the hot path skips the ORM)."""

    id: int
    entitlement_id: int
    operation: str
    status: str
    desired_state: str
    attempt_count: int
    next_attempt_at: datetime.datetime | None
    correlation_id: str


def _history(op, attempt, status, error_code=None, request_summary=None, response_summary=None):
    return (
        "INSERT INTO fulfillment_history (operation_id, attempt, status, error_code, correlation_id,"
        " request_summary, response_summary, created_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
        (
            op.id,
            attempt,
            status,
            error_code,
            op.correlation_id,
            json.dumps(request_summary) if request_summary is not None else None,
            json.dumps(response_summary) if response_summary is not None else None,
            utcnow(),
        ),
    )


def _set(op, **values):
    values["updated_at"] = utcnow()
    columns = ", ".join(f"{column} = %s" for column in values)
    return (f"UPDATE fulfillment_operations SET {columns} WHERE id = %s", (*values.values(), op.id))


def _cancel(op, code, now):
    execute_all(
        [
            _set(op, status="cancelled", last_error_code=code, completed_at=now),
            _history(op, op.attempt_count, "cancelled", code),
        ]
    )
    logger.info("fulfillment operation cancelled", extra={"job_id": op.id, "error": code})
    return Cancel(code)


def _notify_failure(op, entitlement_id, code, status):
    queue_notice(
        rules.NOTICE_FULFILLMENT_FAILURE,
        f"operation:{op.id}",
        {"entitlementId": entitlement_id, "operation": op.operation, "errorCode": code, "status": status},
    )


def claim(operation_id):
    now = utcnow()
    found = _claim_context(operation_id)
    if found is None:
        return Done("operation_missing")
    op, context = found
    if op.status in FINISHED:
        return Done(op.status)
    if op.operation not in OPERATIONS:
        return _cancel(op, rules.UNSUPPORTED_OPERATION, now)
    try:
        desired = DesiredState.parse(op.desired_state)
    except InvalidDesiredState:
        execute_all(
            [
                _set(op, status="failed", last_error_code=rules.INVALID_DESIRED_STATE, completed_at=now),
                _history(op, op.attempt_count, "failed", rules.INVALID_DESIRED_STATE),
            ]
        )
        _notify_failure(op, op.entitlement_id, rules.INVALID_DESIRED_STATE, "failed")
        return Cancel(rules.INVALID_DESIRED_STATE)
    if desired.effective_at is not None and desired.effective_at > now:
        return Snooze((desired.effective_at - now).total_seconds())
    writes = []
    if op.status == "running":
        if op.next_attempt_at is not None and op.next_attempt_at > now:
            # Another run holds the lease; come back when it ends.
            return Snooze((op.next_attempt_at - now).total_seconds() + 1)
        # That run died (or stalled) without recording: say so in the history,
        # so every attempt is explained, and take the operation over.
        writes.append(_history(op, op.attempt_count, "retrying", rules.LEASE_EXPIRED))

    if context.status == "superseded":
        execute_all(writes)
        return _cancel(op, rules.ENTITLEMENT_SUPERSEDED, now)
    revoked = context.order_status == "refunded"
    # A create of a refunded order that has never called the panel is cancelled
    # (SPEC 2.10); one that has may have made the user, so it runs on to keep
    # that user disabled.
    if op.operation == "create" and context.order_status not in PAID_ORDER_STATES and not (
        revoked and op.attempt_count > 0
    ):
        code = rules.ORDER_REFUNDED if revoked else rules.ORDER_NOT_PAID
        if context.status == "pending":
            writes.append(_supersede_pending(context.id, now))
        execute_all(writes)
        return _cancel(op, code, now)
    if context.busy_until is not None and context.busy_until > now:
        # Another operation of this entitlement is at the panel: one at a time (SPEC 2.19).
        return Snooze((context.busy_until - now).total_seconds() + 1)
    if context.status == "pending" and op.operation != "create":
        waiting = _wait_for_create(op, context, writes, now)
        if waiting is not None:
            return waiting
    if context.maintenance_active:
        # Held, not run: the attempt counter stays, so a hold costs no retry budget.
        writes.append(
            _set(
                op,
                status="retrying",
                last_error_code=rules.MAINTENANCE_ACTIVE,
                next_attempt_at=now + datetime.timedelta(seconds=rules.MAINTENANCE_PAUSE_S),
            )
        )
        writes.append(_history(op, op.attempt_count, "retrying", rules.MAINTENANCE_ACTIVE))
        execute_all(writes)
        return Snooze(rules.MAINTENANCE_PAUSE_S)

    attempt = op.attempt_count + 1
    writes.append(
        _set(
            op,
            status="running",
            attempt_count=attempt,
            next_attempt_at=now + datetime.timedelta(seconds=rules.CLAIM_LEASE_S),
        )
    )
    execute_all(writes)
    desired = desired.applied_to(context.applied, op.operation)
    if desired.resume and context.paused_at is not None:
        # The paused time is given back on the period's end (SPEC 2.25).
        paused_for = max(now.replace(microsecond=0) - context.paused_at, datetime.timedelta(0))
        desired = replace(desired, ends_at=context.applied.ends_at + paused_for)
    return Claim(
        operation_id=op.id,
        attempt=attempt,
        operation=op.operation,
        correlation_id=op.correlation_id,
        desired=desired,
        entitlement_id=context.id,
        grace_period_hours=context.grace_period_hours,
        paused=context.paused,
        subscription_id=context.subscription_id,
        customer_id=context.customer_id,
        slot=context.slot,
        remote_user_id=context.remote_user_id,
        has_open_drifts=context.has_open_drifts,
        has_earlier_entitlements=context.has_earlier_entitlements,
        revoked=revoked,
    )


def _supersede_pending(entitlement_id, now):
    return (
        "UPDATE entitlements SET status = 'superseded', updated_at = %s WHERE id = %s AND status = 'pending'",
        (now, entitlement_id),
    )


def _wait_for_create(op, context, writes, now):
    """An operation of an entitlement whose create has not recorded yet (a refund's
    disable queued while the create may be calling): it waits for the create, and
    is cancelled if the create ended without provisioning anything. None: go on."""
    create = fetch_one(
        "SELECT status, next_attempt_at FROM fulfillment_operations"
        " WHERE entitlement_id = %s AND operation = 'create' ORDER BY id LIMIT 1",
        (context.id,),
    )
    if create is None or create[0] in FINISHED:
        execute_all(writes)
        return _cancel(op, rules.NOT_PROVISIONED, now)
    due = FulfillmentOperation.next_attempt_at.python_value(create[1]) or now
    return Snooze(max((due - now).total_seconds(), 0) + rules.BACKOFF_BASE_S)


@dataclass(frozen=True)
class RunContext:
    id: int
    status: str
    order_id: int
    paused: bool
    paused_at: datetime.datetime | None
    applied: DesiredState  # the entitlement as last applied to the panel
    grace_period_hours: int
    subscription_id: str
    customer_id: str
    slot: int
    remote_user_id: str
    order_status: str
    maintenance_active: bool
    has_open_drifts: bool
    has_earlier_entitlements: bool
    busy_until: datetime.datetime | None  # the lease of another running operation of the entitlement


# One statement instead of seven: the operation and its entitlement (both
# locked), the subscription and order, the maintenance switch (checked inside
# the claim, SPEC 2.15), whether record will have drifts to close or
# entitlements to supersede, and the lease of any other operation of the
# entitlement that is running (under SERIALIZABLE, two claims of one
# entitlement's operations that each miss the other cannot both commit).
_CLAIM_SQL = """
SELECT f.id, f.entitlement_id, f.operation, f.status, f.desired_state, f.attempt_count,
       f.next_attempt_at, f.correlation_id,
       e.status, e.order_id, e.paused_at, e.grace_period_hours,
       s.id, s.customer_id, s.slot, s.remote_user_id, o.status,
       (SELECT m.active FROM maintenance_state m WHERE m.id = 1),
       EXISTS (SELECT 1 FROM entitlement_drifts d WHERE d.entitlement_id = e.id AND d.status = 'open'),
       EXISTS (SELECT 1 FROM entitlements p
               WHERE p.subscription_id = e.subscription_id AND p.id < e.id AND p.status <> 'superseded'),
       e.ends_at, e.traffic_allowance_bytes, e.device_limit, e.squad_ids,
       (SELECT MAX(r.next_attempt_at) FROM fulfillment_operations r
        WHERE r.entitlement_id = f.entitlement_id AND r.id <> f.id AND r.status = 'running')
FROM fulfillment_operations f
JOIN entitlements e ON e.id = f.entitlement_id
JOIN subscriptions s ON s.id = e.subscription_id
JOIN orders o ON o.id = e.order_id
WHERE f.id = %s"""


def _claim_context(operation_id):
    row = fetch_one(_CLAIM_SQL + (" FOR UPDATE OF f, e" if is_postgres() else ""), (operation_id,))
    if row is None:
        return None
    op = OperationRow(
        id=row[0],
        entitlement_id=row[1],
        operation=row[2],
        status=row[3],
        desired_state=row[4],
        attempt_count=row[5],
        next_attempt_at=FulfillmentOperation.next_attempt_at.python_value(row[6]),
        correlation_id=row[7],
    )
    paused_at = Entitlement.paused_at.python_value(row[10])
    context = RunContext(
        id=row[1],
        status=row[8],
        order_id=row[9],
        paused=paused_at is not None,
        paused_at=paused_at,
        applied=DesiredState(
            ends_at=Entitlement.ends_at.python_value(row[20]),
            traffic_allowance_bytes=row[21],
            device_limit=row[22],
            squad_ids=tuple(json.loads(row[23])),
        ),
        grace_period_hours=row[11],
        subscription_id=row[12],
        customer_id=row[13],
        slot=row[14],
        remote_user_id=row[15],
        order_status=row[16],
        maintenance_active=bool(row[17]),
        has_open_drifts=bool(row[18]),
        has_earlier_entitlements=bool(row[19]),
        busy_until=FulfillmentOperation.next_attempt_at.python_value(row[24]),
    )
    return op, context


# -- 2. call -------------------------------------------------------------------------------


def call(claim):
    """The panel requests for one claim; returns Applied or Failed, never raises for the panel."""
    from integrations.remnawave import RemnawaveError

    release_connection()  # nothing pooled is held while the panel answers
    try:
        return _apply(panel(), claim)
    except RemnawaveError as error:
        return Failed(error.code)
    except RemoteUserMissing:
        return Failed(rules.REMOTE_USER_NOT_FOUND)
    except Exception:
        logger.exception("fulfillment call failed unexpectedly", extra={"job_id": claim.operation_id})
        return Failed(rules.INTERNAL_ERROR)


def _aware(value):
    return value.replace(tzinfo=datetime.timezone.utc)


def _find_remote(client, claim):
    if claim.remote_user_id:
        remote = client.get_user(_remote_id(claim.remote_user_id))
        if remote is not None:
            return remote
    for name in candidate_usernames(claim.subscription_id, claim.customer_id, claim.slot):
        remote = client.get_user_by_username(name)
        if remote is not None:
            return remote
    return None


def _remote_id(text):
    return int(text) if text.isascii() and text.isdigit() else text


def _push(client, remote, claim):
    desired = claim.desired
    expire_at = _aware(desired.remote_expire_at(claim.grace_period_hours))
    return client.update_user(
        remote.id,
        # The panel refuses to set an expiry in the past on update; an ended
        # entitlement keeps the expiry the panel already has.
        expire_at if expire_at > datetime.datetime.now(datetime.timezone.utc) else None,
        desired.traffic_limit_bytes,
        desired.hwid_device_limit,
        list(desired.squad_ids),
    )


def _create(client, claim):
    from integrations.remnawave import RemnawaveError

    desired = claim.desired
    username = username_for(claim.subscription_id)
    try:
        return client.create_user(
            username,
            _aware(desired.remote_expire_at(claim.grace_period_hours)),
            desired.traffic_limit_bytes,
            desired.hwid_device_limit,
            list(desired.squad_ids),
        )
    except RemnawaveError as error:
        if error.panel_error_code != USERNAME_EXISTS:
            raise
        # Our own earlier create whose answer was lost: adopt it.
        remote = client.get_user_by_username(username)
        if remote is None:
            raise
        return _push(client, remote, claim)


def _apply(client, claim):
    remote = _find_remote(client, claim)
    operation = claim.operation
    if claim.revoked and operation in ("create", "reconcile"):
        return _keep_revoked(client, claim, remote)
    if operation == "create":
        remote = _push(client, remote, claim) if remote is not None else _create(client, claim)
        if claim.paused:
            if remote.status != "DISABLED":
                remote = client.disable_user(remote.id)
        elif remote.status == "DISABLED":
            remote = client.enable_user(remote.id)
        if claim.desired.reset_traffic:
            remote = client.reset_traffic(remote.id)
        return Applied(remote)
    if operation == "reconcile":
        return _reconcile(client, claim, remote)
    if remote is None:
        raise RemoteUserMissing()
    if operation in ("extend", "set_limits", "set_squads"):
        return Applied(_push(client, remote, claim))
    if operation == "enable":
        return Applied(client.enable_user(_push(client, remote, claim).id))
    if operation == "disable":
        return Applied(client.disable_user(remote.id))
    if operation == "reset_traffic":
        return Applied(client.reset_traffic(remote.id))
    raise ValueError(f"operation {operation!r} has no panel calls")


def _reconcile(client, claim, remote):
    """Compare, record every mismatch, then repair — never enable or reset (a repair, not a purchase)."""
    if remote is None:
        drifts = [("missing_remote", {"exists": True}, {"exists": False}, True)]
        remote = _create(client, claim)
    else:
        drifts = compare(claim, remote)
        remote = _push(client, remote, claim)
    if claim.paused and remote.status != "DISABLED":
        remote = client.disable_user(remote.id)
    return Applied(remote, drifts)


def _keep_revoked(client, claim, remote):
    """A refunded order's user stays disabled: no period pushed, nothing enabled,
    a user that is not there not made (SPEC 2.10, 13.10)."""
    if remote is None:
        return Applied(None)
    drifts = []
    if remote.status != "DISABLED":
        if claim.operation == "reconcile":
            drifts.append(("status", {"value": "DISABLED"}, {"value": remote.status}, True))
        remote = client.disable_user(remote.id)
    return Applied(remote, drifts)


def compare(claim, remote):
    """Mismatches between desired and observed; a desired null limit is unlimited, which
    only the panel's 0 matches (SPEC 2.5); squad order is ignored."""
    desired = claim.desired
    expected_expiry = _aware(desired.remote_expire_at(claim.grace_period_hours))
    observed_expiry = remote.expire_at.astimezone(datetime.timezone.utc)
    drifts = []
    if abs(observed_expiry - expected_expiry) > EXPIRY_TOLERANCE:
        drifts.append(("expiry", _iso(expected_expiry), _iso(observed_expiry), True))
    if desired.traffic_limit_bytes != (remote.traffic_limit_bytes or 0):
        drifts.append(("traffic", desired.traffic_allowance_bytes, remote.traffic_limit_bytes, True))
    if desired.hwid_device_limit != remote.hwid_device_limit:
        # The panel's values: its null (the fallback limit) is not its 0 (no limit).
        drifts.append(("device_limit", desired.hwid_device_limit, remote.hwid_device_limit, True))
    if set(desired.squad_ids) != set(remote.squad_uuids):
        drifts.append(("squads", sorted(desired.squad_ids), sorted(remote.squad_uuids), True))
    if (remote.status == "DISABLED") != claim.paused:
        # A paused entitlement's user is disabled again; a user disabled on
        # the panel is reported but left alone (an operator's disable
        # survives reconcile), so that drift stays open.
        expected = "DISABLED" if claim.paused else "ACTIVE"
        drifts.append(("status", expected, remote.status, claim.paused))
    return [(kind, {"value": exp}, {"value": obs}, corrected) for kind, exp, obs, corrected in drifts]


def _iso(value):
    return value.astimezone(datetime.timezone.utc).replace(tzinfo=None).isoformat(timespec="seconds") + "Z"


# -- 3. record -----------------------------------------------------------------------------


_RECORD_SQL = """
SELECT f.status, f.attempt_count, e.status, e.paused_at
FROM fulfillment_operations f
JOIN entitlements e ON e.id = f.entitlement_id
WHERE f.id = %s"""


def record(claim, outcome):
    now = utcnow()
    row = fetch_one(_RECORD_SQL + (" FOR UPDATE OF f, e" if is_postgres() else ""), (claim.operation_id,))
    if row is None or row[0] != "running" or row[1] != claim.attempt:
        # The lease expired and another run took the operation over: its
        # result, not ours, is the one to keep.
        logger.warning("stale fulfillment run discarded its result", extra={"job_id": claim.operation_id})
        return Done("stale")
    op = OperationRow(
        id=claim.operation_id,
        entitlement_id=claim.entitlement_id,
        operation=claim.operation,
        status=row[0],
        desired_state="",
        attempt_count=row[1],
        next_attempt_at=None,
        correlation_id=claim.correlation_id,
    )
    entitlement_status, paused = row[2], row[3] is not None
    if entitlement_status == "superseded":
        return _cancel(op, rules.ENTITLEMENT_SUPERSEDED, now)

    request_summary = claim.desired.request_summary(claim.grace_period_hours)
    if isinstance(outcome, Failed):
        execute_all(
            [
                _set(
                    op,
                    status="retrying",
                    last_error_code=outcome.code,
                    next_attempt_at=now + datetime.timedelta(seconds=rules.backoff_seconds(claim.attempt)),
                    request_summary=json.dumps(request_summary),
                ),
                _history(op, claim.attempt, "retrying", outcome.code, request_summary),
            ]
        )
        if claim.attempt >= rules.NOTICE_AFTER_ATTEMPTS:
            _notify_failure(op, claim.entitlement_id, outcome.code, "retrying")
        return Retry(outcome.code)

    remote = outcome.remote
    if outcome.drifts or claim.has_open_drifts:
        _record_drifts(claim.entitlement_id, outcome.drifts, now)
    if remote is None:
        return _nothing_to_revoke(op, claim, request_summary, now)
    summary = observed_summary(remote)
    observed = json.dumps(summary)
    applied = claim.desired.entitlement_columns(claim.operation)
    if claim.desired.resume and paused:
        applied.update(ends_at=claim.desired.ends_at, paused_at=None)
        paused = False
    status = "paused" if paused else REMOTE_STATUS.get(remote.status, "failed")
    writes = [
        _set(
            op,
            status="succeeded",
            last_error_code=None,
            completed_at=now,
            request_summary=json.dumps(request_summary),
            response_summary=observed,
        ),
        _observed_entitlement(claim.entitlement_id, status, observed, now, **applied),
        (
            "UPDATE subscriptions SET remote_user_id = %s, remote_username = %s, observed_state = %s WHERE id = %s",
            (str(remote.id), remote.username, observed, claim.subscription_id),
        ),
    ]
    if claim.operation == "create":
        if claim.has_earlier_entitlements:
            writes.append(
                (
                    "UPDATE entitlements SET status = 'superseded', updated_at = %s"
                    " WHERE subscription_id = %s AND id < %s AND status <> 'superseded'",
                    (now, claim.subscription_id, claim.entitlement_id),
                )
            )
        writes.append(_fulfil_orders_of_subscription(claim, now))
        if status == "active":
            writes.append(_access_ready(claim, now))
    elif settled_order(claim.correlation_id) is not None:
        # An add-on's set_limits: its own order, not the entitlement's, is fulfilled by it.
        writes.append(_fulfil_order(settled_order(claim.correlation_id), now))
    writes.append(_history(op, claim.attempt, "succeeded", None, request_summary, summary))
    execute_all(writes)
    return Done("succeeded")


def _access_ready(claim, now):
    """The customer's "your access is ready" notice (SPEC 14.4), once per entitlement, in this
    transaction: it exists exactly when the create's success does. It names the subscription
    and the entitlement only; the bot reads the link from the panel when it delivers it. A
    renewal's create is told as `access_renewed` instead: the same user and link, a new end."""
    payload = json.dumps({"entitlementId": claim.entitlement_id, "subscriptionId": claim.subscription_id})
    return (
        "INSERT INTO customer_notices (customer_id, kind, dedupe_key, payload, created_at)"
        " SELECT s.customer_id, CASE WHEN o.operation = 'renewal' THEN %s ELSE %s END, %s, %s, %s"
        " FROM subscriptions AS s JOIN entitlements AS e ON e.id = %s LEFT JOIN orders AS o ON o.id = e.order_id"
        " WHERE s.id = %s"
        " ON CONFLICT (kind, dedupe_key) DO NOTHING",
        (rules.NOTICE_CUSTOMER_ACCESS_RENEWED, rules.NOTICE_CUSTOMER_ACCESS_READY,
         f"entitlement:{claim.entitlement_id}", payload, now, claim.entitlement_id, claim.subscription_id),
    )  # fmt: skip


def _fulfil_orders_of_subscription(claim, now):
    """The create's own order, and every earlier paid order of the subscription, move to fulfilled.

    The user now holds this entitlement's state, which continues or replaces
    every earlier one (they are superseded here or were at settlement). An
    earlier create cancelled as superseded before it reached the panel (a
    renewal settled while the purchase still waited for the worker) never
    records: without this its order would stay `paid` although what it bought
    is delivered."""
    return (
        "UPDATE orders SET status = 'fulfilled', fulfilled_at = %s WHERE status = 'paid'"
        " AND id IN (SELECT order_id FROM entitlements WHERE subscription_id = %s AND id <= %s)",
        (now, claim.subscription_id, claim.entitlement_id),
    )


def _fulfil_order(order_id, now):
    """A paid order moves to fulfilled, never from anything else (a refund stays a refund: SPEC 2.10)."""
    return (
        "UPDATE orders SET status = 'fulfilled', fulfilled_at = %s WHERE id = %s AND status = 'paid'",
        (now, order_id),
    )


def settled_order(correlation_id):
    """The order a settlement queued this operation for (correlation `order:<id>`), else None."""
    kind, _, reference = str(correlation_id).partition(":")
    return int(reference) if kind == "order" and reference.isascii() and reference.isdigit() else None


def _observed_entitlement(entitlement_id, status, observed, now, **applied):
    """What a success writes to the entitlement: the observed state, and the fields
    the operation changed (`applied`, its own only: SPEC 2.19)."""
    # No index of entitlements holds a column written here (migration 0007):
    # the update stays on its page and conflicts with no neighbouring record.
    columns = {"status": status, "observed_state": observed, "reconciled_at": now, "updated_at": now, **applied}
    assignments = ", ".join(f"{column} = %s" for column in columns)
    return (f"UPDATE entitlements SET {assignments} WHERE id = %s", (*columns.values(), entitlement_id))


def _nothing_to_revoke(op, claim, request_summary, now):
    """A refunded order's user is not on the panel: a create that may have made it
    made nothing (cancelled, its entitlement superseded, SPEC 2.10); a reconcile
    has nothing to keep disabled."""
    if claim.operation == "create":
        execute_all([_supersede_pending(claim.entitlement_id, now)])
        return _cancel(op, rules.ORDER_REFUNDED, now)
    execute_all(
        [
            _set(op, status="succeeded", last_error_code=None, completed_at=now),
            (
                "UPDATE entitlements SET reconciled_at = %s, updated_at = %s WHERE id = %s",
                (now, now, claim.entitlement_id),
            ),
            _history(op, claim.attempt, "succeeded", None, request_summary),
        ]
    )
    return Done("succeeded")


def give_back_lease(claim):
    """This run could not record its outcome: let the next run take over now
    instead of when the 2-minute lease ends (it calls the panel again, which
    is safe: every call is idempotent by construction)."""
    try:
        FulfillmentOperation.update(next_attempt_at=utcnow(), updated_at=utcnow()).where(
            FulfillmentOperation.id == claim.operation_id,
            FulfillmentOperation.status == "running",
            FulfillmentOperation.attempt_count == claim.attempt,
        ).execute()
    except Exception:
        logger.exception("could not give back a fulfillment lease", extra={"job_id": claim.operation_id})


def _record_drifts(entitlement_id, drifts, now):
    """Open (or refresh) a drift per mismatch, then close every drift this run corrected."""
    still_open = set()
    for kind, expected, observed, corrected in drifts:
        updated = (
            EntitlementDrift.update(expected=json.dumps(expected), observed=json.dumps(observed), detected_at=now)
            .where(
                EntitlementDrift.entitlement == entitlement_id,
                EntitlementDrift.kind == kind,
                EntitlementDrift.status == "open",
            )
            .execute()
        )
        if not updated:
            EntitlementDrift.create(
                entitlement=entitlement_id,
                kind=kind,
                status="open",
                expected=json.dumps(expected),
                observed=json.dumps(observed),
                detected_at=now,
            )
        if not corrected:
            still_open.add(kind)
    query = EntitlementDrift.update(status="resolved", resolved_at=now).where(
        EntitlementDrift.entitlement == entitlement_id, EntitlementDrift.status == "open"
    )
    if still_open:
        query = query.where(EntitlementDrift.kind.not_in(list(still_open)))
    query.execute()
