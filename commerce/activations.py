"""Activating a gift card or an access code (SPEC 13.11): a code becomes a free period, once.

Each activation is one transaction: the card's or code's row is locked, its
rules checked, a zero-price order written and settled through the one
settlement function (`gift` / `code`, its FREE_PATHS: no money moves), and
the use recorded. Either all of it commits or none, so a code is never used
without its period, nor a period given without the use recorded.

- A gift card is single use: `active` and before its expiry; it becomes
  `redeemed` by the customer, naming the order it paid for (UNIQUE).
- An access code has a maximum number of activations (`activation_count`
  cannot pass `max_activations`, a CHECK) and one activation per customer
  (UNIQUE (code, customer)); an inactive or expired code activates nothing.
- A card or code an operator revoked (`revoked_at`, web/backoffice_codes.py)
  activates nothing: `code_revoked`.
- A trial is ordered through checkout (`trial` kind, settled `trial`), or
  taken from the bot (`activate_trial`: the active trial plan's free order,
  settled at once): the `trial_activations` row, unique per customer,
  refuses a second one.

A code that matches nothing and a code that is used up are both told apart
only as far as the customer needs (`invalid_code`, `code_expired`,
`code_used_up`, `code_already_used`); the code itself is never stored,
logged or echoed: only its SHA-256 is looked up (commerce/codes.py).
"""

from dataclasses import dataclass

from commerce.codes import code_hash
from commerce.orders import CUSTOMER_BLOCKED, CUSTOMER_NOT_FOUND, TRIAL_ALREADY_USED, OrderRejected, create_order
from commerce.settlement import SettlementRejected, settle_order
from models.base import db, utcnow
from models.catalogue import AccessCode, AccessCodeActivation, GiftCard
from models.commerce import Customer, Order, Plan
from models.transactions import locked

INVALID_CODE = "invalid_code"
CODE_EXPIRED = "code_expired"
CODE_REVOKED = "code_revoked"
CODE_USED_UP = "code_used_up"
CODE_ALREADY_USED = "code_already_used"
NO_TRIAL = "no_trial"
TRIAL_USED = TRIAL_ALREADY_USED


class ActivationRejected(ValueError):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Activation:
    order_id: int
    entitlement_id: int
    operation_id: int


def activate_gift_card(customer_id, code):
    """Redeem a gift card for `customer_id`: its plan's period, free, under `gift:<order id>:fulfill`."""
    with db.atomic():
        customer = _checked_customer(customer_id)
        card = locked(GiftCard.select().where(GiftCard.code_hash == code_hash(code))).first()
        if card is None:
            raise ActivationRejected(INVALID_CODE, "no such gift card")
        if card.revoked_at is not None:
            raise ActivationRejected(CODE_REVOKED, "this gift card has been revoked")
        if card.status == "redeemed":
            raise ActivationRejected(CODE_USED_UP, "this gift card has been redeemed")
        now = utcnow()
        if card.status != "active" or card.expires_at <= now:
            raise ActivationRejected(CODE_EXPIRED, "this gift card has expired")
        settlement = _free_period(customer, card.plan_id, "gift", now)
        GiftCard.update(
            status="redeemed", redeemed_by=customer.id, redeemed_at=now, redemption_order=settlement.order_id
        ).where(GiftCard.id == card.id).execute()
        return settlement


def activate_access_code(customer_id, code):
    """Activate an access code for `customer_id`: its plan's period, free, under `code:<order id>:fulfill`."""
    with db.atomic():
        customer = _checked_customer(customer_id)
        row = locked(AccessCode.select().where(AccessCode.code_hash == code_hash(code))).first()
        if row is None:
            raise ActivationRejected(INVALID_CODE, "no such access code")
        if row.revoked_at is not None:
            raise ActivationRejected(CODE_REVOKED, "this access code has been revoked")
        now = utcnow()
        if not row.active or (row.expires_at is not None and row.expires_at <= now):
            raise ActivationRejected(CODE_EXPIRED, "this access code is no longer valid")
        used = AccessCodeActivation.select().where(
            AccessCodeActivation.access_code == row.id, AccessCodeActivation.customer == customer.id
        )
        if used.exists():
            raise ActivationRejected(CODE_ALREADY_USED, "this customer has activated this code already")
        if row.activation_count >= row.max_activations:
            raise ActivationRejected(CODE_USED_UP, "this access code has no activations left")
        settlement = _free_period(customer, row.plan_id, "code", now)
        AccessCodeActivation.create(
            access_code=row.id, customer=customer.id, order=settlement.order_id, activated_at=now
        )
        AccessCode.update(activation_count=AccessCode.activation_count + 1).where(AccessCode.id == row.id).execute()
        return settlement


def _checked_customer(customer_id):
    customer = Customer.get_or_none(Customer.id == customer_id)
    if customer is None:
        raise ActivationRejected(CUSTOMER_NOT_FOUND, "no such customer")
    if customer.blocked:
        raise ActivationRejected(CUSTOMER_BLOCKED, "this customer is blocked")
    return customer


def _free_period(customer, plan_id, kind, now):
    """The zero-price order of a gift or a code, settled as such (its own settlement path)."""
    order = Order.create(
        customer=customer.id,
        plan=plan_id,
        operation=kind,
        status="pending",
        amount_minor=0,
        currency=_currency_of(plan_id),
        created_at=now,
    )
    settled = settle_order(order.id, kind)
    return Activation(settled.order_id, settled.entitlement_id, settled.operation_id)


def _currency_of(plan_id):
    """A free order still names a currency (orders need one): the plan's own."""
    return Plan.get_by_id(plan_id).currency


def trial_plan():
    """The plan a trial gives: the first active one flagged `trial`, or None when no trial is offered."""
    return Plan.select().where(Plan.trial == True, Plan.active == True).order_by(Plan.id).first()  # noqa: E712


def activate_trial(customer_id):
    """The customer's one trial: a free `trial` order of the trial plan, settled `trial` (create_order refuses a
    second trial, and settlement's unique `trial_activations` row stands behind it)."""
    plan = trial_plan()
    if plan is None:
        raise ActivationRejected(NO_TRIAL, "no trial is offered")
    with db.atomic():
        try:
            order = create_order(customer_id, "trial", _currency_of(plan.id), plan_id=plan.id)
            settled = settle_order(order.id, "trial")
        except (OrderRejected, SettlementRejected) as rejected:
            raise ActivationRejected(rejected.code, str(rejected)) from None
    return Activation(settled.order_id, settled.entitlement_id, settled.operation_id)
