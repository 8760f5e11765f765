"""Customers as the bot knows them: found or created from a Telegram user, their language and
their subscriptions' auto-renew switch.

Each function runs in the caller's transaction (the bot's update transaction).
"""

from dataclasses import dataclass

from peewee import IntegrityError

from models.base import db, utcnow
from models.blocklists import BlocklistEntry
from models.commerce import Customer, Subscription, search_name

BLOCKED_BY_LIST = "blocklist"  # blocked_reason of a customer a blocklist blocked (ops/blocklists.py)

MAX_NAME_LENGTH = 128
# Bidirectional formatting characters: inside a name they reorder the text around it ("Welcome, …!" read
# backwards, an operator's table row flipped). Names are shown without them (shown_name).
BIDI_CONTROLS = dict.fromkeys([0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)])


@dataclass(frozen=True)
class TelegramIdentity:
    telegram_id: int
    first_name: str = ""
    last_name: str = ""
    username: str = ""
    language_code: str = ""

    @property
    def display_name(self):
        name = " ".join(part for part in (self.first_name, self.last_name) if part).strip()
        return (name or self.username or f"user {self.telegram_id}")[:MAX_NAME_LENGTH]


def shown_name(name):
    """A customer's name as the bot and the back office show it: the name without bidirectional controls."""
    return (name or "").translate(BIDI_CONTROLS)


def find_by_telegram(telegram_id):
    return Customer.get_or_none(Customer.telegram_id == telegram_id)


def customer_for_telegram(identity, language, known=None):
    """(customer, created): the customer of this Telegram user, created on first contact.

    `known` is the customer the caller already read for this user in the same
    transaction (the bot reads it for every update), so it is not read twice.

    A known customer's name and username follow Telegram's, and one marked
    unreachable (they had blocked the bot) is reachable again; the language is
    set once, at creation, and after that only by the customer's own choice.
    A user some blocklist names is created blocked, as lifecycle_sweep would
    block them at its next run.
    """
    customer = known if known is not None else find_by_telegram(identity.telegram_id)
    if customer is None:
        listed = BlocklistEntry.select().where(BlocklistEntry.telegram_id == identity.telegram_id).exists()
        try:
            with db.atomic():
                customer = Customer.create(
                    telegram_id=identity.telegram_id,
                    telegram_username=identity.username or None,
                    display_name=identity.display_name,
                    language_code=language,
                    blocked=listed,
                    blocked_reason=BLOCKED_BY_LIST if listed else None,
                    blocked_at=utcnow() if listed else None,
                )
            return customer, True
        except IntegrityError:
            customer = find_by_telegram(identity.telegram_id)  # created meanwhile by another writer
    changes = {}
    if customer.display_name != identity.display_name:
        changes["display_name"] = identity.display_name
        changes["search_name"] = search_name(identity.display_name)
    if (customer.telegram_username or None) != (identity.username or None):
        changes["telegram_username"] = identity.username or None
    if customer.telegram_unreachable_at is not None:
        changes["telegram_unreachable_at"] = None  # writing to the bot again: they unblocked it
    if changes:
        Customer.update(**changes).where(Customer.id == customer.id).execute()
        for name, value in changes.items():
            setattr(customer, name, value)  # the caller greets with what is stored now, not what was read
    return customer, False


def mark_unreachable(customer_id):
    """Telegram answered 403 for this customer's chat (they blocked the bot): campaigns leave them out until
    they write to the bot again (customer_for_telegram clears the mark). Its own transaction."""
    with db.atomic():
        Customer.update(telegram_unreachable_at=utcnow()).where(
            Customer.id == customer_id, Customer.telegram_unreachable_at.is_null()
        ).execute()


def set_language(customer, language):
    Customer.update(language_code=language).where(Customer.id == customer.id).execute()


def set_auto_renew(customer, subscription_id, enabled):
    """Turn a customer's own subscription's auto-renewal on or off; False when it is not theirs
    (or no such subscription), nothing written."""
    changed = (
        Subscription.update(auto_renew=bool(enabled))
        .where(Subscription.id == subscription_id, Subscription.customer == customer.id)
        .execute()
    )
    return changed == 1
