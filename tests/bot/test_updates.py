"""SPEC 14.3, 14.4 in the test process: what an update does, over real HTTP to the fake Bot API, on both databases."""

import contextlib
import threading

import pytest

from bot import keyboards
from bot.updates import APPLIED, DUPLICATE, FAILED, REFUSED, AnswerSender
from commerce.settlement import settle_order
from models.base import db
from models.bot import BotUpdate
from models.commerce import Customer
from tests.support import commerce as samples
from tests.support.botruns import InProcessBot, row_counts
from tests.support.processes import wait_for

ANN = {"id": 501, "first_name": "Ann", "last_name": "Lee", "username": "ann", "language_code": "ru"}
BOB = {"id": 502, "first_name": "Bob", "language_code": "en-GB"}


@pytest.fixture
def bot(database, telebot, fake_telegram):
    return InProcessBot(telebot, fake_telegram)


def buttons(message):
    return [button["callback_data"] for row in message["reply_markup"]["inline_keyboard"] for button in row]


def test_start_creates_the_customer_from_the_telegram_user_and_a_second_start_finds_it(bot, fake_telegram):
    fake_telegram.send_message(ANN, "/start")
    fake_telegram.send_message(ANN, "/start")
    assert bot.drain() == [APPLIED, APPLIED]
    customers = list(Customer.select().where(Customer.telegram_id == ANN["id"]))
    assert len(customers) == 1
    assert (customers[0].display_name, customers[0].telegram_username, customers[0].language_code) == (
        "Ann Lee", "ann", "ru",
    )  # fmt: skip
    first, second = fake_telegram.bot_messages(ANN["id"])
    assert first["text"].startswith("Добро пожаловать, Ann Lee!") and second["text"].startswith("С возвращением")
    assert buttons(first) == [
        keyboards.BUY, keyboards.SHOP, keyboards.SUBSCRIPTIONS, keyboards.WALLET, keyboards.LANGUAGE, keyboards.CODE,
        keyboards.TRIAL, keyboards.SUPPORT,
    ]  # fmt: skip
    assert BotUpdate.select().count() == 2


def test_an_update_id_applied_before_the_repeat_window_is_a_new_update_and_one_inside_it_a_repeat(
    bot, fake_telegram
):
    import datetime

    from models.base import utcnow
    from models.bot import UPDATE_REPEAT_WINDOW

    first = fake_telegram.send_message(ANN, "/start")
    second = fake_telegram.send_message(BOB, "/start")
    assert bot.drain() == [APPLIED, APPLIED]
    minute = datetime.timedelta(minutes=1)
    for update, age in ((first, UPDATE_REPEAT_WINDOW + minute), (second, UPDATE_REPEAT_WINDOW - minute)):
        BotUpdate.update(applied_at=utcnow() - age).where(BotUpdate.update_id == update["update_id"]).execute()
    # Telegram numbering anew from below (a restarted bot asks without an offset): Ann's new /start
    # carries her old update's id, while Bob's update is delivered again.
    fake_telegram.discard_pending()
    bot.offset = None
    fake_telegram.inject({"update_id": first["update_id"], "message": {**first["message"], "message_id": 99}})
    fake_telegram.inject(second)
    assert bot.drain() == [APPLIED, DUPLICATE]
    assert [m["text"].split(",")[0] for m in fake_telegram.bot_messages(ANN["id"])] == [
        "Добро пожаловать", "С возвращением",
    ]  # fmt: skip
    assert len(fake_telegram.bot_messages(BOB["id"])) == 1
    assert BotUpdate.get_by_id(first["update_id"]).applied_at > utcnow() - minute


def test_a_replayed_update_is_skipped(bot, fake_telegram):
    update = fake_telegram.send_message(BOB, "/start")
    fake_telegram.inject(update)
    assert bot.drain() == [APPLIED, DUPLICATE]
    assert len(fake_telegram.bot_messages(BOB["id"])) == 1


