"""Support tickets (SPEC 14.4, 14.6): a customer writes (text and photos) from the bot, an operator replies from the
panel, and the bot pushes the reply to the customer's chat.

Each function runs in the caller's transaction: the bot's update
transaction for a customer's message, the panel route's for a reply. A
customer with a ticket still open (`open` or `answered`) adds to it;
otherwise a new ticket opens. An operator's reply is a message with
`push_status = pending` that bot/support_push.py delivers; the ticket is
`answered` until the customer writes again.

Photos are files named by their SHA-256 under APP_SUPPORT_ATTACHMENT_DIR
(ops/attachments.py): the same picture sent twice is one file. A file is
written before the transaction commits — if it rolls back, the file is
left without a row, and the next upload of the same bytes names it again
(retention removes files that no surviving row names, SPEC 7). Anything
over the size cap is refused before a byte is fetched or written.
"""

import datetime
import hashlib
import os
import tempfile

from models.base import utcnow
from models.support import SupportAttachment, SupportMessage, SupportTicket
from ops.attachments import path_for
from ops.records import record_audit

MAX_TEXT_LENGTH = 4096
ATTACHMENT_TTL = datetime.timedelta(days=90)
OPEN_STATUSES = ("open", "answered")

INVALID_SUPPORT_TEXT = "invalid_support_text"
ATTACHMENT_TOO_LARGE = "attachment_too_large"
ATTACHMENTS_OFF = "attachments_off"
TICKET_NOT_FOUND = "ticket_not_found"
TICKET_CLOSED = "ticket_closed"

CATEGORY = "support"
REPLIED = "support.replied"


class SupportRejected(Exception):
    def __init__(self, code, detail):
        super().__init__(detail)
        self.code = code
        self.detail = detail


def check_text(text, required=True):
    if not isinstance(text, str) or len(text) > MAX_TEXT_LENGTH or (required and not text.strip()):
        raise SupportRejected(INVALID_SUPPORT_TEXT, f"text must be 1 to {MAX_TEXT_LENGTH} characters")


def store_file(directory, content):
    """Write `content` as <directory>/<sha256>, atomically (a reader never sees half a file); returns the digest."""
    digest = hashlib.sha256(content).hexdigest()
    target = path_for(directory, digest)
    if os.path.exists(target):
        return digest
    os.makedirs(directory, exist_ok=True)
    handle, scratch = tempfile.mkstemp(dir=directory, prefix=".upload-")
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(content)
        os.replace(scratch, target)
    except BaseException:
        if os.path.exists(scratch):
            os.unlink(scratch)
        raise
    return digest


def current_ticket(customer_id):
    return (
        SupportTicket.select()
        .where(SupportTicket.customer == customer_id, SupportTicket.status.in_(OPEN_STATUSES))
        .order_by(SupportTicket.id.desc())
        .first()
    )


def customer_writes(customer_id, chat_id, text, attachments=()):
    """The customer's message on their open ticket (a new one if none is open): (ticket, message).

    `attachments` are (digest, size, content type) of files already stored."""
    check_text(text, required=not attachments)
    now = utcnow()
    ticket = current_ticket(customer_id)
    if ticket is None:
        ticket = SupportTicket.create(customer=customer_id, chat_id=chat_id, created_at=now, updated_at=now)
    else:
        SupportTicket.update(status="open", chat_id=chat_id, updated_at=now).where(
            SupportTicket.id == ticket.id
        ).execute()
    message = SupportMessage.create(ticket=ticket.id, author="customer", text=text, created_at=now)
    for digest, size, content_type in attachments:
        SupportAttachment.create(
            ticket_id=ticket.id, message_id=message.id, digest=digest, size_bytes=size, content_type=content_type,
            expires_at=now + ATTACHMENT_TTL, created_at=now,
        )  # fmt: skip
    return ticket, message


def operator_replies(ticket_id, operator_username, text, reason):
    """An operator's reply, queued for the bot to push; the audit event in the same transaction."""
    check_text(text)
    ticket = SupportTicket.get_or_none(SupportTicket.id == ticket_id)
    if ticket is None:
        raise SupportRejected(TICKET_NOT_FOUND, f"ticket {ticket_id} does not exist")
    if ticket.status == "closed":
        raise SupportRejected(TICKET_CLOSED, f"ticket {ticket_id} is closed")
    now = utcnow()
    message = SupportMessage.create(
        ticket=ticket.id, author="operator", operator_username=operator_username, text=text,
        push_status="pending", created_at=now,
    )  # fmt: skip
    SupportTicket.update(status="answered", updated_at=now).where(SupportTicket.id == ticket.id).execute()
    record_audit(CATEGORY, REPLIED, f"operator:{operator_username}", reason, "support_ticket", ticket.id,
                 {"messageId": message.id})  # fmt: skip
    return message
