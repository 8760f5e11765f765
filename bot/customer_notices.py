"""The customer-notice loop (SPEC 14.4, 14.6): queued `customer_notices` delivered to their customers' chats.

Every INTERVAL_S a tick sends up to BATCH pending notices, oldest first, of
every kind that has a text `notice_<kind>` in bot/texts.py (in the
customer's language). Whoever writes a notice — the worker's record
transaction (`access_ready`), the renewal pass (`dunning`), the lifecycle
producers — needs nothing here but that text. The payload's ids are turned
into words at delivery: `planId` → the plan's name, `periodEnd` → the end,
`amountMinor` + `currency` → the price (`balanceMinor` → the balance),
`entitlementId` → its plan and end,
and a text with a `{link}` gets the subscription's link read from the panel
(never stored in the notice: SPEC 13.13) and is sent as a QR code image
(sendPhoto) with the text as its caption — one message, so one acceptance.
A text with a `{code}` (a bought gift card's, `gift_code`) gets the notice's
sealed `secret`, which is erased in the transaction that marks the notice
sent or failed: the code is shown once and then kept nowhere (migration 0025).

An `access_ready` notice of a paid order carries five buttons to rate the
shop (bot/shop_reviews.py); the transaction that marks it sent writes the
review prompt.

A notice is marked `sent` in its own transaction only after Telegram
accepted it, and only from `pending`, so a success is never sent again; a
crash between the acceptance and the mark sends that one notice a second
time, nothing else can. Otherwise:

- 403 (the customer blocked the bot): `failed`, `forbidden` — not retried;
  the customer is marked unreachable (campaigns leave them out until they
  write to the bot again);
- another 4xx: `failed`, `rejected` (the message will never be taken);
- a kind without a text, or a customer without a chat: `failed`
  (`unknown_kind`, `no_chat`, `no_subscription`, `no_code`), logged as an error: visible, not silent;
- a secret this process cannot unseal (APP_DATA_ENCRYPTION_KEY missing or
  without the key that sealed it): the notice waits, logged once, so fixing
  the configuration still delivers the code;
- 429: the tick stops and the loop waits Telegram's `retry_after`;
- 5xx, timeouts: the tick stops, the next one retries;
- the panel not answering for a link: that notice waits for a later tick,
  and so does every other link notice of this tick, without asking the
  panel again (one timeout per tick, not one per notice). A tick looks past
  the notices that wait, up to SCAN of them, so a dunning or expiry notice
  queued behind a pile of waiting access notices still goes out.
"""

import datetime
import json
import logging

from bot import keyboards, qr, services, shop_reviews, texts
from commerce import customers
from integrations import telegram
from models.base import db, utcnow
from models.commerce import Customer, Plan, Subscription
from models.fulfillment import Entitlement
from models.ops import CustomerNotice
from ops import sealing

logger = logging.getLogger("omniflow.bot.customer_notices")

INTERVAL_S = 1  # "your access is ready" within seconds of the worker's success
BATCH = 50  # deliveries tried per tick
SCAN = 10 * BATCH  # pending notices a tick reads, so those that wait hold up no other
DATE_FORMAT = "%Y-%m-%d %H:%M"
MAX_CAPTION_LENGTH = 1024
MAX_MESSAGE_LENGTH = 4096

FORBIDDEN = "forbidden"
REJECTED = "rejected"
UNKNOWN_KIND = "unknown_kind"
NO_CHAT = "no_chat"
NO_SUBSCRIPTION = "no_subscription"
NO_CODE = "no_code"  # a gift code notice without its code (it could not be sealed when the card was bought)


class Undeliverable(Exception):
    def __init__(self, code):
        super().__init__(code)
        self.code = code


def text_key(kind):
    return f"notice_{kind}"


def has_text(kind):
    return text_key(kind) in texts.CATALOG[texts.DEFAULT_LANGUAGE]


class CustomerNoticeLoop:
    def __init__(self, bot, stop, interval_s=INTERVAL_S):
        self.bot = bot
        self.stop = stop
        self.interval_s = interval_s
        self._waiting = set()  # notices whose wait for the panel was logged

    def run(self):
        """The loop's thread: a tick, then the interval (or a 429's retry_after, if longer), until stopped."""
        logger.info("customer notices started", extra={"task": "customer_notices"})
        while not self.stop.is_set():
            wait = self.interval_s
            try:
                wait = max(wait, self.tick())
            except Exception:
                logger.exception("customer notice tick failed", extra={"task": "customer_notices"})
            finally:
                db.close()
            self.stop.wait(wait)

    def tick(self):
        """One bounded pass; returns how long Telegram asked us to wait (0 when it did not)."""
        pending = list(
            CustomerNotice.select().where(CustomerNotice.status == "pending").order_by(CustomerNotice.id).limit(SCAN)
        )
        tried, panel_down = 0, False
        for notice in pending:
            if self.stop.is_set() or tried >= BATCH:
                return 0
            try:
                message = render(notice, panel_down)
            except Undeliverable as undeliverable:
                self._mark(notice, "failed", undeliverable.code)
                logger.error(
                    "customer notice cannot be delivered; marked failed",
                    extra={"task": notice.kind, "error": undeliverable.code},
                )
                continue
            except services.PanelUnavailable as unavailable:
                panel_down = panel_down or unavailable.unanswered
                if notice.id not in self._waiting:  # once per notice, not once a second
                    self._waiting.add(notice.id)
                    logger.warning(
                        "customer notice waits for the panel", extra={"task": notice.kind, "error": str(unavailable)}
                    )
                continue
            except (sealing.UnsealError, sealing.SealingUnavailable) as unsealable:
                if notice.id not in self._waiting:
                    self._waiting.add(notice.id)
                    logger.error(  # names the column and row, never the value
                        "customer notice waits for its data key", extra={"task": notice.kind, "error": str(unsealable)}
                    )
                continue
            self._waiting.discard(notice.id)
            tried += 1
            try:
                message.send(self.bot)
            except telegram.TelegramFailure as failure:
                if failure.code in (telegram.FORBIDDEN, telegram.REJECTED):
                    code = FORBIDDEN if failure.code == telegram.FORBIDDEN else REJECTED
                    self._mark(notice, "failed", code)
                    if code == FORBIDDEN:
                        customers.mark_unreachable(notice.customer_id)
                    logger.info(
                        "customer notice refused by Telegram; marked failed",
                        extra={"task": notice.kind, "error": code},
                    )
                    continue
                logger.warning(
                    "customer notices not delivered; retrying next tick",
                    extra={"task": failure.method, "error": failure.code},
                )
                return failure.retry_after or 0
            self._mark(notice, "sent", message=message)
        return 0

    def _mark(self, notice, status, failure_code=None, message=None):
        """The notice's outcome; a sent message that asked for a rating records its prompt in the same transaction."""
        now = utcnow()
        with db.atomic():
            marked = (
                CustomerNotice.update(
                    status=status, sent_at=now if status == "sent" else None, failure_code=failure_code, secret=None
                )
                .where(CustomerNotice.id == notice.id, CustomerNotice.status == "pending")
                .execute()
            )
            if marked and message is not None and message.rating_order is not None:
                shop_reviews.record_prompt(message.chat_id, notice.customer_id, message.rating_order, now)


