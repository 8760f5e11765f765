"""Finding a customer by what an operator knows of them (SPEC 13.14): their id,
Telegram id, Telegram username (with or without the @) or the username of one
of their subscriptions on the panel.

One text is looked up as each of these at once, exactly (a username without
regard to case, as Telegram treats it), each lookup on an index. Anything
that cannot be any of them is refused, so a typo or a pasted sentence gets a
plain answer instead of an empty page.
"""

import functools
import operator
import re

from peewee import fn

from models.commerce import Customer, Subscription

INVALID_SEARCH = "invalid_search"
SEARCH_MAX = 64
MAX_MATCHES = 50
TELEGRAM_ID_MAX = 2**63 - 1
# Customer ids are UUIDs, Telegram usernames letters, digits and _, panel usernames also - and .
_SEARCHABLE = re.compile(r"@?[A-Za-z0-9_.:-]{1,64}")
_TELEGRAM_USERNAME = re.compile(r"[A-Za-z0-9_]{1,32}")


class SearchRejected(ValueError):
    """The text cannot name a customer; `code` is machine-readable."""

    def __init__(self, message):
        super().__init__(message)
        self.code = INVALID_SEARCH


def find_customers(text):
    """The customers `text` names, newest first (at most MAX_MATCHES); SearchRejected if it names none."""
    text = (text or "").strip()
    if len(text) > SEARCH_MAX or not _SEARCHABLE.fullmatch(text):
        raise SearchRejected(
            "search by a customer id, a Telegram id, a Telegram @username or a panel username"
            f" (letters, digits and _ . : - only, up to {SEARCH_MAX})"
        )
    name = text.removeprefix("@")
    # One indexed lookup per reading of the text, united: an OR of them would read the whole table.
    lookups = [Customer.select(Customer.id).where(Customer.id == text)]
    if text.isdigit() and int(text) <= TELEGRAM_ID_MAX:
        lookups.append(Customer.select(Customer.id).where(Customer.telegram_id == int(text)))
    if _TELEGRAM_USERNAME.fullmatch(name):
        lookups.append(Customer.select(Customer.id).where(fn.LOWER(Customer.telegram_username) == name.lower()))
    lookups.append(Subscription.select(Subscription.customer).where(Subscription.remote_username == name))
    named = functools.reduce(operator.or_, lookups)
    query = Customer.select().where(Customer.id.in_(named))
    return list(query.order_by(Customer.created_at.desc(), Customer.id).limit(MAX_MATCHES))
