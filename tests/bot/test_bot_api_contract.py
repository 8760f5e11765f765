"""Issue 19: every Bot API request the bot sends, and every answer and update the fake Bot API sends back,
is checked against Telegram's own types as aiogram publishes them (tests/support/botapi.py).

One run (module scope) drives the bot through its flows against the fake, which records every exchange:
/start in two languages, the language menu, Buy with Stars (invoice, pre-checkout, payment, a refused
pre-checkout, the refund), the wallet, YooKassa and CryptoBot, a gift, an extension, My subscriptions and
its QR code and auto-renew switch, the wallet's top-ups, a gift card, an access code and the trial, support
with a text and a photo and the operator's reply pushed back, a campaign and an announcement, the
customer notices (access ready with its QR code, receipts, lifecycle, dunning) and the operator notifier
in forum topics, the channel-membership check and its re-check loop, and the refusals (forged and stale
buttons, an unknown command, a message too long, a blocked user's 403, a 429 and a 5xx). One test then
reads the recording, a subtest per method and side of the contract; the test after it proves the check
finds what Telegram would refuse or never send, and that the fake refuses it too.

The run is on SQLite only: what is checked is the shape of the HTTP exchanges, which the database under
the bot does not change (each flow's effects are proved on both databases by the flow's own tests).
"""

import contextlib
import dataclasses
import datetime
import json
import threading
import time

import pytest
import requests

from bot import keyboards, lifecycle, membership, services
from bot.campaigns import CampaignDelivery
from bot.customer_notices import CustomerNoticeLoop
from bot.handlers import codes as code_handler
from bot.notifier import OperatorNotifier
from bot.polling import Poller
from bot.support_push import SupportReplyPush
from bot.updates import APPLIED, REFUSED
from commerce import codes
from commerce.passes.renewal import NOTICE_DUNNING
from config.settings import load_settings
from fakes.telegram import DEV_TOKEN, METHODS, FakeTelegram
from integrations import telegram
from integrations.payments.stars import StarsRefunds
from integrations.remnawave import RemnawaveClient
from models.base import utcnow
from models.commerce import Customer, Subscription
from models.support import SupportTicket
from ops import campaign_expansion, campaigns, sealing, support
from ops.records import queue_customer_notice
from tests.conftest import TEST_DATA_KEY
from tests.support import backends, botapi, sales
from tests.support import commerce as samples
from tests.support.botruns import InProcessBot
from tests.support.shop import PANEL_TOKEN, PUBLIC_URL, fulfil, open_shop, rub_plan

ANN = {"id": 1901, "first_name": "Ann", "last_name": "Lee", "username": "ann_lee", "language_code": "en"}
IRA = {"id": 1902, "first_name": "Ира", "language_code": "ru"}
BOB = {"id": 1903, "first_name": "Bob", "language_code": "en"}
CHANNEL = "@omniflow_news"
OPERATOR_CHAT = -1001234567890
PHOTO = b"\xff\xd8\xff\xe0" + bytes(range(256)) * 8
STATUSES = ("creator", "administrator", "member", "restricted", "left", "kicked")


class PollingBot(InProcessBot):
    """The in-process bot, polling with the bot process's own getUpdates call (bot/polling.py)."""

    def __init__(self, telebot, fake, settings):
        super().__init__(telebot, fake, settings=settings)
        self.poller = Poller(telebot, self.applier, self.stop, contextlib.nullcontext)

    def drain(self):
        outcomes = []
        while self.fake.waiting(self.poller.offset):
            updates = self.poller._poll()
            if updates:
                outcomes.extend(self.applier.apply_all(updates))
                self.poller.offset = updates[-1].update_id + 1
        return outcomes


def _press(bot, fake, user, data, message_id=None, outcome=APPLIED):
    fake.press(user, data, message_id=message_id)
    assert bot.drain() == [outcome], data  # the flow went where the run means it to


def _say(bot, fake, user, text, outcome=APPLIED):
    fake.send_message(user, text)
    assert bot.drain() == [outcome], text[:40]


def _customer(user):
    return Customer.get(Customer.telegram_id == user["id"])


