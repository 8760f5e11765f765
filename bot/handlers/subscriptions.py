"""My subscriptions (SPEC 14.4, 13.13): each subscription's phase, end and traffic used, its link, a QR code button.

The phase is computed when read (commerce/phase.py), in the update's
transaction. What only the panel knows — the link and the traffic used —
is read after the commit (Context.later), so no panel call holds the
transaction open; a panel that does not answer leaves those out, with a
word saying so. The link goes to its own customer only: a QR press names a
subscription, and one that is not the presser's is refused like a forged
button.
"""

import logging
from typing import NamedTuple

from bot import keyboards, qr, services, texts
from bot.updates import Answer
from commerce import customers
from commerce.phase import EXPIRED, standings
from models.commerce import Plan, Subscription

logger = logging.getLogger("omniflow.bot.subscriptions")

DATE_FORMAT = "%Y-%m-%d %H:%M"
UNITS = {"en": ("B", "KiB", "MiB", "GiB", "TiB"), "ru": ("Б", "КиБ", "МиБ", "ГиБ", "ТиБ")}


def traffic_text(used_bytes, language="en"):
    units = UNITS.get(language, UNITS["en"])
    value, unit = float(used_bytes), 0
    while value >= 1024 and unit < len(units) - 1:
        value, unit = value / 1024, unit + 1
    return f"{int(value)} {units[unit]}" if unit == 0 else f"{value:.1f} {units[unit]}"


class Shown(NamedTuple):
    """One subscription as My subscriptions shows it."""

    subscription_id: str
    remote_user_id: str
    plan: str
    phase: str
    ends_at: object
    auto_renew: bool


def rows_of(customer):
    """[Shown] of a customer's subscriptions that have a period, by slot."""
    subscriptions = list(
        Subscription.select(Subscription.id, Subscription.remote_user_id, Subscription.auto_renew)
        .where(Subscription.customer == customer.id)
        .order_by(Subscription.slot)
    )
    standing = standings([subscription.id for subscription in subscriptions])
    plans = {}
    rows = []
    for subscription in subscriptions:
        entitlement = standing[subscription.id].entitlement
        if entitlement is None:
            continue
        if entitlement.plan_id not in plans:
            plans[entitlement.plan_id] = Plan.get_by_id(entitlement.plan_id).name
        rows.append(
            Shown(
                subscription.id,
                subscription.remote_user_id,
                plans[entitlement.plan_id],
                standing[subscription.id].phase,
                entitlement.ends_at,
                subscription.auto_renew,
            )
        )
    return rows


def on_subscriptions(query, context):
    chat, message_id = query.message.chat.id, query.message.message_id
    rows = rows_of(context.customer)
    context.answer_callback(query.id)
    if not rows:
        context.edit(chat, message_id, context.text("subscriptions_none"), keyboards.back(context.language))
        return
    context.later(lambda: [_shown(context, chat, message_id, rows)])


def _shown(context, chat, message_id, rows, said=None):
    lines, with_links = [context.text("subscriptions_header")], []
    if said:
        lines.insert(0, said + "\n")
    unavailable = False
    switches = [(number, row.subscription_id, row.auto_renew) for number, row in enumerate(rows, 1)]
    for number, (subscription_id, remote_user_id, plan, phase, ends_at, _) in enumerate(rows, 1):
        remote = None
        if remote_user_id:
            try:
                remote = services.remote_user(remote_user_id)
            except services.PanelUnavailable:
                unavailable = True
        lines.append(
            context.text(
                "subscription_detail",
                number=number,
                plan=plan,
                phase=phase_text(context.language, phase),
                ends=ends_at.strftime(DATE_FORMAT),
                traffic="?" if remote is None else traffic_text(remote.used_traffic_bytes, context.language),
            )
        )
        if remote is not None and phase != EXPIRED:  # an expired or refunded one's link gives no access
            lines.append(context.text("subscription_link", link=remote.subscription_url))
            with_links.append((number, subscription_id))
    if unavailable:
        lines.append(context.text("link_unavailable"))
    shown = keyboards.subscriptions(context.language, with_links, switches)
    return Answer("edit", (chat, message_id), "\n".join(lines), shown)


def on_auto_renew(query, context, argument):
    """Auto-renew on or off for one of the presser's own subscriptions (another's is refused like
    a forged button); the renewal pass (commerce/passes/renewal.py) reads the switch."""
    subscription_id, _, state = argument.partition(":")
    if not customers.set_auto_renew(context.customer, subscription_id, state == "on"):
        raise context.refusal("callback_refused")
    chat, message_id = query.message.chat.id, query.message.message_id
    rows = rows_of(context.customer)
    plan = next((row.plan for row in rows if row.subscription_id == subscription_id), "")
    said = context.text("auto_renew_on" if state == "on" else "auto_renew_off", plan=plan)
    context.answer_callback(query.id)
    context.later(lambda: [_shown(context, chat, message_id, rows, said)])


def phase_text(language, phase):
    key = f"phase_{phase}"
    return texts.text(language, key) if key in texts.CATALOG[texts.DEFAULT_LANGUAGE] else phase


def on_qr(query, context, subscription_id):
    subscription = Subscription.get_or_none(
        Subscription.id == subscription_id, Subscription.customer == context.customer.id
    )
    if subscription is None or not subscription.remote_user_id:
        raise context.refusal("callback_refused")
    chat, remote_user_id = query.message.chat.id, subscription.remote_user_id
    context.answer_callback(query.id)
    context.later(lambda: [_qr_code(context, chat, remote_user_id)])


def _qr_code(context, chat, remote_user_id):
    try:
        remote = services.remote_user(remote_user_id)
    except services.PanelUnavailable as unavailable:
        logger.warning("a subscription link could not be read", extra={"error": str(unavailable)})
        remote = None
    if remote is None:
        return Answer("send", chat, context.text("link_unavailable"))
    link = remote.subscription_url
    return Answer("photo", chat, context.text("qr_caption", link=link), payload=qr.png(link))
