"""Checkout (SPEC 13.2, 13.4, 13.5, 13.12): an order and the way to pay it, for the bot and for scripts.

`checkout(...)` refuses, writing nothing, while maintenance is on
(`maintenance_active`), for a way of paying this shop does not offer or
that cannot take the currency, for a top-up above its currency's maximum
(APP_TOPUP_MAX_MINOR) or in a currency that has none, for an amount above
what the way of paying takes in one payment (each provider states its
maximum: `max_amount_minor`, Stars' INVOICE_MAX_AMOUNT), and for whatever
`create_order` refuses (an unknown or blocked customer, a plan not on sale,
…). A `goods` checkout names the goods (`goods_id`) and is priced from
their price in the currency; it is refused, writing nothing, for goods
unknown, not on sale, not priced in the currency, or whose provider's
sealed token does not open here (goods/catalogue.py), and settles like any
order: settlement writes the delivery and its job. Then, by way of paying:

- `wallet`: the order is created and paid from the balance in one
  transaction; a wallet that cannot cover it refuses (`insufficient_funds`)
  and the order is not kept either;
- `stars`: the order, and the invoice the bot sends (`sendInvoice` in XTR,
  its payload naming the order); the bot settles it (commerce/stars.py);
- `yookassa`, `cryptobot`: the order, a payment intent, and the payment at
  the provider, created with the intent's idempotence key outside any
  transaction; the answer is the provider's confirmation URL. The payer
  comes back to APP_PUBLIC_URL/checkout/return; the provider's webhook
  (APP_PUBLIC_URL/v1/webhooks/<provider>) or the poll settles the order.

A free order (a trial, a full discount) is settled at once whatever the way
of paying. With a key (`checkout:<customer>:<request id>` from the route) a
retried checkout finds its order, and the order's open intent at that
provider, whose idempotence key the provider sees again: a retry never makes
a second payment. Crypto Pay keeps no such key: a retry whose intent was made
before first looks for the invoice the earlier create made (its payload names
the intent's key) and reuses it.
"""

from dataclasses import dataclass

from commerce import providers as methods
from commerce.catalogue import INVALID_CURRENCY, is_currency
from commerce.orders import ORDERABLE_KINDS, UNEXPECTED_FIELD, OrderRejected, create_order
from commerce.payments import OPEN_INTENT_STATES
from commerce.settlement import NO_CURRENT_ENTITLEMENT, SETTLED_STATES, SettlementRejected, settle_order
from commerce.stars import CURRENCY as STARS_CURRENCY
from commerce.stars import invoice_payload
from config.settings import TOPUP_MAX_MINOR
from goods.catalogue import create_goods_order
from integrations.payments import ProviderError
from integrations.payments.amounts import to_decimal_text
from integrations.payments.stars import INVOICE_MAX_AMOUNT as STARS_MAX_AMOUNT
from models.base import db, utcnow
from models.commerce import Customer, Order
from models.fulfillment import Entitlement
from models.payments import PaymentIntent
from models.transactions import locked
from ops import maintenance, sealing

RETURN_PATH = "/checkout/return"
INVOICE_TITLE_MAX = 32  # Telegram's sendInvoice limits
INVOICE_DESCRIPTION_MAX = 255

MAINTENANCE_ACTIVE = "maintenance_active"
UNKNOWN_PAYMENT_METHOD = "unknown_payment_method"
ORDER_NOT_PAYABLE = "order_not_payable"
WALLET_TOPUP = "wallet_topup"
GIFT_UNDELIVERABLE = "gift_undeliverable"  # a gift card's code could not reach its buyer
TOPUP_ABOVE_MAXIMUM = "topup_above_maximum"
TOPUP_CURRENCY_UNSUPPORTED = "topup_currency_unsupported"
AMOUNT_ABOVE_PROVIDER_MAXIMUM = "amount_above_provider_maximum"
GOODS_REQUIRED = "goods_required"
GOODS = "goods"
CHECKOUT_KINDS = ORDERABLE_KINDS + (GOODS,)