def _pay(plan, method, currency, action=keyboards.PAY):
    return keyboards.data(action, f"{plan.id}:{method}:{currency}")


def _run_flows(bot, fake):
    """Every flow of the bot once, against the fake; the fake records what crossed the wire."""
    telebot, stop = bot.telebot, threading.Event()
    notices = CustomerNoticeLoop(telebot, stop)
    plan = rub_plan()
    for user in (ANN, IRA, BOB):
        fake.set_member(CHANNEL, user["id"], "member")
        _say(bot, fake, user, "/start")
    telebot.get_me()  # the bot never asks; its answer is checked all the same

    # The menu, the language, an empty My subscriptions.
    _press(bot, fake, ANN, keyboards.data(keyboards.LANGUAGE))
    _press(bot, fake, ANN, keyboards.data(keyboards.LANGUAGE, "ru"))
    _press(bot, fake, ANN, keyboards.data(keyboards.LANGUAGE, "en"))
    _press(bot, fake, ANN, keyboards.data(keyboards.SUBSCRIPTIONS))
    _press(bot, fake, ANN, keyboards.data(keyboards.MENU))

    # Buy with Stars: the invoice, the pre-checkout, the payment; a pre-checkout nothing was sold for.
    _press(bot, fake, ANN, keyboards.data(keyboards.BUY))
    _press(bot, fake, ANN, keyboards.data(keyboards.PLAN, str(plan.id)))
    _press(bot, fake, ANN, _pay(plan, "stars", "XTR"))
    invoice = fake.bot_messages(ANN["id"])[-1]
    fake.pay_invoice(ANN, invoice["message_id"])
    outcomes = bot.drain()  # the pre-checkout, answered ok; then (soon after) the payment
    _wait(lambda: len(outcomes) > 1 or fake.waiting(bot.poller.offset))
    assert outcomes + bot.drain() == [APPLIED, APPLIED]
    fake.pre_checkout(ANN, "XTR", 250, "order:999999")
    assert bot.drain() == [REFUSED]

    # The worker makes the user; the notice loop sends the receipts and the link as a QR code.
    fulfil()
    notices.tick()

    # My subscriptions with the link, its QR code, auto-renew on and off.
    _press(bot, fake, ANN, keyboards.data(keyboards.SUBSCRIPTIONS))
    subscription = Subscription.get(Subscription.customer == _customer(ANN).id)
    _press(bot, fake, ANN, keyboards.data(keyboards.QR_CODE, subscription.id))
    _press(bot, fake, ANN, keyboards.data(keyboards.AUTO_RENEW, f"{subscription.id}:on"))
    _press(bot, fake, ANN, keyboards.data(keyboards.AUTO_RENEW, f"{subscription.id}:off"))

    # A plan held already: extend it from the wallet, or a new one.
    sales.topped_up(_customer(ANN), 100000, "RUB")
    _press(bot, fake, ANN, keyboards.data(keyboards.PLAN, str(plan.id)))
    _press(bot, fake, ANN, keyboards.data(keyboards.EXTEND, f"{plan.id}:1"))
    _press(bot, fake, ANN, keyboards.data(keyboards.EXTEND_PAY, f"{plan.id}:1:wallet:RUB"))
    _press(bot, fake, ANN, keyboards.data(keyboards.NEW, str(plan.id)))

    # The wallet, YooKassa, CryptoBot and a gift, by Bob; the wallet's top-ups.
    sales.topped_up(_customer(BOB), 100000, "RUB")
    _press(bot, fake, BOB, keyboards.data(keyboards.PLAN, str(plan.id)))
    _press(bot, fake, BOB, _pay(plan, "wallet", "RUB"))
    _press(bot, fake, BOB, keyboards.data(keyboards.PLAN, str(plan.id)))
    _press(bot, fake, BOB, _pay(plan, "yookassa", "RUB"))
    _press(bot, fake, BOB, keyboards.data(keyboards.PLAN, str(plan.id)))
    _press(bot, fake, BOB, _pay(plan, "cryptobot", "USD"))
    _press(bot, fake, BOB, keyboards.data(keyboards.GIFT, str(plan.id)))
    _press(bot, fake, BOB, _pay(plan, "wallet", "RUB", action=keyboards.GIFT_PAY))
    _press(bot, fake, BOB, keyboards.data(keyboards.WALLET))
    _press(bot, fake, BOB, keyboards.data(keyboards.TOPUP, "yookassa:RUB:30000"))
    _press(bot, fake, BOB, keyboards.data(keyboards.TOPUP, "cryptobot:USD:500"))

    # A gift card, an access code, a wrong one, the trial (Ira, in Russian).
    _card, gift_code = codes.issue_gift_card(plan, utcnow() + datetime.timedelta(days=30))
    _say(bot, fake, IRA, f"/code {gift_code}")
    access_code = "SPRING-2027"
    codes.issue_access_code(plan, 5, code=access_code)
    _press(bot, fake, IRA, keyboards.data(keyboards.CODE))
    _say(bot, fake, IRA, "NOT-A-CODE", outcome=REFUSED)
    _say(bot, fake, IRA, access_code)
    samples.priced_plan("trial", prices={"RUB": 0}, trial=True, days=3)
    _press(bot, fake, IRA, keyboards.data(keyboards.TRIAL))
    fulfil()

    # Support: a text, a photo with a caption; the operator's reply pushed back.
    _press(bot, fake, ANN, keyboards.data(keyboards.SUPPORT))
    _say(bot, fake, ANN, "My VPN is slow in the evenings")
    _say(bot, fake, ANN, "/support")
    fake.send_photo(ANN, PHOTO, caption="this error")
    assert bot.drain() == [APPLIED]
    _say(bot, fake, ANN, "/support")
    _say(bot, fake, ANN, "/cancel")
    ticket = SupportTicket.get()
    support.operator_replies(ticket.id, "alice", "Try another server, please.", "answering")
    SupportReplyPush(telebot, stop).tick()

    # Refusals: a forged button, an unknown command, plain text, a message too long, a stale button.
    _press(bot, fake, BOB, "forged:button", outcome=REFUSED)
    _say(bot, fake, BOB, "/nope", outcome=REFUSED)
    _say(bot, fake, BOB, "hello?", outcome=REFUSED)
    _say(bot, fake, BOB, "x" * 5000, outcome=REFUSED)
    fake.age_chat(BOB["id"], 49 * 3600)
    _press(bot, fake, BOB, keyboards.data(keyboards.BUY), message_id=2)  # the welcome, 49 h old

    # Channel membership: every status Telegram answers; the re-check loop.
    answers = []
    for index, status in enumerate(STATUSES):
        fake.set_member(CHANNEL, 1_950_000 + index, status)
        answers.append(membership.ask(telebot, CHANNEL, 1_950_000 + index))
    assert answers == [True, True, True, True, False, False]  # a restricted user is still a member
    membership.MembershipRecheck(telebot, CHANNEL, stop, interval_s=0).run_once()

    # Notices: lifecycle (the period's end near), dunning, a refund; the operator notifier's forum topics.
    lifecycle.tick(now=utcnow() + datetime.timedelta(days=28))
    dunning = {"subscriptionId": "s7", "periodEnd": "2027-01-01T00:00:00Z", "planId": plan.id, "amountMinor": 19900,
               "currency": "RUB"}  # fmt: skip
    queue_customer_notice(_customer(IRA).id, NOTICE_DUNNING, "contract:dunning", dunning)
    queue_customer_notice(_customer(BOB).id, "order_refunded_wallet_full", "contract:refund",
                          {"orderId": 7, "amountMinor": 19900, "currency": "RUB"})  # fmt: skip
    notices.tick()
    notices.tick()
    OperatorNotifier(telebot, OPERATOR_CHAT, stop).tick()

    # Campaigns: a 429 midway, a user who blocked the bot (403), a 5xx.
    fake.set_fault("sendMessage", "429", count=1, retry_after=1, after=1)
    fake.block(IRA["id"])
    campaigns.create_campaign("announcement", "Maintenance tonight at 02:00 UTC.", "alice", "maintenance")
    campaigns.create_campaign("campaign", "Spring sale: 30 % off every plan this week.", "alice", "spring sale")
    campaign_expansion.run()  # the worker's pass writes their recipients
    delivery = CampaignDelivery(telebot, stop, rate=100)
    delivery.tick()
    delivery.tick()
    fake.block(IRA["id"], blocked=False)
    fake.set_fault("sendMessage", "5xx", count=1)
    queue_customer_notice(_customer(BOB).id, NOTICE_DUNNING, "contract:5xx", dunning)
    notices.tick()
    notices.tick()

    # The Stars refund a worker makes (JSON body), and the same again (Telegram: already refunded).
    stars = StarsRefunds(DEV_TOKEN, fake.base_url, timeout=5)
    charge = next(
        update["message"]["successful_payment"]["telegram_payment_charge_id"]
        for exchange in fake.exchanges("getUpdates")
        for update in exchange["body"]["result"]
        if "successful_payment" in update.get("message", {})
    )
    for _ in range(2):
        stars.refund(payment_id=charge, amount_minor=250, currency="XTR", idempotence_key="1", payer_id=ANN["id"])


