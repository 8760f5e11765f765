"""Wallet (SPEC 14.4, 13.3): the balance in each currency, the latest movements, and top-ups.

The screen reads the ledger in the update's transaction: every wallet
balance the customer has and the newest HISTORY_SHOWN entries. A top-up is
paid at a hosted provider, like a purchase there (bot/handlers/buy.py): the
`topup` order is made in the update's transaction, keyed by the update, and
the payment at the provider after the commit (commerce.checkout with the
same key finds that order); the provider's webhook or the poll settles it,
and settlement credits the wallet (`wallet.credited`).

A top-up button names its method, currency and amount; only the amounts
offered here (TOPUP_AMOUNTS, in a currency the method takes) are accepted,
so a forged press for another amount is refused like any forged button.
Top-ups are refused, nothing written, in maintenance and for someone not in
the required channel; a blocked customer's updates never get here.
"""

import logging

from bot import keyboards, services, texts
from bot.handlers.buy import PREFERRED_CURRENCY, payment_page, refusal_for, refuse_plainly, require_member
from commerce import ledger
from commerce import providers as methods
from commerce.orders import OrderRejected, create_order
from ops import maintenance

logger = logging.getLogger("omniflow.bot.wallet")

HISTORY_SHOWN = 10
DATE_FORMAT = "%Y-%m-%d %H:%M"
# What a top-up button may add, in minor units, per currency.
TOPUP_AMOUNTS = {"RUB": (30000, 50000, 100000), "USD": (500, 1000, 2000)}


def signed(amount_minor, currency):
    return ("+" if amount_minor > 0 else "−") + texts.money(abs(amount_minor), currency)


def topups(context):
    """[(method, currency, amount, label)]: the top-ups on offer, per hosted provider the shop offers."""
    offered = services.current().providers
    buttons = []
    for method in methods.HOSTED:
        currency = PREFERRED_CURRENCY[method]
        if not methods.offered(offered, method) or not methods.accepts(method, currency):
            continue
        for amount in TOPUP_AMOUNTS.get(currency, ()):
            label = context.text(
                "button_topup", amount=texts.money(amount, currency), method=context.text(f"topup_method_{method}")
            )
            buttons.append((method, currency, amount, label))
    return buttons


def screen(context):
    """The wallet screen's text and its top-up buttons."""
    held = ledger.balances(context.customer.id)
    lines = [context.text("wallet_header")]
    if any(held.values()):
        lines += [
            context.text("wallet_balance", balance=texts.money(amount, currency)) for currency, amount in held.items()
        ]
    else:
        lines.append(context.text("wallet_empty"))
    latest = ledger.history(context.customer.id, limit=HISTORY_SHOWN)
    if latest:
        lines += ["", context.text("wallet_history_header")]
        lines += [
            context.text(
                "wallet_history_line",
                when=item.created_at.strftime(DATE_FORMAT),
                amount=signed(item.amount_minor, item.currency),
                what=context.text(f"ledger_{item.kind}"),
            )
            for item in latest
        ]
    offered = topups(context)
    lines += ["", context.text("wallet_topup_prompt" if offered else "wallet_topup_none")]
    return "\n".join(lines), offered


def on_wallet(query, context):
    chat, message_id = query.message.chat.id, query.message.message_id
    text, offered = screen(context)
    context.edit(chat, message_id, text, keyboards.wallet(context.language, offered))
    context.answer_callback(query.id)


def on_topup(query, context, argument):
    method, currency, amount_text = argument.split(":")
    amount = int(amount_text)
    if amount not in TOPUP_AMOUNTS.get(currency, ()) or PREFERRED_CURRENCY.get(method) != currency:
        raise context.refusal("callback_refused")
    if maintenance.is_active():
        raise refuse_plainly(context, query, "maintenance")
    require_member(context, query)
    shop = services.current()
    if not methods.offered(shop.providers, method) or not methods.accepts(method, currency):
        raise refuse_plainly(context, query, "purchase_refused")
    key = f"bot:{context.update_id}"
    try:
        create_order(context.customer.id, "topup", currency, amount_minor=amount, provider=method, key=key)
    except OrderRejected as rejected:
        raise refusal_for(context, query, rejected.code) from None
    chat = query.message.chat.id
    context.answer_callback(query.id)
    context.later(lambda: payment_page(context, chat, "topup", method, currency, key, shop, amount_minor=amount))
