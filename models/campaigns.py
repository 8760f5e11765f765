"""Campaigns and announcements: one text for many chats, and the recipients it goes to (SPEC 6, 14.6)."""

from peewee import BigAutoField, BigIntegerField, DateTimeField, ForeignKeyField, IntegerField, TextField

from models.base import BaseModel, utcnow
from models.commerce import Customer, Plan

CAMPAIGN_KINDS = ("campaign", "announcement")
# `draft`: not started; `scheduled`: starts at start_at; `paused`: the bot sends none of it until resumed.
CAMPAIGN_STATUSES = ("draft", "scheduled", "sending", "paused", "done")
# Who a campaign goes to (SPEC 15.5; ops/campaigns.py says what each means). `named`: customers an operator listed.
AUDIENCES = ("all", "active", "expired", "trial-only", "never-paid", "plan", "named")
# `sending`: claimed just before the Telegram call (migration 0020 says why).
RECIPIENT_STATUSES = ("pending", "sending", "sent", "unreachable", "failed")


class Campaign(BaseModel):
    id = BigAutoField()
    kind = TextField(default="campaign")
    text = TextField()
    status = TextField(default="sending")
    recipients = IntegerField(default=0)
    created_by = TextField()
    created_at = DateTimeField(default=utcnow)
    finished_at = DateTimeField(null=True)
    audience = TextField(default="all")
    plan = ForeignKeyField(Plan, null=True, backref="+", column_name="plan_id")
    start_at = DateTimeField(null=True)  # None: a draft
    expanded_at = DateTimeField(null=True)  # None: the campaign_expansion pass has recipients left to write
    expansion_cursor = TextField(null=True)  # the last customer id the pass went through
    left_out_blocked = IntegerField(default=0)
    left_out_unreachable = IntegerField(default=0)

    class Meta:
        table_name = "campaigns"


class CampaignRecipient(BaseModel):
    id = BigAutoField()
    campaign = ForeignKeyField(Campaign, backref="+", column_name="campaign_id")
    customer = ForeignKeyField(Customer, backref="+", column_name="customer_id")
    chat_id = BigIntegerField()
    status = TextField(default="pending")
    attempts = IntegerField(default=0)
    error_code = TextField(null=True)
    sent_at = DateTimeField(null=True)

    class Meta:
        table_name = "campaign_recipients"
        indexes = ((("campaign", "customer"), True),)


CAMPAIGN_MODELS = [Campaign, CampaignRecipient]
