"""The `provider_refund` job (SPEC 13.10): one refund sent to its provider's refund API, never lost, never doubled.

commerce/refunds.py (which imports this module, so the kind is declared
wherever a refund can be made) inserts the job in the refund's own transaction, so a
refund that committed always has its call waiting, whatever crashes after.
The job reads the refund, calls the provider outside any transaction, and
records the answer under the refund row's lock:

- YooKassa through its SDK with the refund's `idempotence_key` as the
  Idempotence-Key: a call repeated after a timeout or a worker's crash gets
  the first refund back, not a second one;
- Telegram Stars with `refundStarPayment`: a charge refunded already is
  answered CHARGE_ALREADY_REFUNDED, which means the refund stands.

A refund the provider has done → `succeeded`; accepted but not final
(YooKassa's `pending`) → `processing`, and the job snoozes (no attempt
spent) and asks YooKassa for the refund every PROCESSING_POLL_S until it is
`succeeded` or `canceled`, or PROCESSING_LIMIT has passed (`failed`,
`refund_not_settled`); a transient failure (timeout, 5xx, 429) → the job
retries with backoff and the row keeps the last error code (YooKassa keeps
an idempotence key for 24 hours, longer than the 12 attempts' backoff);
a refusal, a cancellation or the last attempt spent → `failed` with its
code and one `refund_failed` operator notice: the ledger has booked the
refund, so an operator pays it back by hand or refunds it to the wallet.

YooKassa also notifies a refund that succeeded (`refund.succeeded`). The
webhook intake (commerce/webhooks.py) does not trust it as such: it fetches
the refund from the API and `apply_notified_refund` records what the API
says exactly as the poll would, under the same row lock, so a refund whose
job died after YooKassa accepted it (or whose answer was lost) is finished
by the notification, and the job, when it runs, finds it done. A row
already finished, a replayed notification, a refund that is not ours:
nothing changes.
"""

import datetime
import logging

from commerce import providers
from integrations.payments import STATUS_CANCELED, STATUS_SUCCEEDED, ProviderError
from jobs import UNIQUE_WHILE_ACTIVE, JobSnooze, current_job, huey
from models.base import db, utcnow
from models.commerce import Customer, Order
from models.payments import Refund
from models.transactions import locked
from ops.records import queue_notice

logger = logging.getLogger("omniflow.commerce.refunds")

JOB_KIND = "provider_refund"
ATTEMPTS = 12
NOTICE_REFUND_FAILED = "refund_failed"
REFUND_CANCELED = "refund_canceled"  # the provider canceled the refund it had accepted
REFUND_NOT_SETTLED = "refund_not_settled"  # still processing at the provider after PROCESSING_LIMIT
PROCESSING_POLL_S = 60
PROCESSING_LIMIT = datetime.timedelta(days=30)
OPEN_STATES = ("pending", "processing")

# Outcomes of a refund notification, kept on its provider_webhook_events row.
NOTIFIED_RECORDED = "refund_recorded"  # the notification finished the refund (succeeded, or failed if canceled)
NOTIFIED_PROCESSING = "refund_processing"  # the provider still works on it: the job keeps polling
NOTIFIED_ALREADY_RECORDED = "refund_already_recorded"  # the job (or an earlier notification) had finished it
NOTIFIED_UNMATCHED = "refund_unmatched"  # no refund of ours (one made at the provider's dashboard, say)
NOTICE_REFUND_UNMATCHED = "refund_unmatched"  # the operator notice of it


class RefundRetry(Exception):
    """The provider could not answer now; the queue runs the job again with backoff."""

    def __init__(self, code):
        super().__init__(code)
        self.code = code


@huey.job(JOB_KIND, max_attempts=ATTEMPTS, unique_states=UNIQUE_WHILE_ACTIVE)
def provider_refund(refundId):
    refund = Refund.get_or_none(Refund.id == refundId)
    if refund is None or refund.status not in OPEN_STATES:
        return None if refund is None else refund.status
    try:
        answer = _call(refund) if refund.status == "pending" else _ask(refund)
    except providers.ProviderNotConfigured as missing:
        return _failed_or_retry(refund, missing.code, transient=True)
    except ProviderError as error:
        return _failed_or_retry(refund, error.code, transient=error.transient)
    status = _apply(refund, answer)
    if status == "processing":
        raise JobSnooze(PROCESSING_POLL_S)
    return status


