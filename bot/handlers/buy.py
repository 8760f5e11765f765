"""Buy (SPEC 14.4, 14.5, 13.12): plan → way of paying → Stars invoice, wallet payment, or a provider's payment page.

- Buy lists the plans on sale with their catalogue prices per currency;
  a plan lists the ways it can be paid: Telegram Stars (its XTR price),
  the wallet (in each currency the customer holds a balance in, else the
  plan's first one), YooKassa and CryptoBot when the shop offers them.
- Stars: the order is made in the update's transaction and the invoice
  (`sendInvoice` in XTR) is sent after the commit. `pre_checkout_query` is
  answered ok only for the customer's own order while it is pending, at its
  price, with maintenance off (commerce/stars.py); `successful_payment`
  settles in the update's transaction, keyed by its charge id, so the same
  payment delivered again never pays twice.
- Wallet: the order is made and paid from the balance in the update's
  transaction; a balance that cannot cover it refuses, nothing written.
- The receipt of a Stars or wallet payment is a customer notice the
  settlement writes in that transaction, delivered by the customer-notice
  loop (bot/customer_notices.py): an answer sent after the commit would be
  lost to a crash in between.
- YooKassa, CryptoBot: the order is made in the update's transaction (its
  idempotency key names the update); the payment at the provider is created
  after the commit, outside any transaction (commerce.checkout with the same
  key finds the order), and its page is a link button. The provider's
  webhook or the poll settles the order.

Every purchase is refused with a plain message while maintenance is on, and
for a blocked customer (bot/updates.py refuses their updates), and — with
APP_TELEGRAM_REQUIRED_CHANNEL set — for someone not in that channel
(bot/membership.py). A plan's screen also offers it as a gift card ("Buy as a gift"): the same
ways of paying, a `gift` order instead of a purchase; once paid, the buyer
gets no access but the card's code, delivered by the customer-notice loop
(`gift_code`, commerce/gift_purchase.py) right after the payment's answer.

A plan the customer holds already (a subscription of it that has not
ended) is first offered as "Extend my subscription" — an `extension` order
of that subscription (SPEC 13.2), whose settlement continues its period on
the same panel user and link with one fulfillment change — or "New
subscription", a purchase with a link of its own. Buying the same plan again
never makes a second subscription unless that is what was pressed.

A personal offer (commerce/offers.py) is named on a plan's screen, and the
customer's best usable one prices the order a pay button makes (the
settlement marks it used).

A plan's screen opens a checkout session
(`bot_checkout_sessions`, 30 minutes): a cart that names its order once a
pay button made one, or expires and is swept when the customer walks away.
"""

import json
import logging

from bot import keyboards, membership, services, texts
from bot.handlers.fallback import on_unmatched_payment
from bot.handlers.subscriptions import DATE_FORMAT
from bot.updates import Answer, Refused
from commerce import catalogue, ledger, offers, phase
from commerce import providers as methods
from commerce.checkout import MAINTENANCE_ACTIVE, CheckoutRejected, checkout
from commerce.orders import OrderRejected, create_order
from commerce.payments import REPLAYED, SETTLED
from commerce.stars import (
    AMOUNT_MISMATCH,
    CURRENCY_MISMATCH,
    ORDER_NOT_PENDING,
    StarsRejected,
    order_of,
    precheck_stars,
    settle_stars_payment,
)
from commerce.stars import CURRENCY as STARS_CURRENCY
from models.base import utcnow
from models.bot import CHECKOUT_SESSION_TTL, BotCheckoutSession
from models.commerce import Order, Subscription
from ops import maintenance, sealing

logger = logging.getLogger("omniflow.bot.buy")

PREFERRED_CURRENCY = {methods.YOOKASSA: "RUB", methods.CRYPTOBOT: "USD"}
PRECHECK_TEXTS = (ORDER_NOT_PENDING, AMOUNT_MISMATCH, CURRENCY_MISMATCH, MAINTENANCE_ACTIVE)  # a reason of its own each
HELD_PHASES = (phase.PROVISIONING, phase.ACTIVE, phase.EXPIRING, phase.GRACE, phase.PAUSED)