def test_a_chats_answers_keep_the_order_of_its_updates_another_chat_is_not_held_back_and_close_sends_what_is_queued(
    bot, fake_telegram
):
    sender = AnswerSender(bot.applier.deliver)
    bot.applier.sender = sender
    ann, bob = (
        {"id": 601, "first_name": "A", "language_code": "en"},
        {"id": 602, "first_name": "B", "language_code": "en"},
    )
    fake_telegram.set_fault("sendMessage", "slow", count=1, delay=3, chat_id=ann["id"])  # Ann's first answer is slow
    fake_telegram.send_message(ann, "/start")
    fake_telegram.send_message(ann, "hello")
    fake_telegram.send_message(bob, "/start")
    fake_telegram.send_message(ann, "/frobnicate")
    thread = threading.Thread(target=sender.run)
    thread.start()
    assert bot.drain() == [APPLIED, REFUSED, APPLIED, REFUSED]  # applied while Ann's first answer is under way
    wait_for(lambda: fake_telegram.bot_messages(bob["id"]), 10, message="Bob answered meanwhile")
    assert len(fake_telegram.bot_messages(ann["id"])) == 1  # Ann's later answers wait behind her first
    sender.close()
    thread.join(15)
    assert not thread.is_alive()
    assert [message["text"].split("!")[0].split(".")[0] for message in fake_telegram.bot_messages(ann["id"])] == [
        "Welcome, A",
        "I work with buttons and commands",
        "I don't know the command /frobnicate",
    ]


def test_the_language_follows_telegram_until_the_customer_chooses_one(bot, fake_telegram):
    fake_telegram.send_message(BOB, "/start")
    bot.drain()
    assert fake_telegram.bot_messages(BOB["id"])[0]["text"].startswith("Welcome, Bob!")
    fake_telegram.press(BOB, keyboards.data(keyboards.LANGUAGE))
    fake_telegram.press(BOB, keyboards.data(keyboards.LANGUAGE, "ru"))
    assert bot.drain() == [APPLIED, APPLIED]
    menu = fake_telegram.bot_messages(BOB["id"])[-1]
    assert menu["edited"] and menu["text"].startswith("Язык: русский.")
    fake_telegram.send_message(BOB, "/start")
    bot.drain()
    assert fake_telegram.bot_messages(BOB["id"])[-1]["text"].startswith("С возвращением, Bob!")
    assert Customer.get(Customer.telegram_id == BOB["id"]).language_code == "ru"
    assert all(answer["text"] is None for answer in fake_telegram.callback_answers().values())


def test_a_press_on_a_message_too_old_to_edit_is_answered_in_words_with_a_fresh_menu(bot, fake_telegram):
    from fakes.telegram import MESSAGE_ACCESSIBLE_S

    fake_telegram.send_message(BOB, "/start")
    bot.drain()
    fake_telegram.age_chat(BOB["id"], MESSAGE_ACCESSIBLE_S + 60)
    fake_telegram.press(BOB, keyboards.data(keyboards.LANGUAGE))
    assert bot.drain() == [APPLIED]
    (answer,) = fake_telegram.callback_answers().values()
    assert answer["text"] == "This message is too old to change. Here is a fresh menu." and not answer["show_alert"]
    old, fresh = fake_telegram.bot_messages(BOB["id"])
    assert old["text"].startswith("Welcome, Bob!") and not old.get("edited")
    assert fresh["text"] == "Main menu: choose what you need." and buttons(fresh)[0] == keyboards.BUY


def test_my_subscriptions_shows_the_plan_its_state_and_end(bot, fake_telegram):
    fake_telegram.send_message(BOB, "/start")
    bot.drain()
    customer = Customer.get(Customer.telegram_id == BOB["id"])
    plan = samples.plan(code="monthly")
    settle_order(samples.order(customer, plan).id, "provider_webhook")
    fake_telegram.press(BOB, keyboards.data(keyboards.SUBSCRIPTIONS))
    assert bot.drain() == [APPLIED]
    shown = fake_telegram.bot_messages(BOB["id"])[-1]["text"]
    assert shown.startswith("Your subscriptions:") and f"{plan.name}: being set up, until" in shown


