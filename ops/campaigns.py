"""Campaigns and announcements an operator sends to customers through the bot (SPEC 6, 14.6): creating one with
its recipients, and what a campaign's delivery looks like.

`create_campaign` writes the campaign, one `pending` recipient per customer
in its audience, and the audit event in one transaction; the bot's delivery
loop (bot/campaigns.py) sends them. The audience is every customer with a
Telegram chat who has not blocked the bot (`telegram_unreachable_at`), or
the customers named; a campaign (marketing) also leaves out customers an
operator blocked, an announcement (service news) does not. The recipients
are inserted by one INSERT … SELECT, so even a large audience is one
statement; the campaign_expansion pass of the campaigns issue replaces this
for audiences built from segments.
"""

from peewee import fn

from models.base import db, utcnow
from models.campaigns import CAMPAIGN_KINDS, RECIPIENT_STATUSES, Campaign, CampaignRecipient
from models.commerce import Customer
from ops.records import record_audit

MAX_TEXT_LENGTH = 4096  # Telegram's limit on a message's text
MAX_NAMED_CUSTOMERS = 10_000

INVALID_CAMPAIGN_KIND = "invalid_campaign_kind"
INVALID_CAMPAIGN_TEXT = "invalid_campaign_text"
INVALID_AUDIENCE = "invalid_audience"
EMPTY_AUDIENCE = "empty_audience"
CAMPAIGN_NOT_FOUND = "campaign_not_found"

CATEGORY = "campaigns"
CREATED = "campaign.created"


class CampaignRejected(Exception):
    def __init__(self, code, detail):
        super().__init__(detail)
        self.code = code
        self.detail = detail


def validate(kind, text, customer_ids):
    if kind not in CAMPAIGN_KINDS:
        raise CampaignRejected(INVALID_CAMPAIGN_KIND, f"kind must be one of {', '.join(CAMPAIGN_KINDS)}")
    if not isinstance(text, str) or not text.strip() or len(text) > MAX_TEXT_LENGTH:
        raise CampaignRejected(INVALID_CAMPAIGN_TEXT, f"text must be 1 to {MAX_TEXT_LENGTH} characters")
    if customer_ids is not None:
        if (
            not isinstance(customer_ids, list)
            or not customer_ids
            or len(customer_ids) > MAX_NAMED_CUSTOMERS
            or not all(isinstance(value, str) and 0 < len(value) <= 64 for value in customer_ids)
        ):
            raise CampaignRejected(
                INVALID_AUDIENCE, f"customerIds must be a list of 1 to {MAX_NAMED_CUSTOMERS} customer ids"
            )


def audience(kind, customer_ids=None):
    query = Customer.select(Customer.id, Customer.telegram_id).where(
        Customer.telegram_id.is_null(False), Customer.telegram_unreachable_at.is_null()
    )
    if kind == "campaign":
        query = query.where(Customer.blocked == False)  # noqa: E712
    if customer_ids is not None:
        query = query.where(Customer.id.in_(sorted(set(customer_ids))))
    return query


def create_campaign(kind, text, actor, reason, customer_ids=None):
    """The campaign with its recipients, or CampaignRejected (nothing written)."""
    validate(kind, text, customer_ids)
    with db.atomic():
        campaign = Campaign.create(kind=kind, text=text, created_by=actor, created_at=utcnow())
        members = audience(kind, customer_ids).select(campaign.id, Customer.id, Customer.telegram_id)
        CampaignRecipient.insert_from(
            members, [CampaignRecipient.campaign, CampaignRecipient.customer, CampaignRecipient.chat_id]
        ).execute()
        count = CampaignRecipient.select().where(CampaignRecipient.campaign == campaign.id).count()
        if count == 0:  # raised inside the transaction: the campaign row goes with it
            raise CampaignRejected(EMPTY_AUDIENCE, "no customer in the audience can be reached through the bot")
        Campaign.update(recipients=count).where(Campaign.id == campaign.id).execute()
        record_audit(CATEGORY, CREATED, actor, reason, "campaign", campaign.id, {"kind": kind, "recipients": count})
    return Campaign.get_by_id(campaign.id)


def progress(campaign_id):
    """{status: recipients} of a campaign, every status present."""
    rows = (
        CampaignRecipient.select(CampaignRecipient.status, fn.COUNT(CampaignRecipient.id))
        .where(CampaignRecipient.campaign == campaign_id)
        .group_by(CampaignRecipient.status)
        .tuples()
    )
    counts = dict.fromkeys(RECIPIENT_STATUSES, 0)
    counts.update({status: count for status, count in rows})
    return counts
