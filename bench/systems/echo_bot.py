"""The peer of bench.bot: a bare pyTelegramBotAPI echo bot, as its README writes one.

    python -m bench.systems.echo_bot API_URL TOKEN

TeleBot with its defaults (threaded handlers, two worker threads) and
`infinity_polling`, answering every message with its own text. No database,
no lease, no offset of its own: the ceiling of the library and of the fake
Bot API on this machine.
"""

import signal
import sys

import telebot
from telebot import apihelper


def main(argv=None):
    api_url, token = (argv or sys.argv[1:])[:2]
    apihelper.API_URL = api_url + "/bot{0}/{1}"
    bot = telebot.TeleBot(token)

    @bot.message_handler(func=lambda message: True)
    def echo(message):
        bot.send_message(message.chat.id, message.text)

    signal.signal(signal.SIGTERM, lambda signum, frame: bot.stop_polling())
    bot.infinity_polling(timeout=25, long_polling_timeout=25, skip_pending=False)


if __name__ == "__main__":
    main()
