"""Customers as the bot knows them: found or created from a Telegram user, their language, their subscriptions.

Each function runs in the caller's transaction (the bot's update transaction).
"""

from dataclasses import dataclass

from peewee import IntegrityError

from models.base import db
from models.commerce import Customer, Plan, Subscription
from models.fulfillment import Entitlement

MAX_NAME_LENGTH = 128


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


@dataclass(frozen=True)
class SubscriptionSummary:
    plan_name: str
    status: str
    ends_at: object


def find_by_telegram(telegram_id):
    return Customer.get_or_none(Customer.telegram_id == telegram_id)


def customer_for_telegram(identity, language):
    """(customer, created): the customer of this Telegram user, created on first contact.

    A known customer's name and username follow Telegram's; the language is
    set once, at creation, and after that only by the customer's own choice.
    """
    customer = find_by_telegram(identity.telegram_id)
    if customer is None:
        try:
            with db.atomic():
                customer = Customer.create(
                    telegram_id=identity.telegram_id,
                    telegram_username=identity.username or None,
                    display_name=identity.display_name,
                    language_code=language,
                )
            return customer, True
        except IntegrityError:
            customer = find_by_telegram(identity.telegram_id)  # created meanwhile by another writer
    changes = {}
    if customer.display_name != identity.display_name:
        changes["display_name"] = identity.display_name
    if (customer.telegram_username or None) != (identity.username or None):
        changes["telegram_username"] = identity.username or None
    if changes:
        Customer.update(**changes).where(Customer.id == customer.id).execute()
    return customer, False


def set_language(customer, language):
    Customer.update(language_code=language).where(Customer.id == customer.id).execute()


def subscriptions_of(customer):
    """The current entitlement of each of the customer's subscriptions, by slot."""
    current = (
        Entitlement.select(Entitlement.subscription, Entitlement.status, Entitlement.ends_at, Plan.name)
        .join(Plan)
        .switch(Entitlement)
        .join(Subscription)
        .where(Subscription.customer == customer.id, Entitlement.status != "superseded")
        .order_by(Subscription.slot, Entitlement.id.desc())
    )
    summaries, seen = [], set()
    for entitlement in current:
        if entitlement.subscription_id in seen:
            continue
        seen.add(entitlement.subscription_id)
        summaries.append(SubscriptionSummary(entitlement.plan.name, entitlement.status, entitlement.ends_at))
    return summaries