def refuse_plainly(context, query, key, markup=None, **values):
    """A purchase refused with a message in the chat (not only a button's alert), nothing written."""
    return Refused(
        Answer("callback", query.id),
        Answer("send", query.message.chat.id, context.text(key, **values), markup),
    )


def _plan_offers(context):
    offers = []
    for plan in catalogue.active_plans():
        prices = catalogue.plan_prices(plan)
        if not prices:
            continue
        shown = " · ".join(texts.money(amount, currency) for currency, amount in sorted(prices.items()))
        duration = texts.duration(context.language, plan.duration_days)
        offers.append((plan.id, context.text("plan_button", plan=plan.name, duration=duration, prices=shown)))
    return offers


def on_buy(query, context):
    if maintenance.is_active():
        raise refuse_plainly(context, query, "maintenance")
    chat, message_id = query.message.chat.id, query.message.message_id
    offers = _plan_offers(context)
    text = context.text("plans_header" if offers else "plans_none")
    context.edit(chat, message_id, text, keyboards.plans(context.language, offers))
    context.answer_callback(query.id)


def payment_choices(context, plan):
    """[(method, currency, label)] for a plan: what it is priced in and the shop offers."""
    return priced_choices(context, catalogue.plan_prices(plan))


def priced_choices(context, prices, hosted=methods.HOSTED):
    """[(method, currency, label)] for prices ({currency: amount}): Stars, the wallet, and the `hosted`
    providers the shop offers."""
    offered = services.current().providers
    choices = []
    if STARS_CURRENCY in prices:
        choices.append(
            (methods.STARS, STARS_CURRENCY, context.text("method_stars", price=texts.money(prices["XTR"], "XTR")))
        )
    fiat = [currency for currency in sorted(prices) if currency != STARS_CURRENCY]
    held = {currency: ledger.balance(context.customer.id, currency) for currency in fiat}
    for currency in [currency for currency in fiat if held[currency] > 0] or fiat[:1]:
        label = context.text(
            "method_wallet",
            price=texts.money(prices[currency], currency),
            balance=texts.money(held[currency], currency),
        )
        choices.append((methods.WALLET, currency, label))
    for method in hosted:
        if not methods.offered(offered, method):
            continue
        accepted = [currency for currency in fiat if methods.accepts(method, currency)]
        if not accepted:
            continue
        currency = PREFERRED_CURRENCY[method] if PREFERRED_CURRENCY[method] in accepted else accepted[0]
        label = context.text(f"method_{method}", price=texts.money(prices[currency], currency))
        choices.append((method, currency, label))
    return choices


def _purchasable(context, query, plan_id):
    try:
        plan = catalogue.purchasable_plan(plan_id)
    except catalogue.CatalogueError:
        raise refuse_plainly(context, query, "purchase_refused") from None
    if plan.trial:
        raise refuse_plainly(context, query, "purchase_refused")
    return plan


def held(customer, plan):
    """[(slot, current entitlement)] of the customer's subscriptions of `plan` that give access now or
    are about to (not expired or failed), by slot: what an extension of the plan can go onto."""
    subscriptions = list(
        Subscription.select(Subscription.id, Subscription.slot)
        .where(Subscription.customer == customer.id)
        .order_by(Subscription.slot)
    )
    standing = phase.standings([subscription.id for subscription in subscriptions])
    return [
        (subscription.slot, standing[subscription.id].entitlement)
        for subscription in subscriptions
        if standing[subscription.id].phase in HELD_PHASES and standing[subscription.id].entitlement.plan_id == plan.id
    ]


def on_plan(query, context, plan_id):
    """A plan's ways to pay; for a plan the customer holds already, first the choice between extending
    what they have (the same link, a longer period) and a second subscription with a link of its own."""
    if maintenance.is_active():
        raise refuse_plainly(context, query, "maintenance")
    plan = _purchasable(context, query, plan_id)
    holding = held(context.customer, plan)
    if not holding:
        show_methods(query, context, plan)
        return
    duration = texts.duration(context.language, plan.duration_days)
    labels = [
        (slot, context.text("button_extend_until", ends=entitlement.ends_at.strftime(DATE_FORMAT)))
        if len(holding) > 1
        else (slot, context.text("button_extend"))
        for slot, entitlement in holding
    ]
    text = context.text("extend_or_new", plan=plan.name, duration=duration)
    chat, message_id = query.message.chat.id, query.message.message_id
    context.edit(chat, message_id, text, keyboards.extend_or_new(context.language, plan.id, labels))
    context.answer_callback(query.id)


