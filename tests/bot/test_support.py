"""SPEC 14.4, 14.6: a customer opens a support ticket from the bot with text and photos (files named by SHA-256),
an operator replies from the panel, and the bot pushes the reply; bad input gets a plain answer and writes nothing."""

import dataclasses
import hashlib
import os
import threading

import pytest
import requests

from bot import keyboards
from bot.support_push import SupportReplyPush
from bot.updates import APPLIED, FAILED, REFUSED
from config.settings import load_settings
from models.commerce import Customer
from models.ops import AuditEvent
from models.support import SupportAttachment, SupportMessage, SupportTicket
from ops import support
from tests.support.botruns import InProcessBot, row_counts

ANN = {"id": 601, "first_name": "Ann", "language_code": "en"}
CAP = 64 * 1024
PHOTO = b"\xff\xd8\xff\xe0" + bytes(range(256)) * 40  # 10 KiB of "JPEG"


@pytest.fixture
def attachment_dir(tmp_path):
    return str(tmp_path / "attachments")


@pytest.fixture
def bot(database, telebot, fake_telegram, attachment_dir):
    settings = dataclasses.replace(
        load_settings(environ={}), support_attachment_dir=attachment_dir, support_attachment_max_bytes=CAP
    )
    return InProcessBot(telebot, fake_telegram, settings=settings)


def started(bot, fake, user=ANN):
    fake.send_message(user, "/start")
    bot.drain()


def last_text(fake, user=ANN):
    return fake.bot_messages(user["id"])[-1]["text"]


def test_a_customer_writes_to_support_from_the_menu_and_gets_the_ticket_number(bot, fake_telegram):
    started(bot, fake_telegram)
    fake_telegram.press(ANN, keyboards.data(keyboards.SUPPORT), message_id=2)
    fake_telegram.send_message(ANN, "My VPN is slow in the evenings")
    assert bot.drain() == [APPLIED, APPLIED]
    [ticket] = SupportTicket.select()
    assert (ticket.customer_id, ticket.chat_id, ticket.status) == (Customer.get().id, ANN["id"], "open")
    [message] = SupportMessage.select()
    assert (message.author, message.text, message.push_status) == ("customer", "My VPN is slow in the evenings", None)
    assert last_text(fake_telegram) == f"Thank you! Your message is in ticket #{ticket.id}. We will answer here."

    # The next message is not for support any more: the fallback answers it, nothing is added.
    fake_telegram.send_message(ANN, "hello?")
    assert bot.drain() == [REFUSED]
    assert SupportMessage.select().count() == 1


def test_a_second_message_goes_to_the_open_ticket_and_cancel_stops_waiting(bot, fake_telegram):
    started(bot, fake_telegram)
    for text in ("/support", "first", "/support", "second", "/support", "/cancel", "not for support"):
        fake_telegram.send_message(ANN, text)
    bot.drain()
    assert SupportTicket.select().count() == 1
    assert [m.text for m in SupportMessage.select().order_by(SupportMessage.id)] == ["first", "second"]
    assert last_text(fake_telegram).startswith("I work with buttons and commands")


def test_a_photo_is_stored_once_under_its_sha256_with_its_caption_as_text(bot, fake_telegram, attachment_dir):
    started(bot, fake_telegram)
    for _ in range(2):
        fake_telegram.send_message(ANN, "/support")
        fake_telegram.send_photo(ANN, PHOTO, caption="this error")
    assert bot.drain() == [APPLIED] * 4
    digest = hashlib.sha256(PHOTO).hexdigest()
    assert os.listdir(attachment_dir) == [digest]
    with open(os.path.join(attachment_dir, digest), "rb") as file:
        assert file.read() == PHOTO
    rows = list(SupportAttachment.select())
    assert [(r.digest, r.size_bytes, r.content_type) for r in rows] == [(digest, len(PHOTO), "image/jpeg")] * 2
    assert {r.message_id for r in rows} == {m.id for m in SupportMessage.select()}
    assert [m.text for m in SupportMessage.select()] == ["this error", "this error"]


def test_a_photo_over_the_cap_is_refused_plainly_and_nothing_is_written(bot, fake_telegram, attachment_dir):
    started(bot, fake_telegram)
    fake_telegram.send_message(ANN, "/support")
    bot.drain()
    before = row_counts()
    fake_telegram.send_photo(ANN, b"x" * (CAP + 1), caption="huge")
    assert bot.drain() == [REFUSED]
    assert last_text(fake_telegram) == "That photo is too large: at most 64 KB, please."
    assert row_counts() == before
    assert not os.path.exists(attachment_dir) or os.listdir(attachment_dir) == []
    # Still waiting for the message: a smaller photo goes through.
    fake_telegram.send_photo(ANN, PHOTO)
    assert bot.drain() == [APPLIED]
    assert SupportAttachment.select().count() == 1


