"""Finding a customer by what an operator knows of them (SPEC 13.14): their name,
id, Telegram id, Telegram username (with or without the @) or the username of
one of their subscriptions on the panel.

One text is looked up as each of these at once, each lookup on an index: the
ids and usernames exactly (a Telegram username without regard to case, as
Telegram treats it), the name as the start of the customer's name in any
script and any case ("ivan", "Иван", "ИВАН" find "Иван Петров"). Names are
compared by `customers.search_name` (models.commerce.search_name: casefold(),
spaces collapsed, kept by every write of a name; migration 0045), as a range
of code points, because SQLite's LOWER and LIKE fold only ASCII. Text that is
empty after folding, too long or holds control characters is refused.
"""

import functools
import operator
import re

from peewee import fn

from models.commerce import Customer, Subscription, search_name

INVALID_SEARCH = "invalid_search"
SEARCH_MAX = 64
MAX_MATCHES = 50
TELEGRAM_ID_MAX = 2**63 - 1
# After the last code point: a name prefix p is the range [p, p + LAST) in code point order.
LAST = "\U0010ffff"
_TELEGRAM_USERNAME = re.compile(r"[A-Za-z0-9_]{1,32}")


class SearchRejected(ValueError):
    """The text cannot name a customer; `code` is machine-readable."""

    def __init__(self, message):
        super().__init__(message)
        self.code = INVALID_SEARCH


def find_customers(text):
    """The customers `text` names, newest first (at most MAX_MATCHES); SearchRejected if it names none."""
    text = (text or "").strip()
    folded = search_name(text)
    if not folded or len(text) > SEARCH_MAX or not text.isprintable():
        raise SearchRejected(
            "search by a name, a customer id, a Telegram id, a Telegram @username or a panel username"
            f" (up to {SEARCH_MAX} characters)"
        )
    name = text.removeprefix("@")
    # One indexed lookup per reading of the text, united: an OR of them would read the whole table.
    lookups = [Customer.select(Customer.id).where(Customer.id == text)]
    if text.isdigit() and int(text) <= TELEGRAM_ID_MAX:
        lookups.append(Customer.select(Customer.id).where(Customer.telegram_id == int(text)))
    if _TELEGRAM_USERNAME.fullmatch(name):
        lookups.append(Customer.select(Customer.id).where(fn.LOWER(Customer.telegram_username) == name.lower()))
    lookups.append(Subscription.select(Subscription.customer).where(Subscription.remote_username == name))
    lookups.append(
        Customer.select(Customer.id).where((Customer.search_name >= folded) & (Customer.search_name < folded + LAST))
    )
    named = functools.reduce(operator.or_, lookups)
    query = Customer.select().where(Customer.id.in_(named))
    return list(query.order_by(Customer.created_at.desc(), Customer.id).limit(MAX_MATCHES))