def on_new(query, context, plan_id):
    if maintenance.is_active():
        raise refuse_plainly(context, query, "maintenance")
    show_methods(query, context, _purchasable(context, query, plan_id))


def on_extend(query, context, plan_id, slot):
    if maintenance.is_active():
        raise refuse_plainly(context, query, "maintenance")
    plan = _purchasable(context, query, plan_id)
    show_methods(query, context, plan, (slot, _extended(context, query, plan, slot)))


def _extended(context, query, plan, slot):
    """The current entitlement of the presser's subscription in `slot`, which must hold `plan`; refused
    plainly otherwise (it ended, or the button was not the bot's)."""
    for held_slot, entitlement in held(context.customer, plan):
        if held_slot == slot:
            return entitlement
    raise refuse_plainly(context, query, "purchase_refused")


def show_methods(query, context, plan, extending=None):
    """The ways to pay for a plan: a new subscription of it, or with `extending` = (slot, current
    entitlement) the extension of the presser's subscription in that slot."""
    choices = payment_choices(context, plan)
    header, values, slot = "methods_header", {}, None
    if extending is not None:
        slot, entitlement = extending
        header = "extend_methods_header"
        values = {"duration": texts.duration(context.language, plan.duration_days),
                  "ends": entitlement.ends_at.strftime(DATE_FORMAT)}  # fmt: skip
    text = context.text(header if choices else "methods_none", plan=plan.name, **values)
    if choices:
        text += _offer_note(context, plan)
    chat, message_id = query.message.chat.id, query.message.message_id
    if choices:
        _open_cart(context, chat, plan)
    shown = keyboards.payment_methods(context.language, plan.id, choices, gift_offered=sealing.available(), slot=slot)
    context.edit(chat, message_id, text, shown)
    context.answer_callback(query.id)


def _offer_note(context, plan):
    """A line naming the customer's personal offer for this plan (the first to expire), or nothing."""
    for offer in offers.usable(context.customer.id):
        if offer.plan_id in (None, plan.id):
            off = (
                f"{offer.discount_percent}%"
                if offer.discount_percent
                else texts.money(offer.discount_minor, offer.currency)
            )
            return "\n" + context.text("offer_note", discount=off, ends=offer.expires_at.strftime(DATE_FORMAT))
    return ""


def on_gift(query, context, plan_id):
    """A plan's ways of paying for a gift card of it. A bought card's code reaches its buyer sealed
    (APP_DATA_ENCRYPTION_KEY): without the key here nothing is sold that could not be delivered."""
    if maintenance.is_active():
        raise refuse_plainly(context, query, "maintenance")
    if not sealing.available():
        raise refuse_plainly(context, query, "gift_unavailable")
    plan = _purchasable(context, query, plan_id)
    choices = payment_choices(context, plan)
    text = context.text("gift_methods_header" if choices else "methods_none", plan=plan.name)
    chat, message_id = query.message.chat.id, query.message.message_id
    context.edit(chat, message_id, text, keyboards.payment_methods(context.language, plan.id, choices, gift=True))
    context.answer_callback(query.id)


