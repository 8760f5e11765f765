"""The main menu's buttons: back to the menu, my subscriptions, the language, support. Every press is validated first."""

from bot import keyboards, texts
from bot.handlers import support
from commerce import customers

DATE_FORMAT = "%Y-%m-%d %H:%M"


def on_press(query, context):
    press = keyboards.parse(query.data)
    if press is None or context.customer is None or query.message is None:
        # Not a button this bot made, or a press from someone who never sent /start.
        raise context.refusal("callback_refused")
    chat, message_id = query.message.chat.id, query.message.message_id
    if press.action == keyboards.MENU:
        context.edit(chat, message_id, context.text("main_menu"), keyboards.main_menu(context.language))
    elif press.action == keyboards.SUBSCRIPTIONS:
        context.edit(chat, message_id, subscriptions_text(context), keyboards.back(context.language))
    elif press.action == keyboards.LANGUAGE and not press.argument:
        context.edit(chat, message_id, context.text("language_prompt"), keyboards.language_menu(context.language))
    elif press.action == keyboards.SUPPORT:
        support.ask(context, chat, message_id)
    elif press.action == keyboards.LANGUAGE:
        customers.set_language(context.customer, press.argument)
        context.language = press.argument
        shown = context.text("language_set") + "\n\n" + context.text("main_menu")
        context.edit(chat, message_id, shown, keyboards.main_menu(context.language))
    context.answer_callback(query.id)


def subscriptions_text(context):
    summaries = customers.subscriptions_of(context.customer)
    if not summaries:
        return context.text("subscriptions_none")
    lines = [context.text("subscriptions_header")]
    for summary in summaries:
        key = f"status_{summary.status}"
        status = context.text(key) if key in texts.CATALOG[texts.DEFAULT_LANGUAGE] else summary.status
        lines.append(
            context.text(
                "subscription_line", plan=summary.plan_name, status=status, ends=summary.ends_at.strftime(DATE_FORMAT)
            )
        )
    return "\n".join(lines)


def register(bot, context):
    bot.callback_query_handler(func=lambda query: True)(lambda query: on_press(query, context()))
