"""The main menu's buttons: every press is validated first, then handed to its flow (buy, subscriptions
and their auto-renew switch, the wallet and its top-ups, support, codes and the trial, a rating of the
shop) or answered here."""

from telebot.types import InaccessibleMessage

from bot import keyboards
from bot.handlers import buy, codes, goods, reviews, subscriptions, support, wallet
from commerce import customers

BUY_ACTIONS = (
    keyboards.BUY, keyboards.PLAN, keyboards.PAY, keyboards.GIFT, keyboards.GIFT_PAY, keyboards.NEW, keyboards.EXTEND,
    keyboards.EXTEND_PAY, keyboards.SHOP, keyboards.GOODS, keyboards.GOODS_PAY,
)  # fmt: skip
GOODS_ACTIONS = (keyboards.SHOP, keyboards.GOODS, keyboards.GOODS_PAY)


def needs_membership(update):
    """Will this update's handler ask bot/membership.py? A press of a purchase's or a top-up's button."""
    query = update.callback_query
    if query is None or query.message is None or isinstance(query.message, InaccessibleMessage):
        return False
    press = keyboards.parse(query.data)
    return press is not None and (press.action in BUY_ACTIONS or press.action == keyboards.TOPUP)


def on_press(query, context):
    press = keyboards.parse(query.data)
    if press is None or context.customer is None or query.message is None:
        # Not a button this bot made, or a press from someone who never sent /start.
        raise context.refusal("callback_refused")
    if isinstance(query.message, InaccessibleMessage):
        # Telegram no longer gives the bot this message (too old): it cannot be edited in place, so the
        # press is answered in words and the menu is sent afresh.
        context.answer_callback(query.id, context.text("message_too_old"))
        context.send(query.message.chat.id, context.text("main_menu"), keyboards.main_menu(context.language))
        return
    if press.action in GOODS_ACTIONS:
        goods.on_press(query, context, press)
        return
    if press.action in BUY_ACTIONS:
        buy.on_press(query, context, press)
        return
    if press.action == keyboards.SUBSCRIPTIONS:
        subscriptions.on_subscriptions(query, context)
        return
    if press.action == keyboards.QR_CODE:
        subscriptions.on_qr(query, context, press.argument)
        return
    if press.action == keyboards.AUTO_RENEW:
        subscriptions.on_auto_renew(query, context, press.argument)
        return
    if press.action == keyboards.WALLET:
        wallet.on_wallet(query, context)
        return
    if press.action == keyboards.RATE:
        reviews.on_rate(query, context, press.argument)
        return
    if press.action == keyboards.TOPUP:
        wallet.on_topup(query, context, press.argument)
        return
    chat, message_id = query.message.chat.id, query.message.message_id
    if press.action == keyboards.MENU:
        context.edit(chat, message_id, context.text("main_menu"), keyboards.main_menu(context.language))
    elif press.action == keyboards.LANGUAGE and not press.argument:
        context.edit(chat, message_id, context.text("language_prompt"), keyboards.language_menu(context.language))
    elif press.action == keyboards.SUPPORT:
        support.ask(context, chat, message_id)
    elif press.action == keyboards.CODE:
        codes.ask(context, chat, message_id)
    elif press.action == keyboards.TRIAL:
        codes.trial(context, chat, message_id)
    elif press.action == keyboards.LANGUAGE:
        customers.set_language(context.customer, press.argument)
        context.language = press.argument
        shown = context.text("language_set") + "\n\n" + context.text("main_menu")
        context.edit(chat, message_id, shown, keyboards.main_menu(context.language))
    context.answer_callback(query.id)


def register(bot, context):
    bot.callback_query_handler(func=lambda query: True)(lambda query: on_press(query, context()))
