"""Support records: tickets, their messages, and the attachment rows behind files named by their content digest
(SPEC 7, 14.4, 14.7)."""

from peewee import BigAutoField, BigIntegerField, DateTimeField, ForeignKeyField, TextField

from models.base import BaseModel, utcnow
from models.commerce import Customer

TICKET_STATUSES = ("open", "answered", "closed")
AUTHORS = ("customer", "operator")
PUSH_STATUSES = ("pending", "sent", "unreachable", "failed")


class SupportTicket(BaseModel):
    id = BigAutoField()
    customer = ForeignKeyField(Customer, backref="+", column_name="customer_id")
    chat_id = BigIntegerField()
    status = TextField(default="open")
    created_at = DateTimeField(default=utcnow)
    updated_at = DateTimeField(default=utcnow)

    class Meta:
        table_name = "support_tickets"


class SupportMessage(BaseModel):
    """One message of a ticket's thread; an operator's reply carries `push_status` until the bot delivered it."""

    id = BigAutoField()
    ticket = ForeignKeyField(SupportTicket, backref="+", column_name="ticket_id")
    author = TextField()
    operator_username = TextField(null=True)
    text = TextField(default="")
    push_status = TextField(null=True)
    pushed_at = DateTimeField(null=True)
    created_at = DateTimeField(default=utcnow)

    class Meta:
        table_name = "support_messages"


class SupportAttachment(BaseModel):
    id = BigAutoField()
    ticket_id = BigIntegerField(null=True)
    message_id = BigIntegerField(null=True)
    digest = TextField()  # SHA-256 of the content, hex: also the file's name
    size_bytes = BigIntegerField()
    content_type = TextField()
    expires_at = DateTimeField()
    created_at = DateTimeField(default=utcnow)

    class Meta:
        table_name = "support_attachments"


SUPPORT_MODELS = [SupportTicket, SupportMessage, SupportAttachment]
