"""Inline keyboards and their callback data: what a button may say, and the check every press passes.

Callback data is `<action>` or `<action>:<argument>`, at most 64 bytes
(Telegram's limit). `parse()` accepts only the actions below with an
argument their validator takes; anything else — a stale button, a forged
press — is None, and the press gets a polite refusal (bot/handlers/menu.py).
"""

import re
from dataclasses import dataclass

from telebot.types import InlineKeyboardButton, InlineKeyboardMarkup

from bot import texts

MAX_CALLBACK_DATA_BYTES = 64

MENU = "menu"
SUBSCRIPTIONS = "subs"
LANGUAGE = "lang"
BUY = "buy"
PLAN = "plan"  # plan:<plan id>: the ways to pay for it
PAY = "pay"  # pay:<plan id>:<method>:<currency>
GIFT = "gift"  # gift:<plan id>: the ways to pay for a gift card of it
GIFT_PAY = "gpay"  # gpay:<plan id>:<method>:<currency>: a gift card of it, paid that way
NEW = "new"  # new:<plan id>: the ways to pay for a new subscription of a plan the customer holds already
EXTEND = "ext"  # ext:<plan id>:<slot>: the ways to pay for extending the customer's subscription in that slot
EXTEND_PAY = "xpay"  # xpay:<plan id>:<slot>:<method>:<currency>: that extension, paid that way
QR_CODE = "qr"  # qr:<subscription id>: its link as a QR code image
SHOP = "shop"  # the digital goods on sale
GOODS = "goods"  # goods:<goods id>: the ways to pay for them
GOODS_PAY = "gdpay"  # gdpay:<goods id>:<method>:<currency>: the goods, paid that way
GOODS_METHODS = ("stars", "wallet")

PAYMENT_METHODS = ("stars", "wallet", "yookassa", "cryptobot")
_ID = r"[1-9][0-9]{0,17}"
_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
SUPPORT = "support"
CODE = "code"  # a gift card's or an access code's activation
TRIAL = "trial"
WALLET = "wallet"
TOPUP = "topup"  # topup:<method>:<currency>:<amount in minor units>
AUTO_RENEW = "renew"  # renew:<subscription id>:on|off
RATE = "rate"  # rate:<order id>:<1-5>: the customer's rating of the shop for that order
TOPUP_METHODS = ("yookassa", "cryptobot")

# action -> the arguments it takes (None: no argument)
ACTIONS = {
    MENU: None,
    SUBSCRIPTIONS: None,
    LANGUAGE: re.compile("|".join(texts.LANGUAGES) + "|"),
    BUY: None,
    PLAN: re.compile(_ID),
    PAY: re.compile(_ID + ":(" + "|".join(PAYMENT_METHODS) + ")" + ":[A-Z]{3}"),
    GIFT: re.compile(_ID),
    GIFT_PAY: re.compile(_ID + ":(" + "|".join(PAYMENT_METHODS) + ")" + ":[A-Z]{3}"),
    NEW: re.compile(_ID),
    EXTEND: re.compile(_ID + ":" + _ID),
    EXTEND_PAY: re.compile(_ID + ":" + _ID + ":(" + "|".join(PAYMENT_METHODS) + ")" + ":[A-Z]{3}"),
    QR_CODE: re.compile(_UUID),
    SHOP: None,
    GOODS: re.compile(_ID),
    GOODS_PAY: re.compile(_ID + ":(" + "|".join(GOODS_METHODS) + ")" + ":[A-Z]{3}"),
    SUPPORT: None,
    CODE: None,
    TRIAL: None,
    WALLET: None,
    TOPUP: re.compile("(" + "|".join(TOPUP_METHODS) + ")" + ":[A-Z]{3}:" + _ID),
    AUTO_RENEW: re.compile(_UUID + ":(on|off)"),
    RATE: re.compile(_ID + ":[1-5]"),
}


@dataclass(frozen=True)
class Press:
    action: str
    argument: str = ""


def data(action, argument=""):
    value = f"{action}:{argument}" if argument else action
    if len(value.encode()) > MAX_CALLBACK_DATA_BYTES:
        raise ValueError(f"callback data for {action} is longer than Telegram allows")
    return value


def parse(raw):
    """The Press a button's callback data names, or None when it is not one the bot made."""
    if not isinstance(raw, str) or not raw or len(raw.encode()) > MAX_CALLBACK_DATA_BYTES:
        return None
    action, _, argument = raw.partition(":")
    if action not in ACTIONS:
        return None
    allowed = ACTIONS[action]
    if allowed is None:
        return Press(action) if ":" not in raw else None
    if not allowed.fullmatch(argument):
        return None
    return Press(action, argument)


def _markup(rows):
    markup = InlineKeyboardMarkup()
    for row in rows:
        markup.row(*(InlineKeyboardButton(label, callback_data=value) for label, value in row))
    return markup