def _wait(condition, timeout=10):
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.02)


@pytest.fixture(scope="module")
def recording(tmp_path_factory, shop_fakes):
    """Every Bot API exchange of one run through the bot's flows."""
    directory = tmp_path_factory.mktemp("bot-api-contract")
    database = backends.prepare(f"sqlite:///{directory / 'omniflow.sqlite3'}", postgres=False)
    sealing.use_keys(TEST_DATA_KEY)
    wrong_codes, code_handler.wrong_codes = code_handler.wrong_codes, code_handler.WrongCodes()
    fake = FakeTelegram(record=True).start()
    try:
        with open_shop(shop_fakes) as shop:
            services.use(
                services.Services(shop.providers, PUBLIC_URL, RemnawaveClient(shop.panel.base_url, PANEL_TOKEN))
            )
            telegram.configure(fake.base_url)
            settings = dataclasses.replace(
                load_settings(environ={}),
                support_attachment_dir=str(directory / "attachments"),
                telegram_required_channel=CHANNEL,
            )
            bot = PollingBot(telegram.new_bot(DEV_TOKEN), fake, settings)
            _run_flows(bot, fake)
            yield fake.exchanges()
    finally:
        services.use(None)
        sealing.use_keys(None)
        code_handler.wrong_codes = wrong_codes
        fake.stop()
        database.close()


