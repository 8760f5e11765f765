"""The shop's digital goods in the bot (SPEC 3, 14.4): Shop → goods → Stars or the wallet.

Shop lists the goods on sale (active, priced, their provider's token usable
here, goods/catalogue.py) with their prices; a goods' screen lists the ways
to pay: Telegram Stars (its XTR price) and the wallet (in each currency the
customer holds a balance in, else its first). Paying goes through checkout
(commerce/checkout.py) exactly as a plan's purchase does (bot/handlers/buy.py):
a Stars invoice sent after the commit and settled by `successful_payment`, or
a wallet payment made in the update's transaction. The settlement writes the
receipt and the goods' delivery; the code reaches the customer as the
`goods_delivered` notice once the provider sold it (goods/delivery.py).
Refusals (maintenance, goods no longer on sale, a wallet that cannot cover
it) are plain messages, nothing written.
"""

from bot import keyboards, texts
from bot.handlers.buy import priced_choices, refusal_for, refuse_plainly, require_member
from bot.services import current as current_services
from commerce import providers as methods
from commerce.catalogue import CatalogueError
from commerce.checkout import GOODS, CheckoutRejected, checkout
from goods.catalogue import goods_on_sale, purchasable_goods
from models.goods import GoodsPrice
from ops import maintenance


def on_shop(query, context):
    if maintenance.is_active():
        raise refuse_plainly(context, query, "maintenance")
    offers = []
    for goods, prices in goods_on_sale():
        shown = " · ".join(texts.money(amount, currency) for currency, amount in sorted(prices.items()))
        offers.append((goods.id, context.text("goods_button", goods=goods.name, prices=shown)))
    chat, message_id = query.message.chat.id, query.message.message_id
    text = context.text("shop_header" if offers else "shop_none")
    context.edit(chat, message_id, text, keyboards.goods_list(context.language, offers))
    context.answer_callback(query.id)


def _on_sale(context, query, goods_id):
    try:
        return purchasable_goods(goods_id)
    except CatalogueError:
        raise refuse_plainly(context, query, "purchase_refused") from None


def on_goods(query, context, goods_id):
    if maintenance.is_active():
        raise refuse_plainly(context, query, "maintenance")
    goods = _on_sale(context, query, goods_id)
    prices = {price.currency: price.amount_minor for price in GoodsPrice.select().where(GoodsPrice.goods == goods)}
    choices = priced_choices(context, prices, hosted=())
    text = context.text("goods_methods_header" if choices else "goods_methods_none", goods=goods.name)
    chat, message_id = query.message.chat.id, query.message.message_id
    context.edit(chat, message_id, text, keyboards.goods_methods(context.language, goods.id, choices))
    context.answer_callback(query.id)


def on_pay(query, context, goods_id, method, currency):
    if maintenance.is_active():
        raise refuse_plainly(context, query, "maintenance")
    goods = _on_sale(context, query, goods_id)
    shop = current_services()
    try:
        made = checkout(
            shop.providers, shop.public_url, context.customer.id, GOODS, method, currency, goods_id=goods.id,
            key=f"bot:{context.update_id}",
        )  # fmt: skip
    except CheckoutRejected as rejected:
        raise refusal_for(context, query, rejected.code) from None
    chat = query.message.chat.id
    context.answer_callback(query.id)
    if method == methods.STARS:
        price = texts.money(made.amount_minor, made.currency)
        context.send(chat, context.text("invoice_sent", plan=goods.name, price=price))
        context.send_invoice(chat, made.invoice)
    # Paid from the wallet: the receipt is the settlement's notice, the code the delivery's.


def on_press(query, context, press):
    """A press of one of the shop's buttons (bot/handlers/menu.py routes it here)."""
    require_member(context, query)
    if press.action == keyboards.SHOP:
        on_shop(query, context)
    elif press.action == keyboards.GOODS:
        on_goods(query, context, int(press.argument))
    elif press.action == keyboards.GOODS_PAY:
        goods_id, method, currency = press.argument.split(":")
        on_pay(query, context, int(goods_id), method, currency)
