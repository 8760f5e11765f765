"""Refunds (SPEC 13.10, 2.10): an order's money given back, in the ledger and where it was paid.

`refund_order` does it in one transaction: the order's status and refunded
amount, a `refunds` row, the ledger transaction that reverses the money
(`refund:<refund id>`, summing to zero like every other), the revocation of
access for a full refund (fulfillment/revocation.py) and, where the money
goes back through a provider's API, the durable `provider_refund` job that
calls it (commerce/provider_refund.py). Either all of it commits or none.

Where the money goes, by how the order was paid:

- from the wallet (`wallet`, `renewal`): back to the wallet, revenue →
  customer_wallet (`wallet`, `succeeded` at once);
- at YooKassa or with Telegram Stars: back through the provider's refund
  API, revenue → provider_clearing (`provider`, `pending` until the job has
  the provider's answer). Telegram refunds a Stars charge whole, so a
  partial Stars refund is refused (`partial_refund_unsupported`) unless it
  goes to the wallet;
- at CryptoBot: Crypto Pay has no refund API, so the refund goes to the
  customer's wallet (SPEC 13.10's "otherwise to the wallet"); asked for
  `to="provider"`, it is recorded as `manual`, revenue → provider_clearing,
  and a `refund_manual` operator notice says an operator must pay it back
  by hand (a CryptoBot top-up, which cannot go back to the wallet it
  filled, is refunded that way too);
- `to="wallet"` sends a provider payment's refund to the customer's wallet
  instead (store credit: revenue → customer_wallet), which works for every
  provider — SPEC 13.10's "otherwise to the wallet";
- a top-up paid at a provider goes back there from the wallet it filled
  (customer_wallet → provider_clearing). The wallet never goes negative: a
  wallet that has spent that money refuses the refund with
  `refund_exceeds_wallet` (409) and nothing is written — the operator
  refunds what is left, or the orders it paid for.

A bought gift card (commerce/gift_purchase.py) refunded in full expires if
it has not been redeemed yet; one already redeemed takes back what it gave:
the redemption order is refunded too (it paid nothing), its access revoked
as any full refund's is, and the recipient told (`gift_revoked`).

Upgrades (commerce/proration.py): an order whose period an upgrade credited
gives back at most what was paid less that credit (the rest already went to
the wallet; all of it credited: `order_not_refundable`); a fully refunded
upgrade takes its credits back from the wallet, or is refused with
`refund_exceeds_wallet` when the wallet spent them.

A free order (a gift, a code, a trial, a full discount) moved no money: its
refund writes no `refunds` row and no ledger transaction, only the status
and the revocation. An order whose payment was never booked (a record
written by hand) has nothing to reverse either: its refund is `manual`.
"""

from commerce import gift_purchase, ledger, proration
from commerce.provider_refund import JOB_KIND, NOTICE_REFUND_FAILED  # noqa: F401  (the job kind, declared there)
from commerce.settlement import (
    INVALID_REFUND_AMOUNT,
    ORDER_NOT_FOUND,
    ORDER_NOT_REFUNDABLE,
    SettlementRejected,
)
from fulfillment.revocation import revoke_access
from jobs import client
from models.base import db, utcnow
from models.commerce import PLANLESS_OPERATIONS, Order
from models.fulfillment import Entitlement
from models.ledger import LedgerTransaction
from models.payments import PaymentIntent, Refund
from models.transactions import defer, locked
from ops.records import queue_customer_notice, queue_notice

REFUNDABLE_STATES = ("paid", "fulfilled", "partially_refunded")
# Paid orders that bought no period of access: a top-up, an add-on, a gift card for someone else.
BUY_NO_PERIOD = (*PLANLESS_OPERATIONS, "gift")

TO_PROVIDER = "provider"
TO_WALLET = "wallet"
MANUAL = "manual"
DESTINATIONS = (TO_PROVIDER, TO_WALLET)  # what a caller may ask for; `manual` is decided here
# Providers whose API refunds a payment (SPEC 13.10); the others' refunds are paid back by hand.
REFUND_APIS = ("yookassa", "stars")
WHOLE_CHARGE_ONLY = ("stars",)

REFUND_EXCEEDS_WALLET = "refund_exceeds_wallet"
INVALID_REFUND_DESTINATION = "invalid_refund_destination"
PARTIAL_REFUND_UNSUPPORTED = "partial_refund_unsupported"

NOTICE_REFUND_MANUAL = "refund_manual"
NOTICE_CUSTOMER_REFUNDED = "order_refunded"  # a customer notice: _wallet when it went there, _full when access ends
NOTICE_GIFT_REVOKED = "gift_revoked"  # to a gift's recipient: its buyer was refunded in full, the access is off

# The keys settlement books an order's payment under (commerce/ledger.py).
PAYMENT_KEYS = ("order:{}:payment", "order:{}:wallet", "order:{}:topup")