# --- the recording, side by side with aiogram's models ------------------------------------------------------


def test_every_bot_api_call_of_every_flow_matches_telegrams_methods_types_and_limits(recording, subtests):
    """One test over the one run (a test of its own per method would make each test process that gets one
    drive the flows again): a subtest per method and side, so a failure names the method."""
    assert {exchange["method"] for exchange in recording} == set(METHODS)  # every method the fake serves
    assert {exchange["status"] for exchange in recording} >= {200, 400, 403, 429, 500}
    for method in sorted(METHODS):
        calls = [exchange for exchange in recording if exchange["method"] == method]
        with subtests.test("the request is the method, its parameters typed, within the limits", method=method):
            problems = {p for call in calls for p in botapi.request_problems(method, call["params"], call["files"])}
            assert sorted(problems) == []
        with subtests.test("the fake's answer is Telegram's shape and the method's return type", method=method):
            problems = {p for call in calls for p in botapi.response_problems(method, call["status"], call["body"])}
            assert sorted(problems) == []
    with subtests.test("every update delivered is a Telegram Update, of each kind the bot takes"):
        updates = [update for call in recording if call["method"] == "getUpdates" for update in call["body"]["result"]]
        assert sorted(_shapes(updates)) == sorted(UPDATE_SHAPES)
        assert botapi.response_problems("getUpdates", 200, {"ok": True, "result": updates}) == []
    with subtests.test("the longest text, caption, callback data and keyboard sent are within Telegram's limits"):
        _assert_within_limits(recording)


UPDATE_SHAPES = ("text", "photo", "successful_payment", "press", "press on an old message", "pre_checkout_query")


def _shapes(updates):
    shapes = set()
    for update in updates:
        kind = next(key for key in update if key != "update_id")
        part = update[kind]
        if kind == "message":
            shapes.add(next(key for key in ("text", "photo", "successful_payment") if key in part))
        elif kind == "callback_query":
            shapes.add("press on an old message" if part["message"]["date"] == 0 else "press")
        else:
            shapes.add(kind)
    return shapes


