"""SPEC 13.11: a bought gift gives its buyer a code (stored hashed, shown once), books the sale, gives the buyer
no access; another customer activates the code later; a replayed payment makes no second code."""

import json

import pytest

from commerce import codes, gift_purchase, ledger
from commerce.activations import CODE_USED_UP, ActivationRejected, activate_gift_card
from commerce.checkout import GIFT_UNDELIVERABLE, CheckoutRejected, checkout
from commerce.orders import create_order
from commerce.settlement import settle_order
from models.catalogue import GiftCard
from models.commerce import Order
from models.fulfillment import Entitlement, FulfillmentOperation
from models.ledger import LedgerEntry, LedgerTransaction
from models.ops import CustomerNotice, OperatorNotice, OutboxEvent
from models.payments import ProviderWebhookEvent
from ops import sealing
from tests.support import commerce, sales
from tests.support.shop import PUBLIC_URL, rub_plan, settle_deliveries

pytestmark = pytest.mark.usefixtures("ledger_invariant")


def legs(order_id):
    rows = (
        LedgerEntry.select(LedgerEntry, LedgerTransaction)
        .join(LedgerTransaction)
        .where(LedgerTransaction.order == order_id)
    )
    return {entry.account.name: entry.amount_minor for entry in rows}


def delivered_code(order_id):
    """The code the buyer's notice carries (unsealed as the bot reads it)."""
    notice = CustomerNotice.get(CustomerNotice.kind == gift_purchase.NOTICE_GIFT_CODE)
    assert notice.dedupe_key == f"order:{order_id}"
    return notice.secret


def test_a_gift_paid_at_a_provider_issues_one_hashed_code_and_gives_the_buyer_no_access(database, data_key):
    buyer, plan = sales.customer(), rub_plan()
    order, settlement, _ = sales.paid_order(buyer, plan, kind="gift")

    assert (settlement.entitlement_id, settlement.operation_id) == (None, None)
    assert Order.get_by_id(order.id).status == "fulfilled"
    assert Entitlement.select().count() == 0 and FulfillmentOperation.select().count() == 0
    assert legs(order.id) == {"provider_clearing:yookassa": -19900, "revenue": 19900}
    (card,) = GiftCard.select()
    assert (card.purchase_order_id, card.plan_id, card.status) == (order.id, plan.id, "active")
    assert (card.expires_at - Order.get_by_id(order.id).paid_at).days == gift_purchase.GIFT_CARD_VALIDITY_DAYS

    code = delivered_code(order.id)
    assert card.code_hash == codes.code_hash(code) and len(codes.normalise(code)) == codes.CODE_LENGTH
    raw = CustomerNotice.select(CustomerNotice.secret).tuples().get()[0]
    assert raw.text.startswith("v1:") and codes.normalise(code) not in codes.normalise(raw.text)
    notice = CustomerNotice.get()
    assert notice.customer_id == buyer.id and code not in notice.payload
    assert json.loads(notice.payload) == {
        "orderId": order.id, "giftCardId": card.id, "planId": plan.id, "periodEnd": card.expires_at.isoformat(),
    }  # fmt: skip
    (event,) = OutboxEvent.select().where(OutboxEvent.topic == "gift.purchased")
    assert json.loads(event.payload)["giftCardId"] == card.id and code not in event.payload


def test_another_customer_activates_the_bought_code_once_and_the_buyer_still_has_nothing(database, data_key):
    buyer, friend, plan = sales.customer(), sales.customer("Bob", "bob"), rub_plan()
    order, _, _ = sales.paid_order(buyer, plan, kind="gift")
    code = delivered_code(order.id)

    activation = activate_gift_card(friend.id, code)
    entitlement = Entitlement.get_by_id(activation.entitlement_id)
    assert entitlement.plan_id == plan.id and Order.get_by_id(activation.order_id).customer_id == friend.id
    assert FulfillmentOperation.get_by_id(activation.operation_id).idempotency_key == (
        f"gift:{activation.order_id}:fulfill"
    )
    card = GiftCard.get()
    assert (card.status, card.redeemed_by_id, card.redemption_order_id) == ("redeemed", friend.id, activation.order_id)
    assert legs(activation.order_id) == {}  # the money moved when the gift was bought
    assert Entitlement.select().join(Order).where(Order.customer == buyer.id).count() == 0
    with pytest.raises(ActivationRejected) as again:
        activate_gift_card(buyer.id, code)
    assert again.value.code == CODE_USED_UP and Entitlement.select().count() == 1