@pytest.mark.parametrize(
    "data",
    ["evil", "lang:de", "subs:1", "menu:", "lang:ru:extra", "x" * 64, "", "lang:en" + "\u0000"],
    ids=["unknown", "bad-language", "argument-not-taken", "empty-argument", "extra-part", "long", "empty", "nul"],
)
def test_forged_callback_data_gets_a_polite_refusal_and_nothing_is_written(bot, fake_telegram, data):
    fake_telegram.send_message(BOB, "/start")
    bot.drain()
    before = row_counts()
    fake_telegram.press(BOB, data)
    assert bot.drain() == [REFUSED]
    assert row_counts() == before
    (answer,) = fake_telegram.callback_answers().values()
    assert answer["show_alert"] and answer["text"].startswith("This button is not valid any more.")


def test_a_press_from_someone_who_never_started_is_refused_and_nothing_is_written(bot, fake_telegram):
    before = row_counts()
    fake_telegram.press(ANN, keyboards.data(keyboards.MENU), message_id=1)
    assert bot.drain() == [REFUSED]
    assert row_counts() == before
    (answer,) = fake_telegram.callback_answers().values()
    assert answer["text"].startswith("Эта кнопка больше не действует.")


@pytest.mark.parametrize(
    "text, expected",
    [
        ("x" * 5000, "That message is too long: at most 4096 characters, please."),
        ("/start" + "x" * 5000, "That message is too long: at most 4096 characters, please."),
        ("/frobnicate now", "I don't know the command /frobnicate. Send /start for the menu."),
        ("hello there", "I work with buttons and commands. Send /start for the menu."),
    ],
    ids=["huge", "huge-command", "unknown-command", "plain-text"],
)
def test_bad_messages_get_a_clear_answer_and_nothing_is_written(bot, fake_telegram, text, expected):
    fake_telegram.send_message(BOB, "/start")
    bot.drain()
    before = row_counts()
    fake_telegram.send_message(BOB, text)
    assert bot.drain() == [REFUSED]
    assert row_counts() == before
    assert fake_telegram.bot_messages(BOB["id"])[-1]["text"] == expected


def test_a_message_from_a_stranger_is_told_to_start_and_creates_nobody(bot, fake_telegram):
    before = row_counts()
    fake_telegram.send_message(BOB, "hi")
    assert bot.drain() == [REFUSED]
    assert row_counts() == before
    assert fake_telegram.bot_messages(BOB["id"])[-1]["text"] == "Send /start to begin."


def test_a_blocked_customer_gets_a_plain_refusal_and_nothing_is_written(bot, fake_telegram):
    fake_telegram.send_message(BOB, "/start")
    bot.drain()
    Customer.update(blocked=True).where(Customer.telegram_id == BOB["id"]).execute()
    before = row_counts()
    fake_telegram.send_message(BOB, "/start")
    fake_telegram.press(BOB, keyboards.data(keyboards.LANGUAGE, "ru"))
    assert bot.drain() == [REFUSED, REFUSED]
    assert row_counts() == before
    assert fake_telegram.bot_messages(BOB["id"])[-1]["text"].startswith("Your account is blocked.")
    assert Customer.get(Customer.telegram_id == BOB["id"]).language_code == "en"


def test_a_pre_checkout_for_nothing_sold_is_refused(bot, fake_telegram):
    before = row_counts()
    query = fake_telegram.pre_checkout(BOB, "XTR", 100, "not-an-order")
    assert bot.drain() == [REFUSED]
    assert row_counts() == before
    answer = fake_telegram.pre_checkout_answers()[query["pre_checkout_query"]["id"]]
    assert answer["ok"] is False and answer["error_message"]


def test_a_handler_that_fails_writes_nothing_and_the_customer_is_told(bot, fake_telegram, monkeypatch):
    from commerce import customers

    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(customers, "customer_for_telegram", broken)
    before = row_counts()
    fake_telegram.send_message(BOB, "/start")
    assert bot.drain() == [FAILED]
    assert row_counts() == before
    assert fake_telegram.bot_messages(BOB["id"])[-1]["text"].startswith("Something went wrong on our side.")