def _assert_within_limits(recording):
    """The limits on their own, on the largest of each the run sent (request_problems checks every one)."""
    texts = [e["params"]["text"] for e in recording if e["method"] in ("sendMessage", "editMessageText")]
    captions = [e["params"]["caption"] for e in recording if e["method"] == "sendPhoto" and "caption" in e["params"]]
    keyboards_sent = [json.loads(e["params"]["reply_markup"])["inline_keyboard"] for e in recording
                      if "reply_markup" in e["params"]]  # fmt: skip
    data = [button["callback_data"] for rows in keyboards_sent for row in rows for button in row
            if "callback_data" in button]  # fmt: skip
    assert 0 < min(map(len, texts)) and max(map(len, texts)) <= 4096
    assert captions and max(map(len, captions)) <= 1024
    assert data and max(len(value.encode()) for value in data) <= 64
    assert max(len(row) for rows in keyboards_sent for row in rows) <= 8
    assert max(sum(map(len, rows)) for rows in keyboards_sent) <= 100


# --- the check can fail: what Telegram would refuse or never send is found -----------------------------------

BUTTON = {"text": "Buy", "callback_data": "buy"}
MESSAGE = {"message_id": 2, "from": {"id": 1, "is_bot": True, "first_name": "Omniflow"},
           "chat": {"id": 1901, "type": "private"}, "date": 1796173094, "text": "Main menu"}  # fmt: skip


def _message(**params):
    return {"chat_id": "1", "text": "hi", **params}


def _keyboard(*rows):
    return _message(reply_markup=json.dumps({"inline_keyboard": list(rows)}))


def _stars_invoice(*prices):
    return {"chat_id": "1", "title": "Monthly", "description": "Monthly, order 1", "payload": "order:1",
            "currency": "XTR", "prices": json.dumps(list(prices))}  # fmt: skip


TOO_LONG_ROW = [BUTTON] * 9
TOO_MANY_ROWS = [[BUTTON]] * 101
TWO_PRICES = ({"label": "a", "amount": 1}, {"label": "b", "amount": 2})
BAD_REQUESTS = [
    ("sendMesage", _message(), {}, "no such Bot API method"),
    ("sendMessage", _message(parse_mod="HTML"), {}, "sendMessage.parse_mod: not a parameter"),
    ("sendMessage", {"chat_id": "1"}, {}, "sendMessage.text: required, not sent"),
    ("editMessageText", _message(message_id="two"), {}, "does not read as"),
    ("sendMessage", _message(disable_web_page_preview="True"), {}, "deprecated"),
    ("sendMessage", _message(reply_markup="{inline"), {}, "is not JSON"),
    ("sendMessage", _message(text="x" * 4097), {}, "4097 characters, the Bot API takes 1-4096"),
    ("sendPhoto", {"chat_id": "1", "caption": "x" * 1025}, {"photo": b"png"}, "1025 characters"),
    ("sendPhoto", {"chat_id": "1", "photo": "file-id"}, {"caption": b"x"}, "sent as a file upload"),
    ("answerCallbackQuery", {"callback_query_id": "1", "text": "x" * 201}, {}, "201 characters"),
    ("sendMessage", _keyboard([{"text": "a", "callback_data": "x" * 65}]), {}, "65 bytes, the Bot API takes 1-64"),
    ("sendMessage", _keyboard(TOO_LONG_ROW), {}, "too long (max width: 8)"),
    ("sendMessage", _keyboard(*TOO_MANY_ROWS), {}, "Max allowed count - 100"),
    ("sendMessage", _keyboard([{"text": "a"}]), {}, "0 actions"),
    ("sendMessage", _keyboard([{**BUTTON, "url": "https://a.test"}]), {}, "2 actions"),
    ("sendMessage", _keyboard([{**BUTTON, "colour": "red"}]), {}, "colour: not a field of InlineKeyboardButton"),
    ("sendInvoice", _stars_invoice(*TWO_PRICES), {}, "exactly one price"),
    ("sendInvoice", _stars_invoice({"label": "a", "amount": "250"}), {}, "string '250', not int"),
    ("answerPreCheckoutQuery", {"pre_checkout_query_id": "1", "ok": "False"}, {}, "required when ok is false"),
    ("refundStarPayment", {"user_id": "1901", "telegram_payment_charge_id": 5}, {}, "integer 5, not str"),
]