def on_pay(query, context, plan_id, method, currency, kind="purchase", slot=None):
    """Pay for a plan: a new subscription (`purchase`), a gift card, or an `extension` of the presser's
    subscription in `slot` (its next period, on the same link)."""
    if maintenance.is_active():
        raise refuse_plainly(context, query, "maintenance")
    if kind == "gift" and not sealing.available():
        raise refuse_plainly(context, query, "gift_unavailable")
    plan = _purchasable(context, query, plan_id)
    subscription_id = None if slot is None else _extended(context, query, plan, slot).subscription_id
    chat = query.message.chat.id
    key = f"bot:{context.update_id}"
    shop = services.current()
    offer = offers.best_for(context.customer.id, kind, plan, currency)
    offer_id = None if offer is None else offer.id
    if method in methods.HOSTED:
        order = _hosted_order(context, query, plan, method, currency, shop, key, kind, subscription_id, offer_id)
        _close_cart(context, chat, plan, method, currency, order.id)
        context.answer_callback(query.id)
        context.later(
            lambda: payment_page(
                context, chat, kind, method, currency, key, shop, plan=plan, subscription_id=subscription_id
            )
        )
        return
    try:
        made = checkout(
            shop.providers, shop.public_url, context.customer.id, kind, method, currency, plan_id=plan.id,
            subscription_id=subscription_id, offer_id=offer_id, key=key,
        )  # fmt: skip
    except CheckoutRejected as rejected:
        raise refusal_for(context, query, rejected.code) from None
    _close_cart(context, chat, plan, method, currency, made.order_id)
    context.answer_callback(query.id)
    if method == methods.STARS:
        price = texts.money(made.amount_minor, made.currency)
        context.send(chat, context.text("invoice_sent", plan=plan.name, price=price))
        context.send_invoice(chat, made.invoice)
    # Paid from the wallet: the receipt is the settlement's customer notice (commerce/settlement.py).


def refusal_for(context, query, code):
    if code == MAINTENANCE_ACTIVE:
        return refuse_plainly(context, query, "maintenance")
    if code == ledger.INSUFFICIENT_FUNDS:
        # Where to go from here: the wallet to top it up, or back to the menu.
        return refuse_plainly(context, query, "insufficient_funds", keyboards.to_wallet(context.language))
    logger.info("a purchase was refused", extra={"error": code})
    return refuse_plainly(context, query, "purchase_refused")


def _hosted_order(context, query, plan, method, currency, shop, key, kind, subscription_id=None, offer_id=None):
    """The pending order a provider's payment will pay, checked as checkout checks it."""
    if not methods.offered(shop.providers, method) or not methods.accepts(method, currency):
        raise refuse_plainly(context, query, "purchase_refused")
    try:
        return create_order(
            context.customer.id, kind, currency, plan_id=plan.id, subscription_id=subscription_id, provider=method,
            offer_id=offer_id, key=key,
        )  # fmt: skip
    except OrderRejected as rejected:
        raise refusal_for(context, query, rejected.code) from None


def _open_cart(context, chat, plan):
    """The checkout session a plan's screen opens: a cart with the plan and no order yet. One the
    customer walks away from expires in 30 minutes and retention sweeps it (SPEC 7, 14.7)."""
    now = utcnow()
    BotCheckoutSession.create(
        chat_id=chat,
        customer=context.customer.id,
        state=json.dumps({"planId": plan.id}, sort_keys=True),
        created_at=now,
        expires_at=now + CHECKOUT_SESSION_TTL,
    )


def _close_cart(context, chat, plan, method, currency, order_id):
    """The cart becomes its order: the chat's newest open cart for this plan names it (a pay
    button pressed without one, e.g. from an older screen, gets a session of its own)."""
    now = utcnow()
    state = json.dumps({"planId": plan.id, "method": method, "currency": currency}, sort_keys=True)
    open_carts = BotCheckoutSession.select(BotCheckoutSession.id, BotCheckoutSession.state).where(
        BotCheckoutSession.chat_id == chat,
        BotCheckoutSession.customer == context.customer.id,
        BotCheckoutSession.order.is_null(),
        BotCheckoutSession.expires_at > now,
    )
    for cart in open_carts.order_by(BotCheckoutSession.id.desc()):
        if json.loads(cart.state or "{}").get("planId") == plan.id:
            BotCheckoutSession.update(state=state, order=order_id).where(BotCheckoutSession.id == cart.id).execute()
            return
    BotCheckoutSession.create(
        chat_id=chat,
        customer=context.customer.id,
        state=state,
        created_at=now,
        expires_at=now + CHECKOUT_SESSION_TTL,
        order=order_id,
    )