def test_without_an_attachment_directory_a_photo_is_refused_and_nothing_is_written(database, telebot, fake_telegram):
    bot = InProcessBot(telebot, fake_telegram, settings=load_settings(environ={}))
    started(bot, fake_telegram)
    fake_telegram.send_message(ANN, "/support")
    bot.drain()
    before = row_counts()
    fake_telegram.send_photo(ANN, PHOTO)
    assert bot.drain() == [REFUSED]
    assert last_text(fake_telegram).startswith("Photos can't be accepted right now")
    assert row_counts() == before


@pytest.mark.parametrize("data", ["support:1", "support:", "support:" + "x" * 60])
def test_a_forged_support_press_is_refused_and_nothing_is_written(bot, fake_telegram, data):
    started(bot, fake_telegram)
    before = row_counts()
    fake_telegram.press(ANN, data, message_id=2)
    assert bot.drain() == [REFUSED]
    assert row_counts() == before
    [answer] = fake_telegram.callback_answers().values()
    assert answer["text"].startswith("This button is not valid any more")


def test_an_operator_reply_is_pushed_to_the_customer_once(bot, fake_telegram, telebot):
    started(bot, fake_telegram)
    fake_telegram.send_message(ANN, "/support")
    fake_telegram.send_message(ANN, "Where is my link?")
    bot.drain()
    ticket = SupportTicket.get()
    reply = support.operator_replies(ticket.id, "alice", "Under My subscriptions.", "answering")
    push = SupportReplyPush(telebot, threading.Event())
    fake_telegram.set_fault("sendMessage", "5xx", count=1)
    assert push.tick() == 0
    assert SupportMessage.get_by_id(reply.id).push_status == "pending"
    push.tick()
    push.tick()
    pushed = [m for m in fake_telegram.bot_messages(ANN["id"]) if m["text"].startswith("Support, ticket")]
    assert [m["text"] for m in pushed] == [f"Support, ticket #{ticket.id}:\n\nUnder My subscriptions."]
    assert SupportMessage.get_by_id(reply.id).push_status == "sent"
    assert SupportTicket.get_by_id(ticket.id).status == "answered"


def test_a_reply_to_a_customer_who_blocked_the_bot_marks_them_unreachable(bot, fake_telegram, telebot):
    started(bot, fake_telegram)
    ticket, _ = support.customer_writes(Customer.get().id, ANN["id"], "help")
    reply = support.operator_replies(ticket.id, "alice", "Hello!", "answering")
    fake_telegram.block(ANN["id"])
    push = SupportReplyPush(telebot, threading.Event())
    push.tick()
    push.tick()
    assert SupportMessage.get_by_id(reply.id).push_status == "unreachable"
    assert Customer.get().telegram_unreachable_at is not None


def test_a_429_ends_the_tick_with_its_retry_after(bot, fake_telegram, telebot):
    started(bot, fake_telegram)
    ticket, _ = support.customer_writes(Customer.get().id, ANN["id"], "help")
    support.operator_replies(ticket.id, "alice", "Hello!", "answering")
    fake_telegram.set_fault("sendMessage", "429", count=1, retry_after=4)
    push = SupportReplyPush(telebot, threading.Event())
    assert push.tick() == 4
    assert push.tick() == 0
    assert SupportMessage.select().where(SupportMessage.push_status == "sent").count() == 1


# -- the panel API ---------------------------------------------------------------------------------


@pytest.fixture
def panel(database, data_key):
    from tests.web.conftest import serving

    with serving({"APP_DATA_ENCRYPTION_KEY": data_key}) as base:
        yield base


def test_an_operator_reads_the_ticket_and_replies_from_the_panel(panel):
    from tests.web.test_panel_api import REASON, session_of

    customer = Customer.create(display_name="Ann", telegram_id=ANN["id"])
    ticket, message = support.customer_writes(customer.id, ANN["id"], "It stopped working")
    SupportAttachment.create(ticket_id=ticket.id, message_id=message.id, digest="a" * 64, size_bytes=10,
                             content_type="image/jpeg", expires_at=message.created_at)  # fmt: skip
    headers = {**session_of(panel), **REASON}
    listed = requests.get(f"{panel}/v1/panel/support/tickets", headers=headers, timeout=10).json()
    assert [t["id"] for t in listed["tickets"]] == [ticket.id]
    shown = requests.get(f"{panel}/v1/panel/support/tickets/{ticket.id}", headers=headers, timeout=10).json()
    assert shown["messages"][0]["text"] == "It stopped working"
    assert shown["messages"][0]["attachments"] == [{"digest": "a" * 64, "sizeBytes": 10, "contentType": "image/jpeg"}]
    answer = requests.post(f"{panel}/v1/panel/support/tickets/{ticket.id}/replies", headers=headers,
                           json={"text": "Fixed, try again."}, timeout=10)  # fmt: skip
    assert answer.status_code == 201, answer.text
    assert (answer.json()["message"]["pushStatus"], answer.json()["message"]["operator"]) == ("pending", "alice")
    assert AuditEvent.select().where(AuditEvent.action == "support.replied").count() == 1