def main_menu(language):
    return _markup(
        [
            [(texts.text(language, "button_buy"), data(BUY)), (texts.text(language, "button_shop"), data(SHOP))],
            [(texts.text(language, "button_subscriptions"), data(SUBSCRIPTIONS))],
            [(texts.text(language, "button_wallet"), data(WALLET))],
            [(texts.text(language, "button_language"), data(LANGUAGE))],
            [(texts.text(language, "button_code"), data(CODE)), (texts.text(language, "button_trial"), data(TRIAL))],
            [(texts.text(language, "button_support"), data(SUPPORT))],
        ]
    )


def language_menu(language):
    return _markup(
        [
            [(texts.LANGUAGE_NAMES[code], data(LANGUAGE, code)) for code in texts.LANGUAGES],
            [(texts.text(language, "button_back"), data(MENU))],
        ]
    )


def to_wallet(language):
    return _markup(
        [[(texts.text(language, "button_wallet"), data(WALLET))], [(texts.text(language, "button_back"), data(MENU))]]
    )


def back(language):
    return _markup([[(texts.text(language, "button_back"), data(MENU))]])


def plans(language, offers):
    """One button per plan on sale: [(plan id, label)]."""
    rows = [[(label, data(PLAN, str(plan_id)))] for plan_id, label in offers]
    rows.append([(texts.text(language, "button_back"), data(MENU))])
    return _markup(rows)


def goods_list(language, offers):
    """One button per goods on sale: [(goods id, label)]."""
    rows = [[(label, data(GOODS, str(goods_id)))] for goods_id, label in offers]
    rows.append([(texts.text(language, "button_back"), data(MENU))])
    return _markup(rows)


def goods_methods(language, goods_id, choices):
    """One button per way of paying for goods ([(method, currency, label)]), and back to the shop."""
    rows = [[(label, data(GOODS_PAY, f"{goods_id}:{method}:{currency}"))] for method, currency, label in choices]
    rows.append([(texts.text(language, "button_back"), data(SHOP))])
    return _markup(rows)


def payment_methods(language, plan_id, choices, gift=False, gift_offered=True, slot=None):
    """One button per way of paying: [(method, currency, label)]. A plan's own screen also offers it as a
    gift card (to the gift screen, whose buttons pay for the card and lead back to the plan) when
    `gift_offered`. With a `slot`, the buttons pay for extending the customer's subscription in it."""
    pay, target, back_to = PAY, str(plan_id), data(BUY)
    if gift:
        pay, back_to = GIFT_PAY, data(PLAN, str(plan_id))
    elif slot is not None:
        pay, target, back_to = EXTEND_PAY, f"{plan_id}:{slot}", data(PLAN, str(plan_id))
    rows = [[(label, data(pay, f"{target}:{method}:{currency}"))] for method, currency, label in choices]
    if choices and not gift and slot is None and gift_offered:
        rows.append([(texts.text(language, "button_gift"), data(GIFT, str(plan_id)))])
    rows.append([(texts.text(language, "button_back"), back_to)])
    return _markup(rows)


def extend_or_new(language, plan_id, held):
    """A plan the customer holds already: extend one of their subscriptions of it ([(slot, label)]), or a
    new subscription with a link of its own."""
    rows = [[(label, data(EXTEND, f"{plan_id}:{slot}"))] for slot, label in held]
    rows.append([(texts.text(language, "button_new_subscription"), data(NEW, str(plan_id)))])
    rows.append([(texts.text(language, "button_back"), data(BUY))])
    return _markup(rows)


def shop_rating(order_id):
    """One row of five buttons, 1 to 5 stars, rating the shop for `order_id`."""
    markup = InlineKeyboardMarkup()
    markup.row(
        *(InlineKeyboardButton("★" * stars, callback_data=data(RATE, f"{order_id}:{stars}")) for stars in range(1, 6))
    )
    return markup


def payment_link(language, url):
    """The hosted provider's page, opened by the button (a URL button carries no callback data)."""
    markup = InlineKeyboardMarkup()
    markup.row(InlineKeyboardButton(texts.text(language, "button_pay_link"), url=url))
    markup.row(InlineKeyboardButton(texts.text(language, "button_back"), callback_data=data(MENU)))
    return markup


def subscriptions(language, subscription_ids, auto_renew=()):
    """A QR code button per subscription whose link can be shown, an auto-renew switch per
    subscription ([(number, subscription id, on)]), and back."""
    rows = [
        [(texts.text(language, "button_qr", number=number), data(QR_CODE, str(subscription_id)))]
        for number, subscription_id in subscription_ids
    ]
    for number, subscription_id, on in auto_renew:
        label = texts.text(language, "button_auto_renew_on" if on else "button_auto_renew_off", number=number)
        rows.append([(label, data(AUTO_RENEW, f"{subscription_id}:{'off' if on else 'on'}"))])
    rows.append([(texts.text(language, "button_back"), data(MENU))])
    return _markup(rows)


def wallet(language, topups):
    """One button per top-up on offer ([(method, currency, amount minor, label)]), and back."""
    rows = [[(label, data(TOPUP, f"{method}:{currency}:{amount}"))] for method, currency, amount, label in topups]
    rows.append([(texts.text(language, "button_back"), data(MENU))])
    return _markup(rows)
