"""The bot's handlers, one module per flow, registered on the TeleBot in the order Telegram updates are tried.

Every handler is thin: it parses the update, calls a service, and queues
answers rendered from bot/texts.py on the update's Context (bot/updates.py),
which is `applier.current` while the update is applied.
"""

from bot import membership
from bot.handlers import buy, codes, fallback, menu, start, support


def register(bot, applier, settings=None):
    def context():
        return applier.current

    files = support.SupportFiles()
    if settings is not None:
        files = support.SupportFiles(settings.support_attachment_dir, settings.support_attachment_max_bytes)
    membership.configure(bot, settings.telegram_required_channel if settings is not None else "")
    # The channel check's getChatMember is asked before the batch's transaction (bot/updates.py).
    applier.preparers.append(lambda pairs: membership.current().prepare(pairs, menu.needs_membership))
    fallback.register_guards(bot, context)  # before any flow: a message too long is refused unread
    start.register(bot, context)
    support.register(bot, context, files, applier)
    codes.register(bot, context)
    buy.register(bot, context)  # before fallback: its payments and pre-checkout queries
    menu.register(bot, context)
    fallback.register(bot, context)  # last: what no flow took