def refund_order(order_id, amount_minor=None, to=None):
    """Refund a paid order, in full (`amount_minor` None or all that is left) or in part;
    `to` None (where it was paid), "provider" or "wallet". Returns the order.

    In full: `refunded` and its access revoked — a create that has not called
    the panel is cancelled; one already calling cannot move the order back to
    fulfilled, and the `disable` queued here runs after it. In part:
    `partially_refunded`, access kept."""
    if to is not None and to not in DESTINATIONS:
        raise SettlementRejected(INVALID_REFUND_DESTINATION, f"a refund goes to one of {', '.join(DESTINATIONS)}")
    with db.atomic():
        order = locked(Order.select().where(Order.id == order_id)).first()
        if order is None:
            raise SettlementRejected(ORDER_NOT_FOUND, f"order {order_id} does not exist")
        if order.status not in REFUNDABLE_STATES:
            raise SettlementRejected(ORDER_NOT_REFUNDABLE, f"order {order_id} is {order.status}")
        left = refundable(order)
        if left <= 0:
            raise SettlementRejected(
                ORDER_NOT_REFUNDABLE,
                f"order {order_id}'s unused part was already credited to the wallet by an upgrade",
            )
        amount = left if amount_minor is None else amount_minor
        if amount_minor is not None and (
            isinstance(amount, bool) or not isinstance(amount, int) or not 0 < amount <= left
        ):
            raise SettlementRejected(
                INVALID_REFUND_AMOUNT, f"a refund of order {order_id} is a whole number from 1 to {left}"
            )
        full = amount == left
        if amount > 0:
            try:
                refund = _give_back(order, amount, to)
                if full and order.operation == "upgrade":
                    _take_back_credits(order)
            except ledger.LedgerRejected as rejected:
                if rejected.code == ledger.INSUFFICIENT_FUNDS:  # a top-up's refund, an upgrade's credits
                    raise SettlementRejected(
                        REFUND_EXCEEDS_WALLET, "the wallet no longer holds what this order put into it"
                    ) from None
                raise SettlementRejected(rejected.code, str(rejected)) from None
        Order.update(
            status="refunded" if full else "partially_refunded",
            refunded_amount_minor=order.refunded_amount_minor + amount,
            refunded_at=utcnow(),
        ).where(Order.id == order.id).execute()
        if amount > 0:
            _tell_customer(order, refund, amount, full)
        if full:
            revoke_access(order.id)
            if order.operation == "gift" and not gift_purchase.expire_refunded_gift(order.id, utcnow()):
                _withdraw_redeemed_gift(gift_purchase.redemption_of(order.id))
        return Order.get_by_id(order.id)


def _withdraw_redeemed_gift(redemption_order_id):
    """A refunded gift card's redemption: refunded with it (nothing to give back), its access revoked, the
    recipient told. In the refund's transaction."""
    if redemption_order_id is None:
        return
    redemption = locked(Order.select().where(Order.id == redemption_order_id)).get()
    if redemption.status not in REFUNDABLE_STATES:
        return
    Order.update(status="refunded", refunded_at=utcnow()).where(Order.id == redemption.id).execute()
    revoke_access(redemption.id)
    queue_customer_notice(
        redemption.customer_id,
        NOTICE_GIFT_REVOKED,
        f"order:{redemption.id}",
        {"orderId": redemption.id, "planId": redemption.plan_id},
        returning=False,
    )


def _tell_customer(order, refund, amount, full):
    """The customer's notice of the refund (the bot delivers it): where the money goes, and for a
    full refund of what bought access, that the access is switched off."""
    kind = NOTICE_CUSTOMER_REFUNDED + ("_wallet" if refund.destination == TO_WALLET else "")
    if full and order.operation not in BUY_NO_PERIOD:
        kind += "_full"
    queue_customer_notice(
        order.customer_id,
        kind,
        f"refund:{refund.id}",
        {"orderId": order.id, "amountMinor": amount, "currency": order.currency},
        returning=False,
    )


def refundable(order):
    """What a refund of the order can still give back: what was paid, less what was refunded and what
    upgrades credited to the wallet for its periods (that much already went back)."""
    return order.amount_minor - order.refunded_amount_minor - _credited_for(order)


def _credited_for(order):
    """What upgrades credited for the unused part of this order's periods (and did not take back):
    that much of the order was already given back, to the wallet."""
    if order.subscription_id is None or order.operation in BUY_NO_PERIOD:
        return 0
    credited = proration.credited_for_periods(order.subscription_id)
    if not credited:
        return 0
    periods = Entitlement.select(Entitlement.id).where(Entitlement.order == order.id)
    return sum(credited.get(period.id, 0) for period in periods)


