"""Creating an order (SPEC 13.2): a pending order for a customer, of one kind, in one currency.

Everything that can be checked before money moves is checked here, and a
refusal writes nothing: the customer exists and is not blocked, the kind is
one a customer can buy, the plan or add-on is on sale and priced in the
currency, the subscription is the customer's, a trial is free and the
customer's first, a personal offer is theirs and still open. The price comes
from the catalogue, never from the caller (a top-up's amount excepted). A
pending order must be paid within ORDER_PAYMENT_WINDOW; after that the
commerce_maintenance pass expires it.

An idempotency key (e.g. `renewal:<subscription>:<period end>`) is a
promise: the same key with the same request returns the order it made, the
same key with a different request is refused.
"""

import datetime

from peewee import IntegrityError

from commerce.catalogue import (
    STARS,
    CatalogueError,
    addon_price,
    checked_currency,
    plan_price,
    purchasable_addon,
    purchasable_plan,
)
from models.base import db, utcnow
from models.catalogue import PersonalOffer, TrialActivation
from models.commerce import PAYMENT_PROVIDERS, Customer, Order, Subscription

ORDER_PAYMENT_WINDOW = datetime.timedelta(minutes=30)
# What a customer can order; `code` orders come from activating an access code.
ORDERABLE_KINDS = ("purchase", "renewal", "extension", "upgrade", "downgrade", "addon", "topup", "trial", "gift")
SUBSCRIPTION_KINDS = ("renewal", "extension", "upgrade", "downgrade", "addon")
DISCOUNTABLE_KINDS = ("purchase", "renewal", "extension", "upgrade", "downgrade", "gift")

CUSTOMER_NOT_FOUND = "customer_not_found"
CUSTOMER_BLOCKED = "customer_blocked"
INVALID_ORDER_KIND = "invalid_order_kind"
INVALID_AMOUNT = "invalid_amount"
UNKNOWN_PROVIDER = "unknown_provider"
PROVIDER_CURRENCY_MISMATCH = "provider_currency_mismatch"
SUBSCRIPTION_REQUIRED = "subscription_required"
SUBSCRIPTION_NOT_FOUND = "subscription_not_found"
NOT_A_TRIAL_PLAN = "not_a_trial_plan"
TRIAL_PLAN_NOT_FOR_SALE = "trial_plan_not_for_sale"
TRIAL_ALREADY_USED = "trial_already_used"
OFFER_NOT_APPLICABLE = "offer_not_applicable"
IDEMPOTENCY_KEY_REUSED = "idempotency_key_reused"
UNEXPECTED_FIELD = "unexpected_field"


