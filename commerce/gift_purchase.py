"""Buying a gift card (SPEC 13.11): a paid `gift` order gives its buyer a code, not access.

A `gift` order settled by a payment (a provider, Stars, the wallet — every
path but the free ones) is the purchase of a gift card for its plan. Its
settlement (commerce/settlement.py) books the money as for any sale and then,
in the same transaction, calls `issue_bought_gift` here:

- a gift card for the order's plan, `active`, valid GIFT_CARD_VALIDITY_DAYS,
  naming the order as its `purchase_order` (UNIQUE: however often the payment
  is replayed, one order has one card — and settlement never reaches here a
  second time, the order being paid already);
- the code reaches the buyer once, through a `gift_code` customer notice the
  bot delivers (bot/customer_notices.py): the code rides in the notice's
  sealed `secret` column and is erased when the notice is sent, so at rest
  there is only the card's SHA-256 and, until delivery, a sealed copy;
- `gift.purchased` for the outbox; the order is `fulfilled` at once: there
  is nothing for the panel to do, no entitlement and no operation for the
  buyer. The recipient activates the code later (commerce/activations.py),
  which settles their own zero-price `gift` order under `gift:<id>:fulfill`.

A full refund of the purchase (commerce/refunds.py) takes back what it
bought: a card not yet redeemed expires at once (`expire_refunded_gift`), so
its code activates nothing. A card already redeemed has become the
recipient's period, which the refund does not take from them.

Without APP_DATA_ENCRYPTION_KEY nothing can be sealed: the payment is real,
so the card is still issued and the order settled, but the code cannot be
kept for the buyer. The notice then carries no secret (the bot marks it
failed, `no_code`) and a `gift_code_undelivered` operator notice names the
card, so an operator can revoke it and issue the buyer another.
"""

import datetime
import json

from commerce import codes
from models.catalogue import GiftCard
from models.ops import CustomerNotice
from ops import sealing
from ops.records import emit_event, queue_notice

GIFT_CARD_VALIDITY_DAYS = 365
NOTICE_GIFT_CODE = "gift_code"  # customer notice: the code, shown once
NOTICE_GIFT_CODE_UNDELIVERED = "gift_code_undelivered"  # operator notice: the code could not be kept


def issue_bought_gift(order, now):
    """The card, the buyer's notice carrying its code and `gift.purchased`; in the settlement's transaction.
    Returns the card."""
    expires_at = now + datetime.timedelta(days=GIFT_CARD_VALIDITY_DAYS)
    card, code = codes.issue_gift_card(order.plan_id, expires_at, purchase_order=order.id)
    payload = {
        "orderId": order.id,
        "giftCardId": card.id,
        "planId": order.plan_id,
        "periodEnd": expires_at.isoformat(),
    }
    kept = sealing.available()
    # The model, not ops.records' raw INSERT: the secret column seals what is written to it.
    CustomerNotice.create(
        customer=order.customer_id,
        kind=NOTICE_GIFT_CODE,
        dedupe_key=f"order:{order.id}",
        payload=json.dumps(payload, sort_keys=True),
        secret=code if kept else None,
        created_at=now,
    )
    if not kept:
        queue_notice(NOTICE_GIFT_CODE_UNDELIVERED, f"gift_card:{card.id}", payload)
    emit_event(
        "gift.purchased",
        {
            "orderId": order.id,
            "customerId": order.customer_id,
            "giftCardId": card.id,
            "planId": order.plan_id,
            "expiresAt": expires_at.isoformat(),
            "amountMinor": order.amount_minor,
            "currency": order.currency,
        },
        aggregate=f"customer:{order.customer_id}",
    )
    return card


def redemption_of(order_id):
    """The order that redeemed the gift card `order_id` bought, or None (not redeemed, or no card)."""
    card = GiftCard.get_or_none(GiftCard.purchase_order == order_id)
    return None if card is None else card.redemption_order_id


def expire_refunded_gift(order_id, now):
    """In a full refund's transaction: the order's unredeemed gift card expires now. True if it did."""
    expired = GiftCard.update(status="expired", expires_at=now).where(
        GiftCard.purchase_order == order_id, GiftCard.status == "active"
    )
    return expired.execute() > 0
