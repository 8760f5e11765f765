"""A press of a rating button (`rate:<order>:<stars>`) under "your access is ready" (bot/shop_reviews.py)."""

from bot import shop_reviews

ANSWERS = {
    shop_reviews.THANKS: "rating_thanks",
    shop_reviews.ALREADY_RATED: "rating_already",
    shop_reviews.EXPIRED: "rating_expired",
}


def on_rate(query, context, argument):
    """Record the rating in the press's transaction and answer the press in words (a second press of
    the same buttons is told the order is rated already, and changes nothing)."""
    order_id, stars = (int(part) for part in argument.split(":"))
    outcome = shop_reviews.rate(context.customer.id, query.message.chat.id, order_id, stars)
    context.answer_callback(query.id, context.text(ANSWERS[outcome]))
