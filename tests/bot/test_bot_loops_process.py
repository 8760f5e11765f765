"""SPEC 6, 14.6 with real bot processes: the bot runs its loops — lifecycle notices, campaign delivery, support reply
push — and a bot SIGKILLed in the middle of a campaign leaves nobody with the text twice."""

import datetime

import pytest

from bot.campaigns import INTERRUPTED, SENDERS
from bot.lifecycle import EXPIRING_3D
from models.campaigns import Campaign, CampaignRecipient
from models.ops import CustomerNotice
from models.support import SupportMessage
from ops import campaign_expansion, support
from ops.campaigns import create_campaign, progress
from tests.bot.test_campaign_delivery import TEXT, customers
from tests.bot.test_lifecycle_notices import subscribed
from tests.support.processes import wait_for

pytestmark = [pytest.mark.processes, pytest.mark.usefixtures("ledger_invariant")]

DAY = datetime.timedelta(days=1)


def campaign_messages(fake, chats):
    return {chat: sum(1 for m in fake.bot_messages(chat) if m["text"] == TEXT) for chat in chats}


def test_the_bot_process_queues_lifecycle_notices_delivers_campaigns_and_pushes_support_replies(bots, fake_telegram):
    period = subscribed(ends_in=2 * DAY)
    chats = customers(5)
    fake_telegram.block(chats[4])
    campaign = create_campaign("announcement", TEXT, "alice", "news")
    campaign_expansion.run()  # the worker's pass writes its recipients
    ticket, _ = support.customer_writes(f"c{chats[0]}", chats[0], "help")
    reply = support.operator_replies(ticket.id, "alice", "Here you go.", "answering")

    bot = bots.start()
    bots.wait_polling(bot)
    wait_for(lambda: Campaign.get_by_id(campaign.id).status == "done", 30, message="the campaign delivered")
    wait_for(lambda: SupportMessage.get_by_id(reply.id).push_status == "sent", 30, message="the reply pushed")
    wait_for(lambda: CustomerNotice.select().where(CustomerNotice.kind == EXPIRING_3D).exists(), 30,
             message="the lifecycle notice queued")  # fmt: skip
    assert CustomerNotice.get(CustomerNotice.kind == EXPIRING_3D).customer_id == period.subscription.customer_id
    assert campaign_messages(fake_telegram, chats) == {**dict.fromkeys(chats[:4], 1), chats[4]: 0}
    assert progress(campaign.id)["unreachable"] == 1
    assert [m["text"] for m in fake_telegram.bot_messages(chats[0]) if m["text"].startswith("Support")] == [
        f"Support, ticket #{ticket.id}:\n\nHere you go."
    ]


def test_a_bot_killed_mid_campaign_leaves_nobody_with_the_text_twice(bots, fake_telegram):
    chats = customers(300)
    campaign = create_campaign("campaign", TEXT, "alice", "sale")
    campaign_expansion.run()  # the worker's pass writes its recipients
    first = bots.start({"APP_TELEGRAM_DELIVERY_RATE": "50"})
    bots.wait_polling(first)
    wait_for(lambda: len(fake_telegram.accepted("sendMessage")) >= 80, 60, interval=0.05, message="80 sent")
    first.kill()
    first.wait()

    second = bots.start({"APP_TELEGRAM_DELIVERY_RATE": "50"})
    bots.wait_polling(second, timeout=40)
    wait_for(lambda: Campaign.get_by_id(campaign.id).status == "done", 60, message="the campaign finished")
    counts = campaign_messages(fake_telegram, chats)
    assert max(counts.values()) == 1  # nobody twice
    delivery = progress(campaign.id)
    interrupted = CampaignRecipient.select().where(CampaignRecipient.error_code == INTERRUPTED).count()
    assert delivery["sent"] + delivery["failed"] == 300 and delivery["failed"] == interrupted
    assert interrupted <= SENDERS  # at most the calls in flight when the bot died
    assert sum(counts.values()) >= delivery["sent"]


def test_with_a_required_channel_the_bot_process_re_verifies_the_stored_members(bots, fake_telegram):
    from bot.membership import RECHECK_S
    from models.base import utcnow
    from models.bot import BotChannelMember
    from models.commerce import Customer

    channel = "@omniflow_news"
    stale = utcnow() - datetime.timedelta(seconds=RECHECK_S + 60)
    stayed = Customer.create(telegram_id=880_001, display_name="stays")
    left = Customer.create(telegram_id=880_002, display_name="leaves")
    for customer in (stayed, left):
        BotChannelMember.create(customer=customer.id, channel=channel, member=True, checked_at=stale)
    fake_telegram.set_member(channel, stayed.telegram_id, "member")

    bot = bots.start({"APP_TELEGRAM_REQUIRED_CHANNEL": channel})
    bots.wait_polling(bot)
    wait_for(lambda: not BotChannelMember.get_by_id(left.id).member, 30, message="the leaver stored as gone")
    assert BotChannelMember.get_by_id(stayed.id).member and BotChannelMember.get_by_id(stayed.id).checked_at > stale
    assert BotChannelMember.get_by_id(left.id).left_at is not None
    assert "channel membership off" not in bots.log(bot)
