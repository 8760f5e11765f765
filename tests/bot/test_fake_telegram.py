"""The fake Bot API (SPEC 14.8) behaves as Telegram does where the bot depends on it."""

import threading
import time

import pytest
import requests
from telebot import apihelper

from fakes.telegram import DEV_TOKEN
from integrations import telegram

USER = {"id": 900, "first_name": "Eve"}


def test_updates_below_the_offset_are_confirmed_and_never_delivered_again(fake_telegram, telebot):
    first = fake_telegram.send_message(USER, "one")
    second = fake_telegram.send_message(USER, "two")
    assert [u.update_id for u in telebot.get_updates(long_polling_timeout=1)] == [
        first["update_id"],
        second["update_id"],
    ]
    assert [u.update_id for u in telebot.get_updates(long_polling_timeout=1)] == [
        first["update_id"],
        second["update_id"],
    ]
    assert [u.update_id for u in telebot.get_updates(offset=second["update_id"], long_polling_timeout=1)] == [
        second["update_id"]
    ]
    assert fake_telegram.waiting() == 1


def test_a_long_poll_answers_as_soon_as_an_update_arrives(fake_telegram, telebot):
    threading.Timer(0.5, lambda: fake_telegram.send_message(USER, "late")).start()
    started = time.monotonic()
    updates = telebot.get_updates(long_polling_timeout=10)
    assert [u.message.text for u in updates] == ["late"] and time.monotonic() - started < 5


def test_a_newer_get_updates_ends_a_waiting_one_with_409(fake_telegram, telebot):
    outcome = {}

    def wait():
        try:
            telebot.get_updates(long_polling_timeout=10)
        except apihelper.ApiTelegramException as error:
            outcome["status"] = error.error_code

    waiter = threading.Thread(target=wait)
    waiter.start()
    time.sleep(0.5)
    telebot.get_updates(long_polling_timeout=1)
    waiter.join(10)
    assert outcome == {"status": 409}


def test_a_wrong_token_gets_401(fake_telegram):
    answer = requests.get(f"{fake_telegram.base_url}/bot1:wrong/getMe", timeout=5)
    assert answer.status_code == 401 and answer.json()["ok"] is False


def test_faults_apply_per_method_and_count(fake_telegram, telebot):
    fake_telegram.set_fault("sendMessage", "403", count=1)
    with pytest.raises(telegram.TelegramFailure) as refused:
        telegram.call("sendMessage", telebot.send_message, USER["id"], "hi")
    assert refused.value.code == telegram.FORBIDDEN
    telebot.send_message(USER["id"], "hi")  # the fault was for one call
    fake_telegram.set_fault("*", "429", count=1, retry_after=4)
    with pytest.raises(telegram.TelegramFailure) as limited:
        telegram.call("getMe", telebot.get_me)
    assert (limited.value.code, limited.value.retry_after) == (telegram.RATE_LIMITED, 4)
    fake_telegram.block(USER["id"])
    with pytest.raises(telegram.TelegramFailure) as blocked:
        telegram.call("sendMessage", telebot.send_message, USER["id"], "hi")
    assert blocked.value.code == telegram.FORBIDDEN
    assert [m["text"] for m in fake_telegram.bot_messages(USER["id"])] == ["hi"]


def test_a_fault_set_after_n_calls_lets_those_calls_through_first(fake_telegram, telebot):
    fake_telegram.set_fault("sendMessage", "5xx", after=2)
    telebot.send_message(USER["id"], "one")
    telebot.send_message(USER["id"], "two")
    with pytest.raises(telegram.TelegramFailure) as failed:
        telegram.call("sendMessage", telebot.send_message, USER["id"], "three")
    assert failed.value.code != telegram.FORBIDDEN
    assert [m["text"] for m in fake_telegram.bot_messages(USER["id"])] == ["one", "two"]


def test_a_photo_upload_and_a_users_photo_round_trip(fake_telegram, telebot):
    content = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
    message = telebot.send_photo(USER["id"], content, caption="your QR code")
    (sent,) = fake_telegram.accepted("sendPhoto")
    assert sent["size"] == len(content) and message.caption == "your QR code"
    update = fake_telegram.send_photo(USER, b"user photo bytes", caption="screenshot")
    file_id = update["message"]["photo"][-1]["file_id"]
    path = telebot.get_file(file_id).file_path
    assert telebot.download_file(path) == b"user photo bytes"


