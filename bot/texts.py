"""Every text the bot shows, in Russian and English (SPEC 14.4), and the operator notices' wording.

One dict per language; `text(language, key, **values)` picks the language
(English when a key or a language is missing) and fills `{name}` fields.
Texts are sent as plain text (no parse mode), so a customer's name or a
plan's name can never turn into markup.
"""

LANGUAGES = ("ru", "en")
DEFAULT_LANGUAGE = "en"

CATALOG = {
    "en": {
        "welcome": "Welcome, {name}! This bot sells and manages your VPN access.",
        "welcome_back": "Welcome back, {name}!",
        "main_menu": "Main menu: choose what you need.",
        "button_subscriptions": "My subscriptions",
        "button_language": "Language",
        "button_back": "« Back",
        "language_prompt": "Choose the bot's language:",
        "language_set": "Language: English.",
        "subscriptions_none": "You have no subscriptions yet.",
        "subscriptions_header": "Your subscriptions:",
        "subscription_line": "• {plan}: {status}, until {ends} UTC",
        "status_pending": "being set up",
        "status_active": "active",
        "status_paused": "paused",
        "status_expired": "expired",
        "status_limited": "traffic limit reached",
        "status_disabled": "disabled",
        "status_failed": "could not be set up (we are on it)",
        "status_other": "{status}",
        "callback_refused": "This button is not valid any more. Send /start for a fresh menu.",
        "blocked": "Your account is blocked. Contact support if you think this is a mistake.",
        "unknown_command": "I don't know the command {command}. Send /start for the menu.",
        "too_long": "That message is too long: at most {limit} characters, please.",
        "not_understood": "I work with buttons and commands. Send /start for the menu.",
        "press_start": "Send /start to begin.",
        "checkout_refused": "This payment can't be accepted. Start again from the menu.",
        "failure": "Something went wrong on our side. Please try again in a minute.",
        "payment_unmatched": "We received your payment but could not match it to an order. "
        "An operator will sort it out or refund it.",
    },
    "ru": {
        "welcome": "Добро пожаловать, {name}! Этот бот продаёт VPN-доступ и управляет им.",
        "welcome_back": "С возвращением, {name}!",
        "main_menu": "Главное меню: выберите, что нужно.",
        "button_subscriptions": "Мои подписки",
        "button_language": "Язык",
        "button_back": "« Назад",
        "language_prompt": "Выберите язык бота:",
        "language_set": "Язык: русский.",
        "subscriptions_none": "У вас пока нет подписок.",
        "subscriptions_header": "Ваши подписки:",
        "subscription_line": "• {plan}: {status}, до {ends} UTC",
        "status_pending": "подключается",
        "status_active": "активна",
        "status_paused": "приостановлена",
        "status_expired": "истекла",
        "status_limited": "исчерпан лимит трафика",
        "status_disabled": "отключена",
        "status_failed": "не удалось подключить (мы уже разбираемся)",
        "status_other": "{status}",
        "callback_refused": "Эта кнопка больше не действует. Отправьте /start, чтобы открыть меню заново.",
        "blocked": "Ваш аккаунт заблокирован. Если это ошибка, напишите в поддержку.",
        "unknown_command": "Команда {command} мне незнакома. Отправьте /start, чтобы открыть меню.",
        "too_long": "Сообщение слишком длинное: не больше {limit} символов.",
        "not_understood": "Я понимаю кнопки и команды. Отправьте /start, чтобы открыть меню.",
        "press_start": "Отправьте /start, чтобы начать.",
        "checkout_refused": "Этот платёж нельзя принять. Начните заново из меню.",
        "failure": "У нас что-то пошло не так. Попробуйте ещё раз через минуту.",
        "payment_unmatched": "Мы получили ваш платёж, но не смогли сопоставить его с заказом. "
        "Оператор разберётся или вернёт деньги.",
    },
}

# The names of the languages, each in itself, for the language menu.
LANGUAGE_NAMES = {"ru": "Русский", "en": "English"}

# Operator notices (SPEC 6): English, one forum topic per notice topic.
TOPIC_OF_KIND = {
    "order_paid": "payments",
    "stars_payment_unmatched": "payments",
    "refund_manual": "payments",
    "refund_failed": "payments",
    "fulfillment_failure": "fulfillment",
}
DEFAULT_TOPIC = "operations"
TOPIC_NAMES = {
    "payments": "Payments",
    "fulfillment": "Fulfillment",
    "operations": "Operations",
}
NOTICE_TEXTS = {
    "order_paid": "Order {orderId} paid; entitlement {entitlementId} created.",
    "stars_payment_unmatched": (
        "A Stars payment of {amountMinor} {currency} from Telegram user {telegramUserId} matched no order "
        "(charge {chargeId}): refund it or settle it by hand."
    ),
    "refund_manual": (
        "Refund {refundId} of order {orderId}: {amountMinor} {currency} paid at {provider}, which has no refund API."
        " Pay it back by hand."
    ),
    "refund_failed": (
        "Refund {refundId} of order {orderId} ({amountMinor} {currency} at {provider}) failed: {errorCode}."
        " Pay it back by hand or refund it to the wallet."
    ),
    "fulfillment_failure": (
        "Fulfillment {operation} for entitlement {entitlementId} is {status}: {errorCode}. See System → Jobs."
    ),
}
NOTICE_FALLBACK = "{kind}: {details}"


class _Values(dict):
    def __missing__(self, key):
        return "?"


def language_of(code):
    """A catalog language for a Telegram language_code (or a stored choice)."""
    code = (code or "").lower()
    for language in LANGUAGES:
        if code == language or code.startswith(language + "-"):
            return language
    return DEFAULT_LANGUAGE


def text(language, key, **values):
    template = CATALOG.get(language, {}).get(key) or CATALOG[DEFAULT_LANGUAGE][key]
    return template.format_map(_Values(values))


def notice_text(kind, payload):
    """An operator notice's message: its kind's sentence, or the kind and its fields."""
    template = NOTICE_TEXTS.get(kind)
    if template is not None:
        return template.format_map(_Values(payload))
    details = ", ".join(f"{key}={value}" for key, value in sorted(payload.items()))
    return NOTICE_FALLBACK.format(kind=kind, details=details or "-")
