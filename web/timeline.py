"""A customer's timeline on their page (SPEC 13.14): orders, payments, refunds,
fulfillment operations, notices and support messages in one list, newest
first, at most TIMELINE_ROWS entries.

Each kind is read by its own query, newest first and limited to
TIMELINE_ROWS, so the page reads six bounded queries whatever the
customer's history; the newest TIMELINE_ROWS of their union are shown. The
kinds an operator may not read are left out (orders, payments and refunds
need `payments.read`, support messages `support.read`); the full lists are
the customer page's own sections and the pages they link to.
"""

from dataclasses import dataclass

from models.commerce import Order, Subscription
from models.fulfillment import Entitlement, FulfillmentOperation
from models.ops import CustomerNotice
from models.payments import PaymentIntent, Refund
from models.support import SupportMessage, SupportTicket
from web import references, wording

TIMELINE_ROWS = 100
SUPPORT_PREVIEW = 80


@dataclass(frozen=True)
class Entry:
    at: object  # naive UTC
    kind: str  # order, payment, refund, operation, notice, support
    text: str
    status: str  # as stored
    shown: str  # the status in words (web/wording.py)
    href: str | None


def _words(stored):
    return stored.replace("_", " ")


def _newest(query, field):
    return list(query.order_by(field.desc()).limit(TIMELINE_ROWS))


def timeline(customer_id, money, payments=True, support=True):
    """[Entry] of the customer, newest first, at most TIMELINE_ROWS."""
    entries = []
    if payments:
        for order in _newest(Order.select().where(Order.customer == customer_id), Order.id):
            entries.append(
                Entry(
                    order.created_at,
                    "order",
                    f"order {order.id}: {wording.order_kind(order.operation)}, "
                    f"{money(order.amount_minor, order.currency)}",
                    order.status,
                    wording.order_status(order.status),
                    references.order_page(order.id),
                )
            )
        intents = PaymentIntent.select().join(Order).where(Order.customer == customer_id)
        for intent in _newest(intents, PaymentIntent.id):
            entries.append(
                Entry(
                    intent.created_at,
                    "payment",
                    f"payment {intent.id} at "
                    f"{wording.provider_name(intent.provider)}, "
                    f"{money(intent.amount_minor, intent.currency)}",
                    intent.status,
                    wording.payment_status(intent.status),
                    references.payment_page(intent.id),
                )
            )
        for refund in _newest(Refund.select().join(Order).where(Order.customer == customer_id), Refund.id):
            entries.append(
                Entry(
                    refund.created_at,
                    "refund",
                    f"refund of order {refund.order_id}, {money(refund.amount_minor, refund.currency)}",
                    refund.status,
                    wording.refund_status(refund.status),
                    references.order_page(refund.order_id),
                )
            )
    operations = (
        FulfillmentOperation.select().join(Entitlement).join(Subscription).where(Subscription.customer == customer_id)
    )
    for operation in _newest(operations, FulfillmentOperation.id):
        entries.append(
            Entry(
                operation.created_at,
                "operation",
                f"{operation.operation} on the panel",
                operation.status,
                _words(operation.status),
                references.operation_page(operation.id),
            )
        )
    notices = CustomerNotice.select().where(CustomerNotice.customer == customer_id)
    for notice in _newest(notices, CustomerNotice.id):
        entries.append(
            Entry(
                notice.created_at,
                "notice",
                f"notice: {_words(notice.kind)}",
                notice.status,
                _words(notice.status),
                None,
            )
        )
    if support:
        messages = SupportMessage.select().join(SupportTicket).where(SupportTicket.customer == customer_id)
        for message in _newest(messages, SupportMessage.id):
            text = message.text if len(message.text) <= SUPPORT_PREVIEW else message.text[:SUPPORT_PREVIEW] + "…"
            entries.append(
                Entry(
                    message.created_at,
                    "support",
                    f"{message.author}: {text}",
                    "",
                    "",
                    references.ticket_page(message.ticket_id),
                )
            )
    entries.sort(key=lambda entry: entry.at, reverse=True)
    return entries[:TIMELINE_ROWS]
