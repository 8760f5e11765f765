"""Telegram Stars (SPEC 13.4, 14.5): the bot's two calls into commerce.

- `precheck_stars(order_id, amount)` answers a `pre_checkout_query`: ok only
  while the order is pending and within its payment window, it is an XTR
  order paid in XTR, the amount is its price and maintenance is off (13.12).
- `settle_stars_payment(order_id, telegram_payment_charge_id, amount)` applies
  a `successful_payment` inside the transaction that records the update (a
  savepoint of it, never a commit of its own), so the update and its effect
  commit together. The payment's intent is keyed by the charge id (provider
  `stars`, UNIQUE per provider): a replayed update finds it and pays nothing
  twice. It settles through the one settlement function like every other
  payment (commerce/payments.py says what each outcome means).

The invoice's payload names the order: `order:<id>` (`invoice_payload`).
"""

from dataclasses import dataclass

from commerce.payments import apply_payment
from integrations.payments import STATUS_SUCCEEDED, ProviderPayment
from models.base import db, utcnow
from models.commerce import Order
from ops import maintenance

PROVIDER = "stars"
CURRENCY = "XTR"
PAYLOAD_PREFIX = "order:"
CHARGE_ID_MAX_LENGTH = 255

MAINTENANCE_ACTIVE = "maintenance_active"
ORDER_NOT_FOUND = "order_not_found"
ORDER_NOT_PENDING = "order_not_pending"
NOT_A_STARS_ORDER = "not_a_stars_order"
AMOUNT_MISMATCH = "amount_mismatch"
CURRENCY_MISMATCH = "currency_mismatch"
INVALID_CHARGE_ID = "invalid_charge_id"
INVALID_AMOUNT = "invalid_amount"


class StarsRejected(ValueError):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Precheck:
    ok: bool
    code: str = None  # why not


def invoice_payload(order_id):
    return f"{PAYLOAD_PREFIX}{order_id}"


def order_of(payload):
    """The order id an invoice payload names, or None."""
    text = str(payload or "")
    reference = text[len(PAYLOAD_PREFIX) :] if text.startswith(PAYLOAD_PREFIX) else ""
    return int(reference) if reference.isascii() and reference.isdigit() and len(reference) <= 18 else None


def precheck_stars(order_id, amount, currency=CURRENCY):
    if maintenance.is_active():
        return Precheck(False, MAINTENANCE_ACTIVE)
    order = Order.get_or_none(Order.id == order_id)
    if order is None:
        return Precheck(False, ORDER_NOT_FOUND)
    if order.status != "pending" or (order.expires_at is not None and order.expires_at <= utcnow()):
        return Precheck(False, ORDER_NOT_PENDING)
    if order.currency != CURRENCY or order.provider != PROVIDER:
        return Precheck(False, NOT_A_STARS_ORDER)
    if currency != CURRENCY:
        return Precheck(False, CURRENCY_MISMATCH)
    if amount != order.amount_minor:
        return Precheck(False, AMOUNT_MISMATCH)
    return Precheck(True)


def settle_stars_payment(order_id, telegram_payment_charge_id, amount, currency=CURRENCY):
    """Apply one successful Stars payment; returns commerce.payments.Applied (`settled`,
    `replayed`, `amount_mismatch`, `unknown_order`, `unapplied`)."""
    charge_id = telegram_payment_charge_id
    if not isinstance(charge_id, str) or not charge_id.strip() or len(charge_id) > CHARGE_ID_MAX_LENGTH:
        raise StarsRejected(INVALID_CHARGE_ID, "a telegram_payment_charge_id is a non-empty text")
    if isinstance(amount, bool) or not isinstance(amount, int) or amount <= 0:
        raise StarsRejected(INVALID_AMOUNT, "a Stars amount is a whole, positive number")
    payment = ProviderPayment(
        provider=PROVIDER,
        payment_id=charge_id,
        status=STATUS_SUCCEEDED,
        provider_status="successful_payment",
        amount_minor=amount,
        currency=currency,
        order_id=order_id,
    )
    with db.atomic():  # a savepoint of the caller's transaction: a failure here leaves it usable
        return apply_payment(payment, "stars")