class OrderRejected(ValueError):
    """Refused before anything was written; `code` is machine-readable."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


def create_order(
    customer_id,
    kind,
    currency,
    *,
    plan_id=None,
    addon_id=None,
    subscription_id=None,
    amount_minor=None,
    provider=None,
    offer_id=None,
    key=None,
):
    """A pending order, priced from the catalogue; OrderRejected says why not."""
    try:
        checked_currency(currency)
    except CatalogueError as error:
        raise OrderRejected(error.code, str(error)) from None
    customer = orderable_customer(customer_id)
    if kind not in ORDERABLE_KINDS:
        raise OrderRejected(INVALID_ORDER_KIND, f"an order is one of {', '.join(ORDERABLE_KINDS)}")
    check_provider(provider, currency)
    subscription = _subscription(customer, kind, subscription_id)
    try:
        plan, addon, price = _priced(customer, kind, currency, plan_id, addon_id, amount_minor)
    except CatalogueError as error:
        raise OrderRejected(error.code, str(error)) from None
    offer = _offer(customer, kind, plan, currency, offer_id)
    now = utcnow()
    fields = {
        "customer": customer.id,
        "subscription": subscription,
        "plan": plan,
        "addon": addon,
        "personal_offer": offer,
        "operation": kind,
        "status": "pending",
        "amount_minor": discounted(price, offer),
        "currency": currency,
        "provider": provider,
        "idempotency_key": key,
        "created_at": now,
        "expires_at": now + ORDER_PAYMENT_WINDOW,
    }
    if key is not None:
        existing = Order.get_or_none(Order.idempotency_key == key)
        if existing is not None:
            return _same_request(existing, fields)
    try:
        with db.atomic():
            return Order.create(**fields)
    except IntegrityError:
        existing = Order.get_or_none(Order.idempotency_key == key) if key is not None else None
        if existing is None:
            raise
        return _same_request(existing, fields)  # a concurrent request with the same key won


def discounted(price, offer):
    """The price after a personal offer: a percentage (rounded down) or an amount, never below zero."""
    if offer is None:
        return price
    if offer.discount_percent is not None:
        return price - price * offer.discount_percent // 100
    return max(price - offer.discount_minor, 0)


def orderable_customer(customer_id):
    customer = Customer.get_or_none(Customer.id == customer_id)
    if customer is None:
        raise OrderRejected(CUSTOMER_NOT_FOUND, "no such customer")
    if customer.blocked:
        raise OrderRejected(CUSTOMER_BLOCKED, "this customer is blocked and cannot order")
    return customer


def check_provider(provider, currency):
    if provider is None:
        return
    if provider not in PAYMENT_PROVIDERS:
        raise OrderRejected(UNKNOWN_PROVIDER, f"a provider is one of {', '.join(PAYMENT_PROVIDERS)}")
    if (provider == "stars") != (currency == STARS):
        raise OrderRejected(PROVIDER_CURRENCY_MISMATCH, "Telegram Stars take XTR, and only Stars take XTR")


def _subscription(customer, kind, subscription_id):
    if subscription_id is None:
        if kind in SUBSCRIPTION_KINDS:
            raise OrderRejected(SUBSCRIPTION_REQUIRED, f"a {kind} order names the subscription it applies to")
        return None
    if kind not in SUBSCRIPTION_KINDS + ("purchase",):
        raise OrderRejected(UNEXPECTED_FIELD, f"a {kind} order applies to no subscription")
    subscription = Subscription.get_or_none(Subscription.id == subscription_id, Subscription.customer == customer)
    if subscription is None:
        raise OrderRejected(SUBSCRIPTION_NOT_FOUND, "the customer has no such subscription")
    return subscription


def _priced(customer, kind, currency, plan_id, addon_id, amount_minor):
    """(plan, addon, price) of the order."""
    if kind == "topup":
        if plan_id is not None or addon_id is not None:
            raise OrderRejected(UNEXPECTED_FIELD, "a top-up buys no plan or add-on")
        if isinstance(amount_minor, bool) or not isinstance(amount_minor, int) or amount_minor <= 0:
            raise OrderRejected(INVALID_AMOUNT, "a top-up is a whole, positive number of minor units")
        return None, None, amount_minor
    if amount_minor is not None:
        raise OrderRejected(UNEXPECTED_FIELD, "only a top-up names its amount; prices come from the catalogue")
    if kind == "addon":
        if plan_id is not None:
            raise OrderRejected(UNEXPECTED_FIELD, "an add-on order buys no plan")
        addon = purchasable_addon(addon_id)
        return None, addon, addon_price(addon, currency)
    if addon_id is not None:
        raise OrderRejected(UNEXPECTED_FIELD, f"a {kind} order buys no add-on")
    plan = purchasable_plan(plan_id)
    if kind == "trial":
        if not plan.trial:
            raise OrderRejected(NOT_A_TRIAL_PLAN, f"plan {plan.id} is not a trial")
        if TrialActivation.select().where(TrialActivation.customer == customer).exists():
            raise OrderRejected(TRIAL_ALREADY_USED, "this customer has had a trial")
        return plan, None, 0
    if plan.trial:
        raise OrderRejected(TRIAL_PLAN_NOT_FOR_SALE, f"plan {plan.id} is a trial, ordered as one")
    return plan, None, plan_price(plan, currency)


def _offer(customer, kind, plan, currency, offer_id):
    if offer_id is None:
        return None
    offer = PersonalOffer.get_or_none(PersonalOffer.id == offer_id, PersonalOffer.customer == customer)
    usable = (
        offer is not None
        and kind in DISCOUNTABLE_KINDS
        and offer.status == "active"
        and offer.expires_at > utcnow()
        and offer.plan_id in (None, plan.id)
        and offer.currency in (None, currency)
    )
    if not usable:
        raise OrderRejected(OFFER_NOT_APPLICABLE, "that offer does not apply to this order")
    return offer


def _same_request(existing, fields):
    same = (
        existing.customer_id == fields["customer"]
        and existing.operation == fields["operation"]
        and existing.currency == fields["currency"]
        and existing.plan_id == _id(fields["plan"])
        and existing.addon_id == _id(fields["addon"])
        # A purchase that named no subscription is given a new one when it is settled.
        and (fields["subscription"] is None or existing.subscription_id == _id(fields["subscription"]))
    )
    if not same:
        raise OrderRejected(IDEMPOTENCY_KEY_REUSED, "the idempotency key was already used for another order")
    return existing


def _id(record):
    return None if record is None else record.id
