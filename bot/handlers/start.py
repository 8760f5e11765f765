"""/start: the customer is found or created from the Telegram user, and gets the main menu."""

from bot import keyboards, texts
from commerce import customers


def identity_of(user):
    return customers.TelegramIdentity(
        telegram_id=user.id,
        first_name=user.first_name or "",
        last_name=user.last_name or "",
        username=user.username or "",
        language_code=user.language_code or "",
    )


def on_start(message, context):
    identity = identity_of(message.from_user)
    customer, created = customers.customer_for_telegram(
        identity, texts.language_of(identity.language_code), known=context.customer
    )
    context.customer = customer
    context.language = texts.language_of(customer.language_code)
    greeting = context.text("welcome" if created else "welcome_back", name=customers.shown_name(customer.display_name))
    context.send(message.chat.id, greeting + "\n\n" + context.text("main_menu"), keyboards.main_menu(context.language))


def register(bot, context):
    bot.message_handler(commands=["start"], chat_types=["private"])(lambda message: on_start(message, context()))