def test_a_stars_payment_no_flow_claims_becomes_an_operator_notice_even_from_a_blocked_customer(bot, fake_telegram):
    from models.ops import OperatorNotice

    fake_telegram.send_message(BOB, "/start")
    bot.drain()
    Customer.update(blocked=True).where(Customer.telegram_id == BOB["id"]).execute()
    update = fake_telegram.successful_payment(BOB, "XTR", 250, "order:unknown", charge_id="stx-charge-1")
    fake_telegram.inject(update)  # delivered twice: one notice
    assert bot.drain() == [APPLIED, DUPLICATE]
    (notice,) = OperatorNotice.select()
    assert (notice.kind, notice.dedupe_key) == ("stars_payment_unmatched", "stx-charge-1")
    assert fake_telegram.bot_messages(BOB["id"])[-1]["text"].startswith("We received your payment")


def test_a_customer_marked_unreachable_who_sends_start_is_reachable_again(bot, fake_telegram):
    from models.base import utcnow

    fake_telegram.send_message(BOB, "/start")
    bot.drain()
    Customer.update(telegram_unreachable_at=utcnow()).where(Customer.telegram_id == BOB["id"]).execute()
    fake_telegram.send_message(BOB, "/start")
    assert bot.drain() == [APPLIED]
    assert Customer.get(Customer.telegram_id == BOB["id"]).telegram_unreachable_at is None


def test_updates_applied_together_keep_each_effect_with_its_id_and_a_refused_or_failed_one_writes_nothing(
    bot, fake_telegram, monkeypatch
):
    from bot.handlers import fallback

    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(fallback, "on_unknown_command", broken)
    first = fake_telegram.send_message(ANN, "/start")  # creates Ann
    fake_telegram.send_message(ANN, "x" * 5000)  # refused
    third = fake_telegram.send_message(ANN, "/start")  # finds Ann, created by the first in the same transaction
    fake_telegram.send_message(BOB, "hi")  # refused: Bob never started
    fifth = fake_telegram.send_message(BOB, "/start")  # creates Bob
    fake_telegram.send_message(BOB, "/frobnicate")  # fails
    assert bot.drain() == [APPLIED, REFUSED, APPLIED, REFUSED, APPLIED, FAILED]
    assert sorted(row.update_id for row in BotUpdate.select()) == sorted(
        u["update_id"] for u in (first, third, fifth)
    )  # fmt: skip
    assert Customer.select().count() == 2
    ann_texts = [message["text"] for message in fake_telegram.bot_messages(ANN["id"])]
    assert [text.split(",")[0].split(":")[0] for text in ann_texts] == [
        "Добро пожаловать", "Сообщение слишком длинное", "С возвращением",
    ]  # fmt: skip
    assert fake_telegram.bot_messages(BOB["id"])[-1]["text"].startswith("Something went wrong on our side.")


def test_a_batch_whose_lease_another_bot_holds_now_raises_lease_lost_and_writes_nothing(bot, fake_telegram):
    import datetime

    from bot.lease import LEASE_NAME, LeaseLost
    from models.base import utcnow
    from models.jobs import JobLeader

    JobLeader.update(leader_id="another-bot", expires_at=utcnow() + datetime.timedelta(seconds=30)).where(
        JobLeader.name == LEASE_NAME
    ).execute()
    before = row_counts()
    fake_telegram.send_message(ANN, "/start")
    fake_telegram.send_message(BOB, "/start")
    with pytest.raises(LeaseLost):
        bot.drain()
    assert row_counts() == before
    assert bot.lease.lost.is_set()
    assert fake_telegram.bot_messages(ANN["id"]) == []


def test_a_lease_that_expired_with_nobody_taking_it_is_renewed_by_the_batch(bot, fake_telegram):
    import datetime

    from bot.lease import LEASE_NAME
    from models.base import utcnow
    from models.jobs import JobLeader

    JobLeader.update(expires_at=utcnow() - datetime.timedelta(seconds=1)).where(JobLeader.name == LEASE_NAME).execute()
    fake_telegram.send_message(ANN, "/start")
    assert bot.drain() == [APPLIED]
    lease = JobLeader.get(JobLeader.name == LEASE_NAME)
    assert lease.leader_id == bot.lease.holder_id and lease.expires_at > utcnow()
    assert not bot.lease.lost.is_set()


