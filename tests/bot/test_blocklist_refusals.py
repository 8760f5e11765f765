"""SPEC 15.8: a blocklist source answering 304, then 500, then a new list: the last good list stays in
force until the new one comes, and whoever it lists is refused in the bot and at checkout (403)."""

from bot import keyboards
from bot.updates import APPLIED, REFUSED
from commerce.passes import lifecycle_sweep
from fakes.blocklist_server import FakeBlocklist
from models.commerce import Customer, Order
from ops import blocklists
from tests.support.botruns import InProcessBot, row_counts
from tests.support.shop import rub_plan

ANN = {"id": 701, "first_name": "Ann", "language_code": "en"}
BOB = {"id": 702, "first_name": "Bob", "language_code": "en"}
CAROL = {"id": 703, "first_name": "Carol", "language_code": "en"}
BLOCKED_TEXT = "Your account is blocked."


def blocked():
    return sorted(c.telegram_id for c in Customer.select().where(Customer.blocked == True))  # noqa: E712


def checkout(shop, user, plan, request_id):
    customer = Customer.get(Customer.telegram_id == user["id"])
    return shop.checkout(
        customerId=customer.id, kind="purchase", provider="yookassa", currency="RUB", planId=plan.id,
        requestId=request_id,
    )  # fmt: skip


def refused_in_the_bot(bot, fake, user, plan):
    before = row_counts()
    fake.press(user, keyboards.data(keyboards.BUY))
    fake.press(user, keyboards.data(keyboards.PAY, f"{plan.id}:yookassa:RUB"))
    outcomes = bot.drain()
    answers = list(fake.callback_answers().values())[-2:]
    return (
        outcomes == [REFUSED, REFUSED]
        and row_counts() == before
        and all(answer["text"].startswith(BLOCKED_TEXT) for answer in answers)
    )


def test_a_source_answering_304_then_500_then_a_new_list_keeps_the_last_good_one_and_its_customers_are_refused(
    database, telebot, fake_telegram, bot_services, data_key
):
    shop, plan = bot_services, rub_plan()
    bot = InProcessBot(telebot, fake_telegram)
    for user in (ANN, BOB):
        fake_telegram.send_message(user, "/start")
    assert bot.drain() == [APPLIED, APPLIED]

    with FakeBlocklist([ANN["id"]]) as source_server:
        source = blocklists.add_source(source_server.url, None, "operator:ann", "fraud ring")
        lifecycle_sweep.sweep()  # 200: the first list
        assert blocked() == [ANN["id"]]

        lifecycle_sweep.sweep()  # 304: unchanged
        source_server.script("500")
        lifecycle_sweep.sweep()  # 500: the last good list stays
        assert [r["if_none_match"] for r in source_server.requests] == [None, source_server.etag, source_server.etag]
        assert blocklists.BlocklistSource.get_by_id(source.id).status == "failed"
        assert blocked() == [ANN["id"]]
        assert refused_in_the_bot(bot, fake_telegram, ANN, plan)
        refused = checkout(shop, ANN, plan, "ann-1")
        assert (refused.status_code, refused.json()["code"]) == (403, "customer_blocked")
        assert Order.select().count() == 0

        source_server.set_list([BOB["id"], CAROL["id"]])
        lifecycle_sweep.sweep()  # the new list
        assert blocked() == [BOB["id"]]

    assert refused_in_the_bot(bot, fake_telegram, BOB, plan)
    assert checkout(shop, BOB, plan, "bob-1").status_code == 403
    assert checkout(shop, ANN, plan, "ann-2").status_code == 200  # no list names Ann any more
    fake_telegram.send_message(CAROL, "/start")  # listed before she ever wrote: she starts blocked
    bot.drain()
    assert blocked() == [BOB["id"], CAROL["id"]]
    assert checkout(shop, CAROL, plan, "carol-1").status_code == 403