def _ok(result):
    return {"ok": True, "result": result}


WITHOUT_CHAT = {key: value for key, value in MESSAGE.items() if key != "chat"}
BANNED = {"status": "kicked", "user": MESSAGE["from"]}
RETRY_AS_TEXT = {"ok": False, "error_code": 429, "description": "Too Many Requests", "parameters": {"retry_after": "3"}}
BAD_ANSWERS = [
    ("sendMessage", 200, _ok(WITHOUT_CHAT), "chat: required"),
    ("sendMessage", 200, _ok({**MESSAGE, "date": "1796173094"}), "string '1796173094', not datetime"),
    ("sendMessage", 200, _ok({**MESSAGE, "message_id": "2"}), "message_id: string '2', not int"),
    ("sendMessage", 200, _ok({**MESSAGE, "at": 1.5}), "at: not a field of Message"),
    ("sendMessage", 200, _ok({**MESSAGE, "caption": None}), "caption: null"),
    ("sendMessage", 200, _ok({**MESSAGE, "text": ""}), "text: empty"),
    ("editMessageText", 200, _ok(MESSAGE), "without edit_date"),
    ("sendMessage", 400, _ok(MESSAGE), "ok with HTTP 400"),
    ("sendMessage", 429, {"ok": False, "error_code": 400, "description": "Too Many Requests"}, "error_code 400 with"),
    ("sendMessage", 429, RETRY_AS_TEXT, "retry_after: string '3', not int"),
    ("sendMessage", 200, {**_ok(MESSAGE), "at": 1}, "the answer has ['at']"),
    ("answerCallbackQuery", 200, _ok("true"), "string 'true', not bool"),
    ("getChatMember", 200, _ok(BANNED), "until_date: required in ChatMemberBanned"),
    ("getUpdates", 200, _ok([{"update_id": 5, "message": MESSAGE, "edited_message": MESSAGE}]), "2 kinds"),
    (
        "getUpdates",
        200,
        _ok([{"update_id": 6, "message": MESSAGE}, {"update_id": 5, "message": MESSAGE}]),
        "increasing",
    ),
]


FAKE_REFUSES = [
    ("sendMessage", _message(text="x" * 4097)),
    ("sendMessage", _keyboard([{"text": "a", "callback_data": "x" * 65}])),
    ("sendMessage", _keyboard(TOO_LONG_ROW)),
    ("sendMessage", _keyboard(*TOO_MANY_ROWS)),
    ("sendMessage", _keyboard([{"text": "a"}])),
    ("sendInvoice", _stars_invoice(*TWO_PRICES)),
    ("answerPreCheckoutQuery", {"pre_checkout_query_id": "1", "ok": "False"}),
]


def test_the_check_finds_what_telegram_would_refuse_ignore_or_never_send_and_the_fake_refuses_it_too(
    fake_telegram, subtests
):
    """One test (aiogram takes seconds to import in each test process that uses it), a subtest per case."""
    for method, params, files, found in BAD_REQUESTS:
        with subtests.test("a request Telegram would refuse or ignore", found=found):
            problems = botapi.request_problems(method, params, files)
            assert any(found in problem for problem in problems), problems
    for method, status, body, found in BAD_ANSWERS:
        with subtests.test("an answer Telegram never sends", found=found):
            problems = botapi.response_problems(method, status, body)
            assert any(found in problem for problem in problems), problems
    for method, params in FAKE_REFUSES:
        with subtests.test("the fake refuses it, in Telegram's error shape", method=method, params=str(params)[:60]):
            assert botapi.request_problems(method, params) != []
            answer = requests.post(f"{fake_telegram.base_url}/bot{DEV_TOKEN}/{method}", data=params, timeout=10)
            assert answer.status_code == 400
            assert botapi.response_problems(method, answer.status_code, answer.json()) == []