def test_settling_a_bought_gift_again_returns_the_first_settlement_and_makes_no_second_code(database, data_key):
    order, first, _ = sales.paid_order(sales.customer(), rub_plan(), kind="gift")
    for path in ("provider_webhook", "provider_poll", "provider_webhook"):
        again = settle_order(order.id, path, provider="yookassa")
        assert again.already_settled and (again.order_id, again.entitlement_id) == (first.order_id, None)
    assert GiftCard.select().count() == 1 and CustomerNotice.select().count() == 1
    assert (
        LedgerTransaction.select().count() == 1
        and OutboxEvent.select().where(OutboxEvent.topic == "gift.purchased").count() == 1
    )


def test_a_gift_bought_from_the_wallet_charges_it_and_issues_the_code(database, data_key):
    buyer, plan = sales.customer(), rub_plan()
    sales.topped_up(buyer, 50000)
    order = create_order(buyer.id, "gift", "RUB", plan_id=plan.id)
    settle_order(order.id, "wallet")
    assert legs(order.id) == {f"customer_wallet:{buyer.id}": -19900, "revenue": 19900}
    assert GiftCard.get().purchase_order_id == order.id and Entitlement.select().count() == 0
    assert codes.find_gift_card(delivered_code(order.id)).id == GiftCard.get().id


def test_without_a_data_key_the_card_is_issued_and_an_operator_is_told_the_code_was_not_kept(database):
    assert not sealing.available()
    order, _, _ = sales.paid_order(sales.customer(), rub_plan(), kind="gift")
    card = GiftCard.get()
    notice = CustomerNotice.get()
    assert card.purchase_order_id == order.id and notice.secret is None
    (operator,) = OperatorNotice.select().where(OperatorNotice.kind == gift_purchase.NOTICE_GIFT_CODE_UNDELIVERED)
    assert operator.dedupe_key == f"gift_card:{card.id}" and Order.get_by_id(order.id).status == "fulfilled"


def test_a_gift_is_not_sold_to_a_buyer_its_code_could_never_reach_and_nothing_is_written(shop, data_key):
    plan = rub_plan()
    without_telegram = commerce.customer()  # a scripted shop's customer, no Telegram account
    assert without_telegram.telegram_id is None
    with pytest.raises(CheckoutRejected) as refused:
        checkout(shop.providers, PUBLIC_URL, without_telegram.id, "gift", "yookassa", "RUB", plan_id=plan.id, key="g")
    assert refused.value.code == GIFT_UNDELIVERABLE
    assert Order.select().count() == 0 and not shop.yookassa.payments()


def test_without_a_data_key_no_gift_is_sold_at_checkout(shop):
    assert not sealing.available()
    with pytest.raises(CheckoutRejected) as refused:
        checkout(shop.providers, PUBLIC_URL, sales.customer().id, "gift", "yookassa", "RUB", plan_id=rub_plan().id)
    assert refused.value.code == GIFT_UNDELIVERABLE and Order.select().count() == 0