def test_a_write_a_handler_deferred_that_fails_fails_its_own_update_not_the_next(bot, fake_telegram, monkeypatch):
    from bot.handlers import fallback
    from models.base import utcnow
    from models.transactions import execute_all

    first = fake_telegram.send_message(ANN, "/start")

    def deferring_a_bad_write(message, context):
        # On PostgreSQL the write waits to go out with the next statement (models/transactions.py).
        execute_all([("INSERT INTO bot_updates (update_id, kind, applied_at) VALUES (%s, %s, %s)",
                      [first["update_id"], "message", utcnow()])])  # fmt: skip
        context.send(message.chat.id, "never sent")

    monkeypatch.setattr(fallback, "on_unknown_command", deferring_a_bad_write)
    fake_telegram.send_message(ANN, "/frobnicate")
    third = fake_telegram.send_message(BOB, "/start")
    assert bot.drain() == [APPLIED, FAILED, APPLIED]
    assert sorted(row.update_id for row in BotUpdate.select()) == [first["update_id"], third["update_id"]]
    assert Customer.select().count() == 2
    assert "never sent" not in [message["text"] for message in fake_telegram.bot_messages(ANN["id"])]


def test_a_returning_customer_who_changed_their_name_is_greeted_with_the_new_one(bot, fake_telegram):
    fake_telegram.send_message(BOB, "/start")
    fake_telegram.send_message({**BOB, "first_name": "Robert"}, "/start")
    assert bot.drain() == [APPLIED, APPLIED]
    assert fake_telegram.bot_messages(BOB["id"])[-1]["text"].startswith("Welcome back, Robert!")
    assert Customer.get(Customer.telegram_id == BOB["id"]).display_name == "Robert"


BIDI_CONTROLS = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"


def test_bidirectional_controls_in_a_name_never_reach_the_greeting(bot, fake_telegram):
    eve = {"id": 503, "first_name": "\u202eEve" + BIDI_CONTROLS, "last_name": "\u2067Lee\u2069", "language_code": "en"}
    fake_telegram.send_message(eve, "/start")
    fake_telegram.send_message(eve, "/start")
    assert bot.drain() == [APPLIED, APPLIED]
    first, second = (message["text"] for message in fake_telegram.bot_messages(eve["id"]))
    assert first.startswith("Welcome, Eve Lee! ") and second.startswith("Welcome back, Eve Lee!")
    assert not set(first + second) & set(BIDI_CONTROLS)


@contextlib.contextmanager
def update_records_failing(backend):
    """Writing an update's id fails: on PostgreSQL at the commit, after every write of the update's effect
    (a deferred constraint trigger); on SQLite, which has none, when the id is inserted."""
    if backend == "sqlite":
        made = ["CREATE TRIGGER refuse_update_record BEFORE INSERT ON bot_updates "
                "BEGIN SELECT RAISE(ABORT, 'update record refused'); END"]  # fmt: skip
        dropped = ["DROP TRIGGER refuse_update_record"]
    else:
        made = [
            "CREATE FUNCTION refuse_update_record() RETURNS trigger LANGUAGE plpgsql "
            "AS $$ BEGIN RAISE EXCEPTION 'update record refused'; END $$",
            "CREATE CONSTRAINT TRIGGER refuse_update_record AFTER INSERT ON bot_updates "
            "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION refuse_update_record()",
        ]
        dropped = ["DROP TRIGGER refuse_update_record ON bot_updates", "DROP FUNCTION refuse_update_record()"]
    for sql in made:
        db.execute_sql(sql)
    try:
        yield
    finally:
        for sql in dropped:
            db.execute_sql(sql)


def test_an_update_whose_id_cannot_be_recorded_keeps_nothing_of_its_effect(bot, fake_telegram, backend):
    """The id and the effect commit together: an effect committed on its own, with the id recorded in a
    transaction after it, would leave the customer behind here."""
    before = row_counts()
    update = fake_telegram.send_message(ANN, "/start")
    with update_records_failing(backend):
        assert bot.drain() == [FAILED]
    assert row_counts() == before
    assert fake_telegram.bot_messages(ANN["id"])[-1]["text"].startswith("У нас что-то пошло не так")
    fake_telegram.discard_pending()
    bot.offset = None
    fake_telegram.inject(update)  # delivered again: nothing says it was applied
    assert bot.drain() == [APPLIED]
    assert Customer.select().where(Customer.telegram_id == ANN["id"]).count() == 1