def _apply(refund, answer):
    """What the provider says of a refund, recorded; returns the row's status after (another run's if it won)."""
    if answer.status == STATUS_CANCELED:
        return _failed(refund, REFUND_CANCELED)
    if answer.status == STATUS_SUCCEEDED:
        return _record(refund, "succeeded", provider_refund_id=answer.refund_id, last_error_code=None)
    if utcnow() - refund.created_at > PROCESSING_LIMIT:
        return _failed(refund, REFUND_NOT_SETTLED)
    return _record(refund, "processing", provider_refund_id=answer.refund_id, last_error_code=None)


def apply_notified_refund(answer):
    """A refund the provider notified us of (YooKassa's `refund.succeeded`), `answer` being the refund as its
    API holds it (commerce/webhooks.py fetches it: a notification is only a hint): its row finished as the
    job's poll finishes it. Returns the outcome kept on the webhook event."""
    refund, candidates = _notified_refund(answer)
    if refund is None:
        if candidates:
            return NOTIFIED_UNMATCHED  # two of ours it could be: their jobs finish them
        # Money left the shop that no refund of ours accounts for (made in the provider's dashboard,
        # say): the ledger does not know of it, so an operator must, once per provider refund.
        queue_notice(
            NOTICE_REFUND_UNMATCHED,
            f"{answer.provider}:{answer.refund_id}",
            {
                "provider": answer.provider,
                "providerRefundId": answer.refund_id,
                "paymentId": answer.payment_id,
                "status": answer.status,
                "amountMinor": answer.amount_minor,
                "currency": answer.currency,
            },
        )
        return NOTIFIED_UNMATCHED
    if refund.status not in OPEN_STATES:
        return NOTIFIED_ALREADY_RECORDED
    status = _apply(refund, answer)
    if status == "processing":
        return NOTIFIED_PROCESSING
    return NOTIFIED_RECORDED if status != refund.status else NOTIFIED_ALREADY_RECORDED


def _notified_refund(answer):
    """Our row of the provider's refund: by its refund id once recorded; before that (the notification can
    come before the job has recorded the provider's answer, or after the job died in between) the one
    pending refund of that payment for that amount. Two such rows cannot be told apart: None, and each
    job's own call and poll (each with its own Idempotence-Key) finish them. Returns (the row or None,
    how many rows it could be)."""
    recorded = Refund.get_or_none(Refund.provider == answer.provider, Refund.provider_refund_id == answer.refund_id)
    if recorded is not None:
        return recorded, 1
    candidates = list(
        Refund.select()
        .where(
            Refund.provider == answer.provider,
            Refund.provider_payment_id == answer.payment_id,
            Refund.status == "pending",
            Refund.provider_refund_id.is_null(),
            Refund.destination == "provider",
            Refund.amount_minor == answer.amount_minor,
            Refund.currency == answer.currency,
        )
        .limit(2)
    )
    return (candidates[0] if len(candidates) == 1 else None), len(candidates)


def _ask(refund):
    """How a refund the provider accepted stands now."""
    return providers.refund_adapter(refund.provider).fetch_refund(refund.provider_refund_id)


def _call(refund):
    adapter = providers.refund_adapter(refund.provider)
    extra = {}
    if refund.provider == providers.STARS:
        order = Order.get_by_id(refund.order_id)
        extra["payer_id"] = Customer.get_by_id(order.customer_id).telegram_id
    return adapter.refund(
        payment_id=refund.provider_payment_id,
        amount_minor=refund.amount_minor,
        currency=refund.currency,
        idempotence_key=refund.idempotence_key,
        description=f"Refund of order {refund.order_id}",
        **extra,
    )


def _failed_or_retry(refund, code, transient):
    job = current_job()
    if transient and (job is None or job.attempt < ATTEMPTS):
        _record(refund, refund.status, last_error_code=code)
        logger.warning("provider refund will be retried", extra={"reason": f"refund {refund.id}: {code}"})
        raise RefundRetry(code)
    return _failed(refund, code)


def _failed(refund, code):
    return _record(refund, "failed", last_error_code=code)


def _record(refund, status, **columns):
    """Write the answer unless another run already recorded a different one; returns the row's
    status after. A refund that failed queues its operator notice in the same transaction."""
    with db.atomic():
        current = locked(Refund.select().where(Refund.id == refund.id)).get()
        if current.status != refund.status:
            return current.status
        now = utcnow()
        final = status in ("succeeded", "failed")
        Refund.update(status=status, updated_at=now, completed_at=now if final else None, **columns).where(
            Refund.id == refund.id
        ).execute()
        if status == "failed":
            queue_notice(
                NOTICE_REFUND_FAILED,
                f"refund:{refund.id}",
                {
                    "refundId": refund.id,
                    "orderId": refund.order_id,
                    "provider": refund.provider,
                    "amountMinor": refund.amount_minor,
                    "currency": refund.currency,
                    "errorCode": columns.get("last_error_code"),
                },
            )
        return status
