"""A chat's conversation state (`bot_sessions`, SPEC 14.7): which answer the bot waits for, e.g. a support message
or a code. Read and written in the update's transaction; a state past its 24 h expiry is no state (retention
sweeps the row)."""

import json

from models.base import utcnow
from models.bot import SESSION_TTL, BotSession

AWAITING = "awaiting"


def state(chat_id):
    session = BotSession.get_or_none(BotSession.chat_id == chat_id)
    if session is None or session.expires_at <= utcnow():
        return {}
    try:
        value = json.loads(session.state or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def save(chat_id, customer_id, value):
    now = utcnow()
    values = {"state": json.dumps(value, sort_keys=True), "updated_at": now, "expires_at": now + SESSION_TTL}
    if BotSession.update(customer=customer_id, **values).where(BotSession.chat_id == chat_id).execute() == 0:
        BotSession.create(chat_id=chat_id, customer=customer_id, **values)


def awaiting(chat_id):
    return state(chat_id).get(AWAITING)


def await_answer(chat_id, customer_id, what):
    value = state(chat_id)
    value[AWAITING] = what
    save(chat_id, customer_id, value)


def stop_awaiting(chat_id, customer_id):
    value = state(chat_id)
    if value.pop(AWAITING, None) is not None:
        save(chat_id, customer_id, value)


def awaits(what):
    """A TeleBot message filter: a private chat's message (not a command) while the bot waits for `what`."""

    def check(message):
        if message.chat.type != "private" or (message.text or "").startswith("/"):
            return False
        return awaiting(message.chat.id) == what

    return check
