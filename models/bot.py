"""The bot's records: applied updates, sessions, shop reviews and forum topics (SPEC 14.3, 14.6, 14.7)."""

import datetime

from peewee import BigAutoField, BigIntegerField, BooleanField, DateTimeField, ForeignKeyField, IntegerField, TextField

from models.base import BaseModel, utcnow
from models.commerce import Customer, Order

# How long each kind of session lives (SPEC 14.7); retention sweeps rows past expires_at (SPEC 7).
SESSION_TTL = datetime.timedelta(hours=24)
CHECKOUT_SESSION_TTL = datetime.timedelta(minutes=30)
SHOP_REVIEW_TTL = datetime.timedelta(days=1)
# How long an applied update's id marks a delivery of that id as a repeat (SPEC 14.3). Telegram delivers an
# unconfirmed update again for at most a day; after a week without updates it numbers the next ones from a
# random point, which may repeat ids applied long ago. Well under that week, an older id is a new update,
# and retention deletes the record.
UPDATE_REPEAT_WINDOW = datetime.timedelta(hours=24)


class BotUpdate(BaseModel):
    """A Telegram update whose effect has been committed; the row commits with that effect."""

    update_id = BigIntegerField(primary_key=True)
    kind = TextField()  # message, callback_query, pre_checkout_query, ...
    applied_at = DateTimeField(default=utcnow)

    class Meta:
        table_name = "bot_updates"


class BotSession(BaseModel):
    """A chat's conversation state (JSON), e.g. which answer the bot is waiting for."""

    chat_id = BigIntegerField(primary_key=True)
    customer = ForeignKeyField(Customer, null=True, column_name="customer_id")
    state = TextField(default="{}")
    updated_at = DateTimeField(default=utcnow)
    expires_at = DateTimeField()

    class Meta:
        table_name = "bot_sessions"


class BotCheckoutSession(BaseModel):
    """A purchase being put together in a chat (plan, payment method) before it becomes an order."""

    id = BigAutoField()
    chat_id = BigIntegerField()
    customer = ForeignKeyField(Customer, column_name="customer_id")
    state = TextField(default="{}")
    created_at = DateTimeField(default=utcnow)
    expires_at = DateTimeField()
    order = ForeignKeyField(Order, null=True, column_name="order_id")  # set once the checkout made its order

    class Meta:
        table_name = "bot_checkout_sessions"


class BotShopReview(BaseModel):
    """A shop screen shown to a customer (what was offered, at which prices), kept for a day."""

    id = BigAutoField()
    chat_id = BigIntegerField()
    customer = ForeignKeyField(Customer, null=True, column_name="customer_id")
    screen = TextField(default="{}")
    created_at = DateTimeField(default=utcnow)
    expires_at = DateTimeField()

    class Meta:
        table_name = "bot_shop_reviews"


class ShopRating(BaseModel):
    """A customer's rating of the shop (1-5) for one order, pressed under its review prompt: once per order."""

    order = ForeignKeyField(Order, primary_key=True, backref="+", column_name="order_id")
    customer = ForeignKeyField(Customer, backref="+", column_name="customer_id")
    rating = IntegerField()
    created_at = DateTimeField(default=utcnow)

    class Meta:
        table_name = "shop_ratings"


class BotForumTopic(BaseModel):
    """The forum topic created once per notice topic in the operator chat."""

    id = BigAutoField()
    chat_id = BigIntegerField()
    topic = TextField()
    message_thread_id = BigIntegerField()
    created_at = DateTimeField(default=utcnow)

    class Meta:
        table_name = "bot_forum_topics"
        indexes = ((("chat_id", "topic"), True),)


class BotChannelMember(BaseModel):
    """A customer's membership of the required channel as getChatMember last answered it (SPEC 6)."""

    customer = ForeignKeyField(Customer, primary_key=True, column_name="customer_id")
    channel = TextField()  # the APP_TELEGRAM_REQUIRED_CHANNEL checked; a row for another channel is no answer
    member = BooleanField()
    checked_at = DateTimeField()
    left_at = DateTimeField(null=True)  # a re-check found them gone

    class Meta:
        table_name = "bot_channel_members"


BOT_MODELS = [BotUpdate, BotSession, BotCheckoutSession, BotShopReview, ShopRating, BotForumTopic, BotChannelMember]