def _take_back_credits(order):
    """A fully refunded upgrade is undone: the credits it gave for the periods it replaced leave the
    wallet again (a wallet that spent them refuses the refund: refund_exceeds_wallet)."""
    for transaction_id, left in proration.credits_of_upgrade(order.id):
        if left > 0:
            ledger.reverse(transaction_id, left, key=f"order:{order.id}:proration_taken_back:{transaction_id}")


def refunds_of(order_ids):
    """{order id: [Refund, oldest first]} for the panel's answers."""
    found = {order_id: [] for order_id in order_ids}
    if order_ids:
        for refund in Refund.select().where(Refund.order.in_(list(order_ids))).order_by(Refund.id):
            found[refund.order_id].append(refund)
    return found


# -- inside refund_order ------------------------------------------------------------------------


def _give_back(order, amount, to):
    """The refund row, its ledger reversal and, for a provider refund, its job or its notice."""
    payment = _booked_payment(order)
    if payment is None:
        refund = _new_refund(order, amount, MANUAL, "manual", provider=order.provider)
        _notice_manual(order, refund)
        return refund
    from_wallet = payment.idempotency_key == f"order:{order.id}:wallet"
    topup = payment.idempotency_key == f"order:{order.id}:topup"
    if from_wallet:
        if to == TO_PROVIDER:
            raise SettlementRejected(INVALID_REFUND_DESTINATION, "an order paid from the wallet is refunded to it")
        refund = _new_refund(order, amount, TO_WALLET, "succeeded", completed=True)
        return _booked(refund, ledger.reverse(payment, amount, key=_ledger_key(refund)))
    if topup and to == TO_WALLET:
        raise SettlementRejected(INVALID_REFUND_DESTINATION, "a top-up is refunded from the wallet it filled")
    intent = _paid_intent(order)
    provider = intent.provider if intent is not None else order.provider
    if to is None and not topup and provider not in REFUND_APIS:
        to = TO_WALLET  # SPEC 13.10: through the provider's refund API where it has one, otherwise to the wallet
    if to == TO_WALLET:
        refund = _new_refund(order, amount, TO_WALLET, "succeeded", provider=provider, completed=True)
        credit = ledger.post(
            "refund",
            [
                ledger.Entry(ledger.REVENUE, -amount, order.currency),
                ledger.Entry(ledger.wallet(order.customer_id), amount, order.currency),
            ],
            order=order,
            key=_ledger_key(refund),
            reverses=payment,
        )
        return _booked(refund, credit)
    through_api = provider in REFUND_APIS and intent is not None and intent.provider_payment_id is not None
    if through_api and provider in WHOLE_CHARGE_ONLY and amount != intent.amount_minor:
        raise SettlementRejected(
            PARTIAL_REFUND_UNSUPPORTED, f"{provider} refunds a payment whole; refund the rest to the wallet"
        )
    refund = _new_refund(
        order,
        amount,
        TO_PROVIDER if through_api else MANUAL,
        "pending" if through_api else "manual",
        provider=provider,
        payment_id=intent.provider_payment_id if intent is not None else None,
    )
    _booked(refund, ledger.reverse(payment, amount, key=_ledger_key(refund)))
    if through_api:
        client.insert(JOB_KIND, {"refundId": refund.id})
    else:
        _notice_manual(order, refund)
    return refund


def _booked_payment(order):
    keys = [key.format(order.id) for key in PAYMENT_KEYS]
    return LedgerTransaction.get_or_none(LedgerTransaction.idempotency_key.in_(keys))


def _paid_intent(order):
    return (
        PaymentIntent.select()
        .where(PaymentIntent.order == order, PaymentIntent.status == "succeeded")
        .order_by(PaymentIntent.id)
        .first()
    )


def _new_refund(order, amount, destination, status, provider=None, payment_id=None, completed=False):
    now = utcnow()
    # The order is locked and its refunded amount grows with every refund: the key is the refund's own.
    return Refund.create(
        order=order,
        amount_minor=amount,
        currency=order.currency,
        destination=destination,
        status=status,
        provider=provider,
        provider_payment_id=payment_id,
        idempotence_key=f"refund-{order.id}-{order.refunded_amount_minor}-{amount}",
        created_at=now,
        updated_at=now,
        completed_at=now if completed else None,
    )


def _booked(refund, transaction):
    defer(Refund.update(ledger_transaction=transaction.id).where(Refund.id == refund.id))
    refund.ledger_transaction = transaction.id
    return refund


def _ledger_key(refund):
    return f"refund:{refund.id}"


def _notice_manual(order, refund):
    queue_notice(
        NOTICE_REFUND_MANUAL,
        f"refund:{refund.id}",
        {
            "refundId": refund.id,
            "orderId": order.id,
            "provider": refund.provider,
            "amountMinor": refund.amount_minor,
            "currency": refund.currency,
        },
    )