def test_an_invoice_paid_on_the_chat_page_asks_the_bot_first(fake_telegram, telebot):
    from telebot.types import LabeledPrice

    invoice = telebot.send_invoice(
        USER["id"], "Monthly", "30 days", "order:7", None, "XTR", [LabeledPrice("30 days", 250)]
    )
    query = fake_telegram.pay_invoice(USER, invoice.message_id)["pre_checkout_query"]
    assert (query["currency"], query["total_amount"], query["invoice_payload"]) == ("XTR", 250, "order:7")
    telebot.answer_pre_checkout_query(query["id"], True)
    deadline = time.monotonic() + 5
    while fake_telegram.waiting() < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    payment = telebot.get_updates(long_polling_timeout=1)[-1].message.successful_payment
    assert (payment.currency, payment.total_amount, payment.invoice_payload) == ("XTR", 250, "order:7")
    assert telebot.refund_star_payment(USER["id"], payment.telegram_payment_charge_id) is True
    with pytest.raises(apihelper.ApiTelegramException):
        telebot.refund_star_payment(USER["id"], payment.telegram_payment_charge_id)


def test_the_chat_page_is_static_and_puts_texts_in_as_text(fake_telegram):
    fake_telegram.send_message(USER, "<img src=x onerror=alert(1)>")
    page = requests.get(fake_telegram.chat_url, timeout=5)
    assert page.status_code == 200 and "text/html" in page.headers["Content-Type"]
    assert "onerror" not in page.text and "innerHTML" not in page.text
    transcript = requests.get(f"{fake_telegram.base_url}/_fake/chats/{USER['id']}", timeout=5).json()
    assert transcript["messages"][0]["text"] == "<img src=x onerror=alert(1)>"  # JSON, rendered with textContent


def test_the_control_side_over_http_injects_and_reads(fake_telegram, telebot):
    base = fake_telegram.base_url + "/_fake"
    update = requests.post(f"{base}/messages", json={"user": USER, "text": "/start"}, timeout=5).json()
    assert telebot.get_updates(long_polling_timeout=1)[0].update_id == update["update_id"]
    bad = requests.post(f"{base}/faults", json={"method": "nope", "fault": "5xx"}, timeout=5)
    assert bad.status_code == 400 and "unknown method" in bad.json()["error"]
    assert DEV_TOKEN not in requests.get(f"{base}/stats", timeout=5).text


def test_a_fake_without_state_numbers_updates_from_a_random_high_point_not_from_1():
    from fakes.telegram import FakeTelegram

    first_ids = {FakeTelegram().send_message(USER, "/start")["update_id"] for _ in range(3)}
    assert len(first_ids) == 3 and min(first_ids) > 1 << 20


def test_a_fake_restarted_on_its_state_file_keeps_chats_queued_updates_and_counter_and_fresh_starts_empty(tmp_path):
    from fakes.telegram import FakeTelegram

    state = tmp_path / "var" / "fake-telegram.state"
    before = FakeTelegram(state_file=state).start()
    try:
        applied = before.send_message(USER, "/start")
        api = f"{before.base_url}/bot{DEV_TOKEN}"
        markup = {"inline_keyboard": [[{"text": "Menu", "callback_data": "menu"}]]}
        requests.post(f"{api}/sendMessage", json={"chat_id": USER["id"], "text": "Welcome", "reply_markup": markup},
                      timeout=5).raise_for_status()  # fmt: skip
        requests.post(f"{api}/getUpdates", json={"offset": applied["update_id"] + 1}, timeout=5).raise_for_status()
        before.press(USER, "menu")
        before.send_photo(USER, b"photo bytes")
        transcript, waiting = before.transcript(USER["id"]), before.waiting()
    finally:
        before.stop()
    after = FakeTelegram(state_file=state).start()
    try:
        assert after.transcript(USER["id"]) == transcript and after.waiting() == waiting == 2
        new = after.send_message(USER, "/start")
        api = f"{after.base_url}/bot{DEV_TOKEN}"
        press, photo, queued = requests.post(f"{api}/getUpdates", timeout=5).json()["result"]
        assert queued["update_id"] == new["update_id"] == applied["update_id"] + 3  # the counter went on
        query = {"callback_query_id": press["callback_query"]["id"], "text": "Done"}
        assert requests.post(f"{api}/answerCallbackQuery", json=query, timeout=5).json()["ok"] is True
        file_id = photo["message"]["photo"][-1]["file_id"]
        assert requests.get(f"{after.base_url}/_fake/files/{file_id}", timeout=5).content == b"photo bytes"
    finally:
        after.stop()
    fresh = FakeTelegram(state_file=state, fresh=True)
    assert fresh.transcript(USER["id"]) == [] and fresh.waiting() == 0