def payment_page(context, chat, kind, method, currency, key, shop, plan=None, amount_minor=None, subscription_id=None):
    """After the commit: the payment at the provider for the order the update made (a purchase of
    `plan` or its extension of `subscription_id`, or a top-up of `amount_minor`; checkout finds it
    again by its key) and its link."""
    try:
        made = checkout(
            shop.providers, shop.public_url, context.customer.id, kind, method, currency,
            plan_id=None if plan is None else plan.id, subscription_id=subscription_id, amount_minor=amount_minor,
            key=key,
        )  # fmt: skip
    except CheckoutRejected as rejected:
        logger.warning("a payment page could not be made", extra={"error": rejected.code})
        key_text = "maintenance" if rejected.code == MAINTENANCE_ACTIVE else "payment_unavailable"
        return [Answer("send", chat, context.text(key_text))]
    price = texts.money(made.amount_minor, made.currency)
    if plan is None:
        text = context.text("topup_by_link", order=made.order_id, amount=price)
    else:
        text = context.text("pay_by_link", order=made.order_id, plan=plan.name, price=price)
    return [Answer("send", chat, text, keyboards.payment_link(context.language, made.confirmation_url))]


# --- Stars: the pre-checkout question and the payment -----------------------------------------


def on_pre_checkout(query, context):
    order_id = order_of(query.invoice_payload)
    order = None if order_id is None else Order.get_or_none(Order.id == order_id)
    if order is None or context.customer is None or order.customer_id != context.customer.id:
        raise context.refusal("checkout_refused")
    check = precheck_stars(order_id, query.total_amount, query.currency)
    if not check.ok:
        key = f"precheck_{check.code}" if check.code in PRECHECK_TEXTS else "checkout_refused"
        raise context.refusal(key, currency=query.currency)
    context.answer_pre_checkout(query.id, True)


def is_order_payment(message):
    return order_of(message.successful_payment.invoice_payload) is not None


def on_successful_payment(message, context):
    payment = message.successful_payment
    try:
        applied = settle_stars_payment(
            order_of(payment.invoice_payload),
            payment.telegram_payment_charge_id,
            payment.total_amount,
            payment.currency,
        )
    except StarsRejected:
        on_unmatched_payment(message, context)
        return
    # Settled: the receipt is the settlement's customer notice, written with it (commerce/settlement.py).
    if applied.outcome not in (SETTLED, REPLAYED):
        # The money arrived but paid nothing (an amount or order that did not match):
        # apply_payment queued the operator notice that gets it refunded or settled by hand.
        context.send(message.chat.id, context.text("payment_unmatched"))


def require_member(context, query):
    """Refused plainly, nothing written, unless the presser is in the required channel (when one is set)."""
    checked = membership.current()
    if not checked.allowed(query.from_user.id, context.customer, context.prepared.get(membership.PREPARED)):
        if checked.channel.startswith("@"):
            raise refuse_plainly(context, query, "channel_required", channel=checked.channel)
        raise refuse_plainly(context, query, "channel_required_unnamed")


def on_press(query, context, press):
    """A press of one of this flow's buttons (bot/handlers/menu.py routes it here)."""
    require_member(context, query)
    if press.action == keyboards.BUY:
        on_buy(query, context)
    elif press.action == keyboards.PLAN:
        on_plan(query, context, int(press.argument))
    elif press.action == keyboards.PAY:
        plan_id, method, currency = press.argument.split(":")
        on_pay(query, context, int(plan_id), method, currency)
    elif press.action == keyboards.GIFT:
        on_gift(query, context, int(press.argument))
    elif press.action == keyboards.GIFT_PAY:
        plan_id, method, currency = press.argument.split(":")
        on_pay(query, context, int(plan_id), method, currency, kind="gift")
    elif press.action == keyboards.NEW:
        on_new(query, context, int(press.argument))
    elif press.action == keyboards.EXTEND:
        plan_id, slot = press.argument.split(":")
        on_extend(query, context, int(plan_id), int(slot))
    elif press.action == keyboards.EXTEND_PAY:
        plan_id, slot, method, currency = press.argument.split(":")
        on_pay(query, context, int(plan_id), method, currency, kind="extension", slot=int(slot))


def register(bot, context):
    bot.pre_checkout_query_handler(func=lambda query: True)(lambda query: on_pre_checkout(query, context()))
    bot.message_handler(content_types=["successful_payment"], func=is_order_payment)(
        lambda message: on_successful_payment(message, context())
    )