class CheckoutRejected(ValueError):
    """Refused; `code` is machine-readable (the route maps it to an HTTP status)."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Checkout:
    order_id: int
    order_status: str
    method: str
    amount_minor: int
    currency: str
    confirmation_url: str = None  # where the payer pays (yookassa, cryptobot)
    invoice: dict = None  # what the bot sends with sendInvoice (stars)


def checkout(
    providers,
    public_url,
    customer_id,
    kind,
    method,
    currency,
    *,
    plan_id=None,
    addon_id=None,
    subscription_id=None,
    amount_minor=None,
    offer_id=None,
    goods_id=None,
    key=None,
    topup_max=None,
):
    """Create (or, with the same key, find) an order and what pays it; CheckoutRejected says why not.
    `topup_max`: {currency: the largest top-up in minor units}, APP_TOPUP_MAX_MINOR (default TOPUP_MAX_MINOR)."""
    if maintenance.is_active():
        raise CheckoutRejected(MAINTENANCE_ACTIVE, "the shop is in maintenance; nothing can be bought now")
    if not is_currency(currency):
        raise CheckoutRejected(INVALID_CURRENCY, "a currency is three capital letters, e.g. RUB, USD or XTR")
    if method not in methods.PAYMENT_METHODS:
        raise CheckoutRejected(
            UNKNOWN_PAYMENT_METHOD, f"a way of paying is one of {', '.join(methods.PAYMENT_METHODS)}"
        )
    if not methods.offered(providers, method):
        raise CheckoutRejected(methods.PROVIDER_NOT_CONFIGURED, f"{method} is not offered by this shop")
    if not methods.accepts(method, currency):
        raise CheckoutRejected(methods.PROVIDER_CURRENCY_UNSUPPORTED, f"{method} takes no payment in {currency}")
    if method == methods.WALLET and kind == "topup":
        raise CheckoutRejected(WALLET_TOPUP, "a wallet is topped up through a provider, not from itself")
    if kind == "topup":
        _require_topup_within(TOPUP_MAX_MINOR if topup_max is None else topup_max, currency, amount_minor)
    if kind == "gift":
        _require_gift_delivery(customer_id)
    if kind == "addon" and subscription_id is not None and not _has_period(subscription_id):
        raise CheckoutRejected(NO_CURRENT_ENTITLEMENT, "the subscription has no period an add-on could go onto")
    if kind == GOODS and goods_id is None:
        raise CheckoutRejected(GOODS_REQUIRED, "a goods checkout names the goods it buys (goodsId)")
    if kind == GOODS and (plan_id, addon_id, subscription_id, amount_minor, offer_id) != (None,) * 5:
        raise CheckoutRejected(UNEXPECTED_FIELD, "a goods checkout names only its goods; the catalogue prices them")
    if kind != GOODS and goods_id is not None:
        raise CheckoutRejected(UNEXPECTED_FIELD, f"a {kind} order buys no goods")
    fields = dict(
        plan_id=plan_id,
        addon_id=addon_id,
        subscription_id=subscription_id,
        amount_minor=amount_minor,
        provider=None if method == methods.WALLET else method,
        offer_id=offer_id,
        key=key,
    )
    try:
        if method == methods.WALLET:
            with db.atomic():
                order = _order(customer_id, kind, currency, goods_id, fields)
                _settle_at_once(order)
            return _answer(Order.get_by_id(order.id), method)
        with db.atomic():
            order = _order(customer_id, kind, currency, goods_id, fields)
            _require_payable(providers, method, order)
        if order.amount_minor == 0 and order.status not in SETTLED_STATES:
            _settle_at_once(order)
    except OrderRejected as rejected:
        raise CheckoutRejected(rejected.code, str(rejected)) from None
    order = Order.get_by_id(order.id)
    if order.status in SETTLED_STATES:
        return _answer(order, method)
    if order.status != "pending":
        raise CheckoutRejected(ORDER_NOT_PAYABLE, f"order {order.id} is {order.status}")
    if method == methods.STARS:
        return _answer(order, method, invoice=_invoice(order))
    return _answer(order, method, confirmation_url=_hosted_payment(providers, public_url, order, method))


def _order(customer_id, kind, currency, goods_id, fields):
    if kind == GOODS:
        return create_goods_order(customer_id, goods_id, currency, provider=fields["provider"], key=fields["key"])
    return create_order(customer_id, kind, currency, **fields)


def _require_gift_delivery(customer_id):
    """A gift card's code reaches its buyer once, sealed, in Telegram (commerce/gift_purchase.py): sold only
    where it can be sealed and to a buyer the bot can write to, or the buyer would pay for a code never seen.
    An unknown customer is left to create_order's 404."""
    if not sealing.available():
        raise CheckoutRejected(GIFT_UNDELIVERABLE, "gift cards need APP_DATA_ENCRYPTION_KEY to seal their codes")
    customer = Customer.get_or_none(Customer.id == customer_id)
    if customer is not None and customer.telegram_id is None:
        raise CheckoutRejected(
            GIFT_UNDELIVERABLE, "a gift card's code is sent to its buyer in Telegram; this customer has no Telegram"
        )


def _require_topup_within(limits, currency, amount_minor):
    """A top-up above its currency's maximum, or in a currency with none, is refused before anything is
    written (an amount that is not a positive whole number is left to create_order's invalid_amount)."""
    if isinstance(amount_minor, bool) or not isinstance(amount_minor, int) or amount_minor <= 0:
        return
    limit = limits.get(currency)
    if limit is None:
        raise CheckoutRejected(TOPUP_CURRENCY_UNSUPPORTED, f"this shop takes no top-ups in {currency}")
    if amount_minor > limit:
        raise CheckoutRejected(
            TOPUP_ABOVE_MAXIMUM, f"a top-up in {currency} is at most {_money(limit, currency)} ({limit} minor units)"
        )


