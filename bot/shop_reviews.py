"""The customer rates the shop after a purchase (SPEC 14.7): five buttons under "your access is ready", once per order.

When the customer-notice loop delivers an `access_ready` notice of a paid
order that has no rating yet, the message carries a row of buttons, 1 to 5
stars (`rate:<order>:<stars>`), and the transaction that marks the notice
sent writes the review prompt to `bot_shop_reviews` (the chat, the customer,
`{"orderId": …}` as its screen), kept REVIEW_TTL (a day: retention sweeps
it, SPEC 7). A press is taken while that prompt lives and only from its
customer: the rating goes to `shop_ratings`, one per order (its primary
key), in the press's transaction; a second press, or one after the day, is
answered in words and changes nothing. Operators see the ratings on the
customer's page in the back office.
"""

import datetime
import json

from models.base import utcnow
from models.bot import BotShopReview, ShopRating
from models.commerce import Order
from models.fulfillment import Entitlement
from models.transactions import fetch_one

REVIEW_TTL = datetime.timedelta(days=1)
PROMPTED_KINDS = ("access_ready",)
RATED_STATES = ("paid", "fulfilled", "partially_refunded")

THANKS = "thanks"
ALREADY_RATED = "already_rated"
EXPIRED = "expired"

_RATE = (
    "INSERT INTO shop_ratings (order_id, customer_id, rating, created_at) VALUES (%s, %s, %s, %s)"
    " ON CONFLICT (order_id) DO NOTHING RETURNING order_id"
)


def order_to_rate(kind, payload):
    """The paid order a delivered notice of `kind` may ask a rating for, or None."""
    if kind not in PROMPTED_KINDS or not isinstance(payload.get("entitlementId"), int):
        return None
    entitlement = Entitlement.get_or_none(Entitlement.id == payload["entitlementId"])
    if entitlement is None or entitlement.order_id is None:
        return None
    order = Order.get_or_none(Order.id == entitlement.order_id)
    if order is None or order.status not in RATED_STATES or order.amount_minor == 0:
        return None  # a trial, a gift or a code: nothing was bought
    if ShopRating.select().where(ShopRating.order == order.id).exists():
        return None
    return order.id


def record_prompt(chat_id, customer_id, order_id, now=None):
    """The review prompt shown in `chat_id` for `order_id`, in the caller's transaction."""
    now = now or utcnow()
    BotShopReview.create(
        chat_id=chat_id,
        customer=customer_id,
        screen=json.dumps({"orderId": order_id}),
        created_at=now,
        expires_at=now + REVIEW_TTL,
    )


def rate(customer_id, chat_id, order_id, stars, now=None):
    """Take a press of `stars` for `order_id`: THANKS (recorded), ALREADY_RATED or EXPIRED (nothing written)."""
    now = now or utcnow()
    prompted = (
        BotShopReview.select()
        .where(
            BotShopReview.chat_id == chat_id,
            BotShopReview.customer == customer_id,
            BotShopReview.screen == json.dumps({"orderId": order_id}),
            BotShopReview.expires_at > now,
        )
        .exists()
    )
    if not prompted:
        return ALREADY_RATED if ShopRating.select().where(ShopRating.order == order_id).exists() else EXPIRED
    recorded = fetch_one(_RATE, (order_id, customer_id, stars, now))
    return THANKS if recorded is not None else ALREADY_RATED