def test_a_gift_checked_out_at_yookassa_settles_by_its_webhook_once_however_often_it_is_delivered(shop, data_key):
    buyer, plan = sales.customer(), rub_plan()
    result = checkout(shop.providers, PUBLIC_URL, buyer.id, "gift", "yookassa", "RUB", plan_id=plan.id, key="g")
    payment_id = Order.get_by_id(result.order_id).payment_intents.get().provider_payment_id
    shop.yookassa.set_faults(webhook_duplicate_rate=1.0)
    shop.yookassa.succeed(payment_id)  # delivered twice
    shop.yookassa.clear_faults()
    for _ in range(3):  # the same notification again: a replay
        shop.yookassa._deliver(f"payment.succeeded:{payment_id}", shop.yookassa.notification(payment_id), {
            "Content-Type": "application/json"})  # fmt: skip
    assert ProviderWebhookEvent.select().count() == 5
    assert settle_deliveries() == ["settled"] + ["replayed"] * 4  # all five came before the first was applied
    assert Order.get_by_id(result.order_id).status == "fulfilled"
    assert GiftCard.select().count() == 1 and CustomerNotice.select().count() == 1
    assert legs(result.order_id) == {"provider_clearing:yookassa": -19900, "revenue": 19900}
    assert Entitlement.select().count() == 0
    friend = sales.customer("Bob", "bob")
    assert activate_gift_card(friend.id, delivered_code(result.order_id)).entitlement_id is not None


def test_a_zero_price_gift_order_settled_as_a_gift_is_still_an_activation_not_a_purchase(database, data_key):
    customer, plan = commerce.customer(), rub_plan()
    free = commerce.order(customer, plan, operation="gift", amount=0, provider=None)
    settlement = settle_order(free.id, "gift")
    assert settlement.entitlement_id is not None and GiftCard.select().count() == 0


def test_a_full_refund_of_a_bought_gift_expires_its_code_if_it_is_not_redeemed_yet(database, data_key):
    from commerce.activations import CODE_EXPIRED
    from commerce.refunds import refund_order

    buyer, plan = sales.customer(), rub_plan()
    sales.topped_up(buyer, 50000)
    order = create_order(buyer.id, "gift", "RUB", plan_id=plan.id)
    settle_order(order.id, "wallet")
    code = delivered_code(order.id)
    refund_order(order.id)
    assert Order.get_by_id(order.id).status == "refunded" and GiftCard.get().status == "expired"
    with pytest.raises(ActivationRejected) as refused:
        activate_gift_card(sales.customer("Bob", "bob").id, code)
    assert refused.value.code == CODE_EXPIRED and Entitlement.select().count() == 0


def test_a_full_refund_of_a_redeemed_gift_revokes_the_recipients_access_and_tells_them(database, data_key):
    from commerce.refunds import NOTICE_GIFT_REVOKED, refund_order
    from tests.support.shop import fulfil

    buyer, friend, plan = sales.customer(), sales.customer("Bob", "bob"), rub_plan()
    sales.topped_up(buyer, 50000)
    order = create_order(buyer.id, "gift", "RUB", plan_id=plan.id)
    settle_order(order.id, "wallet")
    entitlement_id = activate_gift_card(friend.id, delivered_code(order.id)).entitlement_id
    fulfil()  # the recipient's user is on the panel
    redemption = Entitlement.get_by_id(entitlement_id).order_id

    refund_order(order.id)
    assert [Order.get_by_id(o).status for o in (order.id, redemption)] == ["refunded", "refunded"]
    assert ledger.balance(buyer.id, "RUB") == 50000  # the buyer's money is back in the wallet
    (disable,) = FulfillmentOperation.select().where(
        FulfillmentOperation.entitlement == entitlement_id, FulfillmentOperation.operation == "disable"
    )
    assert disable.idempotency_key == f"refund:{redemption}:disable"
    (told,) = CustomerNotice.select().where(CustomerNotice.kind == NOTICE_GIFT_REVOKED)
    assert told.customer_id == friend.id and json.loads(told.payload) == {"orderId": redemption, "planId": plan.id}


def test_a_partial_refund_of_a_bought_gift_leaves_its_code_valid(database, data_key):
    from commerce.refunds import refund_order

    buyer = sales.customer()
    sales.topped_up(buyer, 50000)
    order = create_order(buyer.id, "gift", "RUB", plan_id=rub_plan().id)
    settle_order(order.id, "wallet")
    refund_order(order.id, amount_minor=100)
    assert GiftCard.get().status == "active"
    assert activate_gift_card(sales.customer("Bob", "bob").id, delivered_code(order.id)).entitlement_id
