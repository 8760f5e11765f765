"""What no flow takes: a message too long, an unknown command, anything else; and payments that name no order.

Each gets a plain answer and nothing is written (the handlers refuse, so
the update's transaction is rolled back: bot/updates.py) — except money
that arrived anyway: a successful payment no flow claims is queued as an
operator notice, so a person can refund it.
"""

from ops.records import queue_notice

NOTICE_UNMATCHED_PAYMENT = "stars_payment_unmatched"

MAX_TEXT_LENGTH = 4096  # Telegram's own limit on a message's text


def _length(message):
    return len(message.text or message.caption or "")


def on_too_long(message, context):
    raise context.refusal("too_long", limit=MAX_TEXT_LENGTH)


def on_unknown_command(message, context):
    command = (message.text or "").split()[0][:64]
    raise context.refusal("unknown_command", command=command)


def on_anything_else(message, context):
    raise context.refusal("not_understood" if context.customer is not None else "press_start")


def on_unmatched_payment(message, context):
    payment = message.successful_payment
    queue_notice(
        NOTICE_UNMATCHED_PAYMENT,
        payment.telegram_payment_charge_id,
        {
            "telegramUserId": message.from_user.id,
            "currency": payment.currency,
            "amountMinor": payment.total_amount,
            "chargeId": payment.telegram_payment_charge_id,
        },
    )
    context.send(message.chat.id, context.text("payment_unmatched"))


ALL_CONTENT = [
    "text", "audio", "document", "photo", "sticker", "video", "video_note", "voice", "location", "contact",
    "animation", "venue", "dice", "poll",
]  # fmt: skip


def register_guards(bot, context):
    bot.message_handler(func=lambda message: _length(message) > MAX_TEXT_LENGTH, content_types=ALL_CONTENT)(
        lambda message: on_too_long(message, context())
    )


def register(bot, context):
    bot.message_handler(content_types=["successful_payment"])(lambda message: on_unmatched_payment(message, context()))
    bot.message_handler(func=lambda message: (message.text or "").startswith("/"))(
        lambda message: on_unknown_command(message, context())
    )
    bot.message_handler(func=lambda message: True, content_types=ALL_CONTENT)(
        lambda message: on_anything_else(message, context())
    )
