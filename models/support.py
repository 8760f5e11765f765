"""Support records: the attachment rows behind files named by their content digest (SPEC 7)."""

from peewee import BigAutoField, BigIntegerField, DateTimeField, TextField

from models.base import BaseModel, utcnow


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
