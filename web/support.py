"""The panel API of support tickets (SPEC 14.4, 14.6): operators read what customers wrote from the bot and reply;
the bot pushes each reply to the customer's chat (bot/support_push.py).

GET  /v1/panel/support/tickets?status=&limit=     tickets, most recently active first (support.read)
GET  /v1/panel/support/tickets/{id}               a ticket, its messages and their attachments (support.read)
POST /v1/panel/support/tickets/{id}/replies {text} a reply (support.write, audited; X-Operator-Reason optional:
                                                  answering a customer is its own reason)

Attachments are listed by digest, size and type; the Support pages serve
their files to operators (web/backoffice_messages.py).
"""

import bottle

from models.base import db
from models.support import TICKET_STATUSES, SupportAttachment, SupportMessage, SupportTicket
from ops import operators, support
from web import panel, problems
from web.answers import id_param, iso, json_answer, json_body, limit_param
from web.problems import Problem
from web.reasons import header_reason

DEFAULT_PAGE = 50
MAX_PAGE = 200
MAX_MESSAGES = 500
REJECTED_STATUS = {support.TICKET_NOT_FOUND: 404, support.TICKET_CLOSED: 409}


def ticket_json(ticket):
    return {
        "id": ticket.id,
        "customerId": ticket.customer_id,
        "status": ticket.status,
        "createdAt": iso(ticket.created_at),
        "updatedAt": iso(ticket.updated_at),
    }


def message_json(message, attachments=()):
    return {
        "id": message.id,
        "author": message.author,
        "operator": message.operator_username,
        "text": message.text,
        "pushStatus": message.push_status,
        "pushedAt": iso(message.pushed_at),
        "createdAt": iso(message.created_at),
        "attachments": [
            {"digest": a.digest, "sizeBytes": a.size_bytes, "contentType": a.content_type} for a in attachments
        ],
    }


def ticket_or_404(raw):
    ticket_id = id_param(raw, problems.INVALID_TICKET_ID, "a ticket id")
    ticket = SupportTicket.get_or_none(SupportTicket.id == ticket_id)
    if ticket is None:
        raise Problem(404, support.TICKET_NOT_FOUND, f"ticket {ticket_id} does not exist")
    return ticket


def build():
    app = bottle.Bottle()

    @app.get("/v1/panel/support/tickets")
    @panel.signed_in(operators.SUPPORT_READ)
    def tickets(operator):
        status = bottle.request.query.get("status") or "open"
        if status not in TICKET_STATUSES:
            raise Problem(400, problems.INVALID_TICKET_STATUS, f"status must be one of {', '.join(TICKET_STATUSES)}")
        limit = limit_param(bottle.request.query.get("limit"), DEFAULT_PAGE, MAX_PAGE)
        rows = (
            SupportTicket.select()
            .where(SupportTicket.status == status)
            .order_by(SupportTicket.updated_at.desc(), SupportTicket.id.desc())
            .limit(limit)
        )
        return json_answer(200, {"status": status, "tickets": [ticket_json(ticket) for ticket in rows]})

    @app.get("/v1/panel/support/tickets/<ticket_id>")
    @panel.signed_in(operators.SUPPORT_READ)
    def ticket(operator, ticket_id):
        found = ticket_or_404(ticket_id)
        messages = list(
            SupportMessage.select()
            .where(SupportMessage.ticket == found.id)
            .order_by(SupportMessage.id)
            .limit(MAX_MESSAGES)
        )
        attachments = {}
        for row in SupportAttachment.select().where(SupportAttachment.ticket_id == found.id):
            attachments.setdefault(row.message_id, []).append(row)
        return json_answer(
            200,
            {
                "ticket": ticket_json(found),
                "messages": [message_json(m, attachments.get(m.id, ())) for m in messages],
            },
        )

    @app.post("/v1/panel/support/tickets/<ticket_id>/replies")
    @panel.signed_in(operators.SUPPORT_WRITE)
    def reply(operator, ticket_id):
        found = ticket_or_404(ticket_id)
        reason = header_reason() or None
        text = json_body().get("text")
        try:
            with db.atomic():
                message = support.operator_replies(found.id, operator.username, text, reason)
        except support.SupportRejected as rejected:
            raise Problem(REJECTED_STATUS.get(rejected.code, 400), rejected.code, rejected.detail) from None
        return json_answer(201, {"message": message_json(message)})

    return app
