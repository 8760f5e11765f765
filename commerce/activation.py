"""Activating a gift card, an access code or the trial (SPEC 13.11): a free order settled like any other.

Each function runs in the caller's transaction (the bot's update
transaction) and returns the Settlement, or raises ActivationRejected with
a code — and then the caller rolls back, so nothing of a refused activation
is kept.

- A code is looked up by its hash (commerce/codes.py), as a gift card first,
  then as an access code; a code that is neither, an expired or used one,
  all get `code_not_found` / `code_expired` / `code_used`, never a hint of
  which codes exist.
- A gift card is claimed by one UPDATE … WHERE status = 'active', so two
  customers typing the same code at once redeem it once; its zero-price
  `gift` order is keyed `gift:<card id>` and settled with `gift` (the
  fulfillment key `gift:<order id>:fulfill`).
- An access code allows one activation per customer (a unique row) and
  never more than its maximum (the count is raised only while below it;
  the database's CHECK stands behind that); its `code` order is keyed
  `code:<code id>:<customer id>`.
- The trial: the active plan flagged `trial`, a zero-price `trial` order
  through create_order; one per customer (create_order refuses a second,
  and settlement's unique row stands behind it).
"""

from peewee import IntegrityError

from commerce import codes
from commerce.orders import OrderRejected, create_order
from commerce.settlement import SettlementRejected, settle_order
from models.base import db, utcnow
from models.catalogue import AccessCode, AccessCodeActivation, GiftCard, PlanPrice
from models.commerce import Order, Plan

CODE_NOT_FOUND = "code_not_found"
CODE_EXPIRED = "code_expired"
CODE_USED = "code_used"
CODE_ALREADY_ACTIVATED = "code_already_activated"
NO_TRIAL = "no_trial"
TRIAL_ALREADY_USED = "trial_already_used"
MAX_CODE_LENGTH = 64


class ActivationRejected(Exception):
    def __init__(self, code, detail):
        super().__init__(detail)
        self.code = code


def _currency_of(plan):
    price = PlanPrice.select(PlanPrice.currency).where(PlanPrice.plan == plan.id).order_by(PlanPrice.currency).first()
    return price.currency if price is not None else plan.currency


def _free_order(customer_id, plan, operation, key):
    existing = Order.get_or_none(Order.idempotency_key == key)
    if existing is not None:
        return existing
    now = utcnow()
    return Order.create(
        customer=customer_id, plan=plan.id, operation=operation, status="pending", amount_minor=0,
        currency=_currency_of(plan), idempotency_key=key, created_at=now,
    )  # fmt: skip


def _settle(order, settled_by):
    try:
        return settle_order(order.id, settled_by)
    except SettlementRejected as rejected:
        raise ActivationRejected(rejected.code, str(rejected)) from None


def activate_code(customer_id, raw_code):
    """Redeem a gift card or activate an access code for the customer; returns (kind, plan, settlement)."""
    if not isinstance(raw_code, str) or not codes.normalise(raw_code) or len(raw_code) > MAX_CODE_LENGTH:
        raise ActivationRejected(CODE_NOT_FOUND, "no such code")
    now = utcnow()
    card = codes.find_gift_card(raw_code)
    if card is not None:
        if card.status != "active":
            raise ActivationRejected(CODE_USED, "this gift card was redeemed")
        if card.expires_at <= now:
            raise ActivationRejected(CODE_EXPIRED, "this gift card has expired")
        order = _free_order(customer_id, card.plan, "gift", f"gift:{card.id}")
        claimed = (
            GiftCard.update(status="redeemed", redeemed_by=customer_id, redeemed_at=now, redemption_order=order.id)
            .where(GiftCard.id == card.id, GiftCard.status == "active")
            .execute()
        )
        if claimed != 1:
            raise ActivationRejected(CODE_USED, "this gift card was redeemed")
        return "gift", card.plan, _settle(order, "gift")
    access = codes.find_access_code(raw_code)
    if access is None or not access.active:
        raise ActivationRejected(CODE_NOT_FOUND, "no such code")
    if access.expires_at is not None and access.expires_at <= now:
        raise ActivationRejected(CODE_EXPIRED, "this code has expired")
    order = _free_order(customer_id, access.plan, "code", f"code:{access.id}:{customer_id}")
    try:
        with db.atomic():
            AccessCodeActivation.create(access_code=access.id, customer=customer_id, order=order.id, activated_at=now)
    except IntegrityError:
        raise ActivationRejected(CODE_ALREADY_ACTIVATED, "this customer has activated this code") from None
    raised = (
        AccessCode.update(activation_count=AccessCode.activation_count + 1)
        .where(AccessCode.id == access.id, AccessCode.activation_count < AccessCode.max_activations)
        .execute()
    )
    if raised != 1:
        raise ActivationRejected(CODE_USED, "this code has no activations left")
    return "code", access.plan, _settle(order, "code")


def trial_plan():
    return Plan.select().where(Plan.trial == True, Plan.active == True).order_by(Plan.id).first()  # noqa: E712


def activate_trial(customer_id):
    """The customer's one trial; returns (plan, settlement)."""
    plan = trial_plan()
    if plan is None:
        raise ActivationRejected(NO_TRIAL, "no trial is offered")
    try:
        order = create_order(customer_id, "trial", _currency_of(plan), plan_id=plan.id, key=f"trial:{customer_id}")
    except OrderRejected as rejected:
        code = TRIAL_ALREADY_USED if rejected.code == TRIAL_ALREADY_USED else rejected.code
        raise ActivationRejected(code, str(rejected)) from None
    return plan, _settle(order, "trial")
