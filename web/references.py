"""The records a key names, as links on the panel's pages (SPEC 13.14).

Idempotency keys and correlation ids name what an operation belongs to
(SPEC 2.24): `order:5`, `order:5:fulfill`, `refund:5:disable`, `gift:5:…`
and `code:5:…` name order 5; `panel:<subscription>:<operation>:<request>`
names a subscription. `linked()` turns that part into a link to the record's
page and escapes everything else, so a key is never markup.
"""

import re
from urllib.parse import quote

from bottle import html_escape

from models.fulfillment import OPERATIONS

_ORDER = re.compile(r"(order|refund|gift|code):([0-9]{1,18})(?=:|$)")
_SUBSCRIPTION = re.compile(rf"panel:([^:]{{1,64}})(?=:(?:{'|'.join(OPERATIONS)}):)")


def customer_page(customer_id):
    return f"/panel/customers/{quote(str(customer_id), safe='')}"


def subscription_page(subscription_id):
    return f"/panel/subscriptions/{quote(str(subscription_id), safe='')}"


def subscription_action(subscription, action):
    """The panel API's route for a change of one subscription (pause, resume)."""
    customer, subscription_id = (quote(str(v), safe="") for v in (subscription.customer_id, subscription.id))
    return f"/v1/panel/customers/{customer}/subscriptions/{subscription_id}/{action}"


def order_page(order_id):
    return f"/panel/orders/{int(order_id)}"


def payment_page(payment_id):
    return f"/panel/payments/{int(payment_id)}"


def operation_page(operation_id):
    return f"/panel/system/operations/{int(operation_id)}"


def campaign_page(campaign_id):
    return f"/panel/campaigns/{int(campaign_id)}"


def ticket_page(ticket_id):
    return f"/panel/support/tickets/{int(ticket_id)}"


def linked(key):
    """Safe HTML: the key, escaped, with the order or subscription it names as a link."""
    text = key or ""
    order = _ORDER.match(text)
    if order:
        return _link(order_page(order.group(2)), order.group(0)) + html_escape(text[order.end() :])
    subscription = _SUBSCRIPTION.match(text)
    if subscription:
        return _link(subscription_page(subscription.group(1)), subscription.group(0)) + html_escape(
            text[subscription.end() :]
        )
    return html_escape(text)


def _link(href, label):
    return f'<a href="{html_escape(href)}">{html_escape(label)}</a>'
