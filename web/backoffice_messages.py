"""What goes to customers and what they write, in the back office (SPEC 6, 14.4, 14.6): Campaigns and Support.

/panel/campaigns                                   campaigns newest first, with their delivery counts, and
                                                   the form that previews an audience and queues a new one
                                                   (now, at a time, or as a draft) (campaigns.write)
/panel/campaigns/{id}                              a campaign: text, audience, schedule, status, recipients per
                                                   status and those left out, start / pause / resume, and the
                                                   recipients it did not reach with why (campaigns.write)
/panel/support                                     tickets of a status, most recently active first (support.read)
/panel/support/tickets/{id}                        a ticket's messages with their attachments, and the reply
                                                   form (support.read; replying needs support.write)
/panel/support/tickets/{id}/attachments/{digest}   one attachment's file (support.read)

Server-rendered like the other pages (web/pages.py: the same session,
permission, 403 and 503), from the same reads as the panel API
(web/campaigns.py, web/support.py). Queueing a campaign and replying call
that API with the operator's reason, so its rules, refusals and audit are
the API's, and so do the campaign's Start, Pause and Resume buttons. The
form's "Preview the audience" asks the API how many customers the audience
holds now and shows the figures in the form (it writes nothing).

An attachment is served only when a `support_attachments` row of that very
ticket names its digest: the path is built from the digest the row holds
(ops/attachments.py checks it), never from the request, and the content
type is the row's only when it is an image type a browser shows as a
picture; anything else is a download of octet-stream, so a file can never
run as a page of this origin.
"""

import bottle
from peewee import fn

from models.campaigns import CAMPAIGN_KINDS, RECIPIENT_STATUSES, Campaign, CampaignRecipient
from models.commerce import Plan
from models.support import TICKET_STATUSES, SupportAttachment, SupportMessage, SupportTicket
from ops import attachments, campaigns, operators
from ops.campaigns import MAX_TEXT_LENGTH as CAMPAIGN_TEXT_LENGTH
from ops.support import MAX_TEXT_LENGTH as REPLY_TEXT_LENGTH
from web import panel, problems, references, support
from web.answers import id_param
from web.backoffice_pages import show
from web.pages import page
from web.problems import Problem

CAMPAIGN_ROWS = 25
# The audiences the form offers besides `all` (ops/campaigns.py says what each holds).
AUDIENCE_LABELS = (
    ("active", "active: a period live now"),
    ("expired", "expired: had access, hold none now"),
    ("trial-only", "trial only: took a free trial, never paid"),
    ("never-paid", "never paid"),
    ("plan", "holders of a plan (choose it)"),
)
TICKET_ROWS = 100
MISSED_ROWS = 50  # recipients a campaign did not reach, shown on its page
# Image types a browser shows inline; Telegram re-encodes every photo as JPEG (bot/handlers/support.py).
INLINE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
# What a recipient's error code (bot/campaigns.py) means to an operator.
RECIPIENT_ERRORS = {
    "403": "The customer blocked the bot; later campaigns leave them out.",
    "429": "Telegram asked to slow down too many times in a row.",
    "interrupted": "The bot stopped while sending this one; it is not sent again, since Telegram may have it.",
    "unknown": "Telegram did not answer in time; it may have delivered the message, so it is not sent again.",
}


def attachment_url(attachment):
    return f"{references.ticket_page(attachment.ticket_id)}/attachments/{attachment.digest}"


def recipient_error(code):
    if not code:
        return ""
    if code in RECIPIENT_ERRORS:
        return RECIPIENT_ERRORS[code]
    if code.isascii() and code.isdigit():
        return f"Telegram answered HTTP {code}; the bot tried up to five times."
    return "No explanation is recorded for this code; look it up in the bot's log."


def delivery_counts(campaign_ids):
    """{campaign id: {status: recipients}} of a page of campaigns, in one grouped read."""
    counts = {campaign_id: dict.fromkeys(RECIPIENT_STATUSES, 0) for campaign_id in campaign_ids}
    if campaign_ids:
        recipient = CampaignRecipient
        rows = (
            recipient.select(recipient.campaign, recipient.status, fn.COUNT(recipient.id))
            .where(CampaignRecipient.campaign.in_(campaign_ids))
            .group_by(CampaignRecipient.campaign, CampaignRecipient.status)
            .tuples()
        )
        for campaign_id, status, count in rows:
            counts[campaign_id][status] = count
    return counts


def campaigns_page(cursor, limit):
    """One keyset page of campaigns, newest first: (rows, the next page's cursor or None)."""
    rows = Campaign.select()
    if cursor:
        rows = rows.where(Campaign.id < panel.decode_cursor(cursor))
    found = list(rows.order_by(Campaign.id.desc()).limit(limit + 1))
    return found[:limit], panel.encode_cursor(found[limit - 1].id) if len(found) > limit else None


def campaign_or_404(raw):
    campaign_id = id_param(raw, problems.INVALID_CAMPAIGN_ID, "a campaign id")
    campaign = Campaign.get_or_none(Campaign.id == campaign_id)
    if campaign is None:
        raise Problem(404, campaigns.CAMPAIGN_NOT_FOUND, f"campaign {campaign_id} does not exist")
    return campaign