class Message:
    """What one notice becomes: a text, or (with a link) a QR code image captioned with the text."""

    def __init__(self, chat_id, text, link=None):
        self.chat_id = chat_id
        self.text = text
        self.link = link
        self.rating_order = None  # an order the message asks the customer to rate the shop for (bot/shop_reviews.py)

    def send(self, bot):
        markup = None if self.rating_order is None else keyboards.shop_rating(self.rating_order)
        if self.link is None:
            telegram.call(
                "sendMessage", bot.send_message, self.chat_id, self.text[:MAX_MESSAGE_LENGTH], reply_markup=markup
            )
        else:
            telegram.call(
                "sendPhoto", bot.send_photo, self.chat_id, qr.png(self.link), caption=self.text[:MAX_CAPTION_LENGTH],
                reply_markup=markup,
            )  # fmt: skip


def render(notice, panel_down=False):
    """The Message for a notice; Undeliverable or services.PanelUnavailable when it cannot be made now
    (at once, without asking, for a link while `panel_down`)."""
    if not has_text(notice.kind):
        raise Undeliverable(UNKNOWN_KIND)
    customer = Customer.get_or_none(Customer.id == notice.customer_id)
    if customer is None or customer.telegram_id is None:
        raise Undeliverable(NO_CHAT)
    payload = _payload(notice)
    language = texts.language_of(customer.language_code)
    template = texts.CATALOG.get(language, {}).get(text_key(notice.kind)) or texts.CATALOG["en"][text_key(notice.kind)]
    values = _values(payload)
    link = None
    if "{link}" in template:
        if panel_down:
            raise services.PanelUnavailable("the panel did not answer earlier in this tick")
        link = _link(payload)
        values["link"] = link
    if "{code}" in template:
        if notice.secret is None:
            raise Undeliverable(NO_CODE)
        values["code"] = notice.secret
    message = Message(customer.telegram_id, texts.text(language, text_key(notice.kind), **values), link)
    message.rating_order = shop_reviews.order_to_rate(notice.kind, payload)
    return message


def _payload(notice):
    try:
        payload = json.loads(notice.payload or "{}")
    except ValueError:
        return {}
    return payload if isinstance(payload, dict) else {}


def _values(payload):
    """Words for a payload's ids and amounts (every field is also there as it is)."""
    values = dict(payload)
    entitlement = None
    if isinstance(payload.get("entitlementId"), int):
        entitlement = Entitlement.get_or_none(Entitlement.id == payload["entitlementId"])
    plan_id = payload.get("planId") if entitlement is None else entitlement.plan_id
    if isinstance(plan_id, int):
        plan = Plan.get_or_none(Plan.id == plan_id)
        if plan is not None:
            values["plan"] = plan.name
    if entitlement is not None:
        values["ends"] = entitlement.ends_at.strftime(DATE_FORMAT)
    elif isinstance(payload.get("periodEnd"), str):
        values["ends"] = _when(payload["periodEnd"])
    if isinstance(payload.get("amountMinor"), int) and isinstance(payload.get("currency"), str):
        values["price"] = texts.money(payload["amountMinor"], payload["currency"])
        if isinstance(payload.get("balanceMinor"), int):
            values["balance"] = texts.money(payload["balanceMinor"], payload["currency"])
    return values


def _when(iso):
    try:
        return datetime.datetime.fromisoformat(iso.rstrip("Z")).strftime(DATE_FORMAT)
    except ValueError:
        return iso


def _link(payload):
    subscription = None
    if isinstance(payload.get("subscriptionId"), (int, str)):
        subscription = Subscription.get_or_none(Subscription.id == str(payload["subscriptionId"]))
    if subscription is None:
        raise Undeliverable(NO_SUBSCRIPTION)
    remote = services.remote_user(subscription.remote_user_id)
    if remote is None:
        raise services.PanelUnavailable("remote_user_not_found", unanswered=False)
    return remote.subscription_url