def _require_payable(providers, method, order):
    """Refuse, inside the transaction that wrote the order, an amount the way of paying cannot take in one payment."""
    limit = STARS_MAX_AMOUNT if method == methods.STARS else methods.adapter(providers, method).max_amount_minor
    if order.amount_minor > limit:
        raise CheckoutRejected(
            AMOUNT_ABOVE_PROVIDER_MAXIMUM,
            f"{method} takes at most {_money(limit, order.currency)} ({limit} minor units) in one payment",
        )


def _money(amount_minor, currency):
    return f"{to_decimal_text(amount_minor, currency)} {currency}"


def return_url(public_url):
    return f"{public_url}{RETURN_PATH}"


def _settle_at_once(order):
    """From the wallet, or, for a free trial, as one (no money moves for a free order)."""
    settled_by = "trial" if order.operation == "trial" and order.amount_minor == 0 else "wallet"
    try:
        settle_order(order.id, settled_by)
    except SettlementRejected as rejected:
        raise CheckoutRejected(rejected.code, str(rejected)) from None


def _has_period(subscription_id):
    return (
        Entitlement.select()
        .where(Entitlement.subscription == subscription_id, Entitlement.status != "superseded")
        .exists()
    )


def _hosted_payment(providers, public_url, order, method):
    """The confirmation URL of the order's payment at a hosted provider, creating it if needed."""
    intent, made_now = _open_intent(order, method)
    if intent.confirmation_url:
        return intent.confirmation_url
    adapter = methods.adapter(providers, method)
    try:
        # An intent made before may have had its create reach the provider with the answer lost.
        payment = None
        if not made_now:
            payment = adapter.find_created_payment(
                order_id=order.id,
                currency=order.currency,
                idempotence_key=intent.idempotence_key,
                created_after=intent.created_at,
            )
        payment = payment or adapter.create_payment(
            order_id=order.id,
            amount_minor=order.amount_minor,
            currency=order.currency,
            description=f"Order {order.id}",
            return_url=return_url(public_url),
            idempotence_key=intent.idempotence_key,
        )
    except ProviderError as error:
        if not error.transient:
            # Refused for good: a retry of this checkout starts a new intent (and a new key).
            PaymentIntent.update(status="failed", updated_at=utcnow()).where(PaymentIntent.id == intent.id).execute()
        raise CheckoutRejected(error.code, f"{method} did not take the payment ({error.code})") from None
    now = utcnow()
    with db.atomic():
        PaymentIntent.update(
            provider_payment_id=payment.payment_id, confirmation_url=payment.confirmation_url, updated_at=now
        ).where(PaymentIntent.id == intent.id).execute()
        # Only from `created`: a webhook for this payment may have been applied already.
        PaymentIntent.update(status="pending").where(
            PaymentIntent.id == intent.id, PaymentIntent.status == "created"
        ).execute()
    return payment.confirmation_url


def _open_intent(order, method):
    """(the order's open intent at this provider, False) or (a new one, True); under the order's row
    lock, so two retries of one checkout share one intent (and one idempotence key)."""
    with db.atomic():
        locked(Order.select(Order.id).where(Order.id == order.id)).get()
        mine = PaymentIntent.select().where(PaymentIntent.order == order, PaymentIntent.provider == method)
        open_one = mine.where(PaymentIntent.status.in_(OPEN_INTENT_STATES)).order_by(PaymentIntent.id.desc()).first()
        if open_one is not None:
            return open_one, False
        now = utcnow()
        made = PaymentIntent.create(
            order=order,
            provider=method,
            amount_minor=order.amount_minor,
            currency=order.currency,
            status="created",
            idempotence_key=f"order-{order.id}-{method}-{mine.count() + 1}",
            created_at=now,
            updated_at=now,
        )
        return made, True


def _invoice(order):
    """sendInvoice's parameters for a Stars order (the bot adds its chat and its texts' language)."""
    what = _title(order)
    return {
        "title": what[:INVOICE_TITLE_MAX],
        "description": f"{what}, order {order.id}"[:INVOICE_DESCRIPTION_MAX],
        "payload": invoice_payload(order.id),
        "currency": STARS_CURRENCY,
        "amount": order.amount_minor,
    }


def _title(order):
    if order.operation == "topup":
        return "Wallet top-up"
    if order.operation == "addon":
        return order.addon.name
    if order.operation == GOODS:
        return order.goods.name
    return order.plan.name


def _answer(order, method, confirmation_url=None, invoice=None):
    return Checkout(
        order_id=order.id,
        order_status=order.status,
        method=method,
        amount_minor=order.amount_minor,
        currency=order.currency,
        confirmation_url=confirmation_url,
        invoice=invoice,
    )