def test_bad_replies_are_refused_with_their_code_and_write_nothing(panel):
    from tests.web.test_admin_api import assert_problem
    from tests.web.test_panel_api import REASON, session_of

    customer = Customer.create(display_name="Ann", telegram_id=ANN["id"])
    ticket, _ = support.customer_writes(customer.id, ANN["id"], "help")
    closed, _ = support.customer_writes(Customer.create(display_name="Bo", telegram_id=7).id, 7, "old")
    SupportTicket.update(status="closed").where(SupportTicket.id == closed.id).execute()
    headers = {**session_of(panel), **REASON}
    url = f"{panel}/v1/panel/support/tickets"
    for path, body, status, code in [
        (f"/{ticket.id}/replies", {"text": ""}, 400, "invalid_support_text"),
        (f"/{ticket.id}/replies", {"text": "x" * 4097}, 400, "invalid_support_text"),
        (f"/{ticket.id}/replies", {}, 400, "invalid_support_text"),
        (f"/{closed.id}/replies", {"text": "hi"}, 409, "ticket_closed"),
        ("/999/replies", {"text": "hi"}, 404, "ticket_not_found"),
        ("/x/replies", {"text": "hi"}, 400, "invalid_ticket_id"),
    ]:
        assert_problem(requests.post(url + path, headers=headers, json=body, timeout=10), status, code)
    assert_problem(requests.get(url + "?status=lost", headers=headers, timeout=10), 400, "invalid_ticket_status")
    assert SupportMessage.select().where(SupportMessage.author == "operator").count() == 0
    assert AuditEvent.select().where(AuditEvent.action == "support.replied").count() == 0


def fetches(calls):
    return [(method, in_transaction) for method, in_transaction in calls if method in ("getFile", "downloadFile")]


def test_a_photo_is_fetched_before_the_update_transaction_opens_and_only_when_it_is_for_support(
    bot, fake_telegram, bot_api_calls, attachment_dir
):
    started(bot, fake_telegram)
    fake_telegram.send_photo(ANN, PHOTO, caption="not waiting for support")
    assert bot.drain() == [REFUSED]  # the fallback answers it; nothing was fetched
    assert fetches(bot_api_calls) == []

    # The Support press and the photo in one batch: the wait begins in the batch, the photo is fetched before it.
    fake_telegram.press(ANN, keyboards.data(keyboards.SUPPORT), message_id=2)
    fake_telegram.send_photo(ANN, PHOTO, caption="this error")
    assert bot.drain() == [APPLIED, APPLIED]
    assert fetches(bot_api_calls) == [("getFile", False), ("downloadFile", False)]
    [attachment] = SupportAttachment.select()
    assert attachment.digest == hashlib.sha256(PHOTO).hexdigest()

    # Waiting already (committed): fetched before the transaction too; one over the stated cap is not fetched.
    fake_telegram.send_message(ANN, "/support")
    bot.drain()
    fake_telegram.send_photo(ANN, b"x" * (CAP + 1))
    assert bot.drain() == [REFUSED]
    fake_telegram.send_photo(ANN, PHOTO[::-1])
    assert bot.drain() == [APPLIED]
    assert fetches(bot_api_calls) == [("getFile", False), ("downloadFile", False)] * 2
    assert not any(in_transaction for _, in_transaction in bot_api_calls)


def test_a_photo_telegram_cannot_hand_over_fails_the_update_and_writes_nothing(bot, fake_telegram, attachment_dir):
    started(bot, fake_telegram)
    fake_telegram.send_message(ANN, "/support")
    bot.drain()
    before = row_counts()
    fake_telegram.set_fault("getFile", "5xx", count=1)
    fake_telegram.send_photo(ANN, PHOTO)
    assert bot.drain() == [FAILED]
    assert last_text(fake_telegram) == "Something went wrong on our side. Please try again in a minute."
    assert row_counts() == before
    fake_telegram.send_photo(ANN, PHOTO)  # still waiting: the same photo again goes through
    assert bot.drain() == [APPLIED]
    assert SupportAttachment.select().count() == 1