def ticket_thread(ticket):
    """(messages oldest first, {message id: [attachments]}) of one ticket, as the API reads them."""
    messages = list(
        SupportMessage.select()
        .where(SupportMessage.ticket == ticket.id)
        .order_by(SupportMessage.id)
        .limit(support.MAX_MESSAGES)
    )
    files = {}
    rows = SupportAttachment.select().where(SupportAttachment.ticket_id == ticket.id)
    for row in rows.order_by(SupportAttachment.id):
        files.setdefault(row.message_id, []).append(row)
    return messages, files


def build(attachment_dir=""):
    app = bottle.Bottle()

    def _can(operator, permission):
        return permission in operator.permission_set

    @app.get("/panel/campaigns")
    @page(operators.CAMPAIGNS_WRITE)
    def campaign_list(operator):
        rows, next_cursor = campaigns_page(bottle.request.query.get("cursor"), CAMPAIGN_ROWS)
        return show(
            "campaigns",
            operator,
            rows=rows,
            next_cursor=next_cursor,
            counts=delivery_counts([c.id for c in rows]),
            kinds=CAMPAIGN_KINDS,
            max_text=CAMPAIGN_TEXT_LENGTH,
            audiences=AUDIENCE_LABELS,
            plans=list(Plan.select().where(Plan.active == True).order_by(Plan.id)),  # noqa: E712
        )

    @app.get("/panel/campaigns/<campaign_id>")
    @page(operators.CAMPAIGNS_WRITE)
    def campaign(operator, campaign_id):
        found = campaign_or_404(campaign_id)
        missed = list(
            CampaignRecipient.select()
            .where(CampaignRecipient.campaign == found.id, CampaignRecipient.status.in_(("failed", "unreachable")))
            .order_by(CampaignRecipient.id)
            .limit(MISSED_ROWS)
        )
        return show(
            "campaign",
            operator,
            campaign=found,
            counts=campaigns.progress(found.id),
            missed=missed,
            missed_rows=MISSED_ROWS,
            recipient_error=recipient_error,
        )

    @app.get("/panel/support")
    @page(operators.SUPPORT_READ)
    def tickets(operator):
        status = bottle.request.query.get("status") or "open"
        error = None
        if status not in TICKET_STATUSES:
            bottle.response.status = 400
            error = f"status must be one of {', '.join(TICKET_STATUSES)}"
            rows = []
        else:
            rows = list(
                SupportTicket.select()
                .where(SupportTicket.status == status)
                .order_by(SupportTicket.updated_at.desc(), SupportTicket.id.desc())
                .limit(TICKET_ROWS)
            )
        messages = {}
        if rows:
            messages = dict(
                SupportMessage.select(SupportMessage.ticket, fn.COUNT(SupportMessage.id))
                .where(SupportMessage.ticket.in_([t.id for t in rows]))
                .group_by(SupportMessage.ticket)
                .tuples()
            )
        return show(
            "tickets",
            operator,
            rows=rows,
            messages=messages,
            status=status,
            statuses=TICKET_STATUSES,
            error=error,
            ticket_rows=TICKET_ROWS,
        )

    @app.get("/panel/support/tickets/<ticket_id>")
    @page(operators.SUPPORT_READ)
    def ticket(operator, ticket_id):
        found = support.ticket_or_404(ticket_id)
        messages, files = ticket_thread(found)
        return show(
            "ticket",
            operator,
            ticket=found,
            messages=messages,
            files=files,
            inline_types=INLINE_TYPES,
            attachment_url=attachment_url,
            max_text=REPLY_TEXT_LENGTH,
            can_reply=_can(operator, operators.SUPPORT_WRITE) and found.status != "closed",
        )

    @app.get("/panel/support/tickets/<ticket_id>/attachments/<digest>")
    @page(operators.SUPPORT_READ)
    def attachment(operator, ticket_id, digest):
        found = support.ticket_or_404(ticket_id)
        # The digest in the URL only selects a row of this ticket; the file's path comes from the row.
        row = (
            SupportAttachment.select()
            .where(SupportAttachment.ticket_id == found.id, SupportAttachment.digest == digest)
            .first()
            if attachments.DIGEST.fullmatch(digest)
            else None
        )
        if row is None:
            raise Problem(404, problems.ATTACHMENT_NOT_FOUND, "this ticket has no such attachment")
        content = None
        if attachment_dir:
            try:
                # Opened, not checked first: retention may remove the file between a check and a read.
                with open(attachments.path_for(attachment_dir, row.digest), "rb") as file:
                    content = file.read()
            except (attachments.BadDigest, FileNotFoundError, IsADirectoryError):
                content = None
        if content is None:
            raise Problem(
                404,
                problems.ATTACHMENT_NOT_FOUND,
                "the attachment's file is not on this web process's attachment volume"
                " (APP_SUPPORT_ATTACHMENT_DIR unset here, or the file already removed)",
            )
        inline = row.content_type in INLINE_TYPES
        bottle.response.content_type = row.content_type if inline else "application/octet-stream"
        disposition = "inline" if inline else f'attachment; filename="{row.digest}"'
        bottle.response.set_header("Content-Disposition", disposition)
        bottle.response.set_header("X-Content-Type-Options", "nosniff")
        bottle.response.set_header("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'; sandbox")
        bottle.response.set_header("Cache-Control", "private, no-store")
        return content

    return app
