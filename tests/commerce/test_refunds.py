"""SPEC 13.10: a refund reverses the ledger in the order's own transaction and goes back where
the money was paid — the wallet, YooKassa's refund API (fake YooKassa, a real server), Telegram's
refundStarPayment (fake Bot API, a real server) — or, for Crypto Pay, to the wallet (manual on request); the
provider call is a durable job that never refunds twice."""

import json

import pytest

import omniflow
from commerce import ledger, providers
from commerce.checkout import checkout
from commerce.orders import create_order
from commerce.payments import poll_intent
from commerce.provider_refund import NOTICE_REFUND_FAILED
from commerce.refunds import (
    NOTICE_REFUND_MANUAL,
    PARTIAL_REFUND_UNSUPPORTED,
    REFUND_EXCEEDS_WALLET,
    refund_order,
)
from commerce.settlement import SettlementRejected, settle_order
from commerce.stars import settle_stars_payment
from fakes.telegram import FakeTelegram
from integrations.payments.stars import StarsRefunds
from jobs import UNIQUE_WHILE_ACTIVE, huey
from models.base import db
from models.commerce import Order
from models.jobs import Job
from models.ledger import LedgerEntry, LedgerTransaction
from models.ops import OperatorNotice
from models.payments import PaymentIntent, Refund
from tests.support import commerce, sales
from tests.support.direct import make_due, run_all
from tests.support.shop import PUBLIC_URL, rub_plan

pytestmark = pytest.mark.usefixtures("ledger_invariant")

TELEGRAM_TOKEN = "424242:AAstarsRefundTestToken0123456789"


def paid_at(shop, provider="yookassa", key="k"):
    """An order paid at a fake provider and settled by the poll (its webhook lost). Returns (order, intent)."""
    buyer = commerce.customer()
    result = checkout(shop.providers, PUBLIC_URL, buyer.id, "purchase", provider, "RUB", plan_id=rub_plan().id, key=key)
    intent = PaymentIntent.get(PaymentIntent.order == result.order_id)
    fake = shop.fake(provider)
    fake.set_faults(webhook_lost_rate=1.0)
    if provider == "yookassa":
        fake.succeed(intent.provider_payment_id)
    else:
        fake.pay(intent.provider_payment_id)
    assert poll_intent(intent).outcome == "settled"
    fake.clear_faults()
    return Order.get_by_id(result.order_id), PaymentIntent.get_by_id(intent.id)


def entries(transaction_id):
    return sorted(
        (entry.account.name, entry.amount_minor)
        for entry in LedgerEntry.select().where(LedgerEntry.transaction == transaction_id)
    )


def refund_jobs():
    return list(Job.select().where(Job.kind == "provider_refund"))


def run_refund_jobs():
    ran = run_all()
    return [job for job in refund_jobs() if job.id in ran]


def notices(kind):
    return list(OperatorNotice.select().where(OperatorNotice.kind == kind))


# -- the ledger ----------------------------------------------------------------------------------


def test_a_wallet_payment_refunded_in_full_goes_back_to_the_wallet_in_the_refunds_transaction(database):
    buyer = sales.customer()
    sales.topped_up(buyer, 50000)
    order = create_order(buyer.id, "purchase", "RUB", plan_id=sales.plan().id)
    settle_order(order.id, "wallet")
    assert ledger.balance(buyer.id, "RUB") == 50000 - 29900

    refunded = refund_order(order.id)

    assert (refunded.status, refunded.refunded_amount_minor) == ("refunded", 29900)
    assert ledger.balance(buyer.id, "RUB") == 50000
    refund = Refund.get(Refund.order == order.id)
    assert (refund.destination, refund.status, refund.amount_minor) == ("wallet", "succeeded", 29900)
    reversal = LedgerTransaction.get_by_id(refund.ledger_transaction_id)
    assert (reversal.kind, reversal.idempotency_key, reversal.order_id) == ("refund", f"refund:{refund.id}", order.id)
    assert entries(reversal.id) == sorted([(ledger.wallet(buyer.id), 29900), ("revenue", -29900)])
    assert refund_jobs() == []  # nothing to call


def test_a_partial_refund_of_a_wallet_payment_moves_exactly_that_part_back_to_the_wallet(database):
    buyer = sales.customer()
    sales.topped_up(buyer, 50000)
    order = create_order(buyer.id, "purchase", "RUB", plan_id=sales.plan().id)
    settle_order(order.id, "wallet")

    part = refund_order(order.id, 10000)

    assert (part.status, part.refunded_amount_minor) == ("partially_refunded", 10000)
    assert ledger.balance(buyer.id, "RUB") == 50000 - 29900 + 10000
    refund = Refund.get(Refund.order == order.id)
    assert (refund.destination, refund.status, refund.amount_minor) == ("wallet", "succeeded", 10000)
    assert entries(refund.ledger_transaction_id) == sorted([(ledger.wallet(buyer.id), 10000), ("revenue", -10000)])
    assert refund_jobs() == []


def test_a_partial_refund_of_a_provider_payment_moves_that_amount_back_to_the_providers_clearing(database):
    buyer = sales.customer()
    order, _, _ = sales.paid_order(buyer, sales.plan())

    part = refund_order(order.id, 10000)

    assert (part.status, part.refunded_amount_minor) == ("partially_refunded", 10000)
    refund = Refund.get(Refund.order == order.id)
    assert entries(refund.ledger_transaction_id) == sorted(
        [("provider_clearing:yookassa", 10000), ("revenue", -10000)]
    )
    assert (refund.destination, refund.status) == ("provider", "pending")
    assert [job.args_dict for job in refund_jobs()] == [{"refundId": refund.id}]


def test_a_provider_payment_can_be_refunded_to_the_wallet_instead(database):
    buyer = sales.customer()
    order, _, _ = sales.paid_order(buyer, sales.plan(), provider="cryptobot")

    refund_order(order.id, 5000, to="wallet")

    assert ledger.balance(buyer.id, "RUB") == 5000
    refund = Refund.get(Refund.order == order.id)
    assert (refund.destination, refund.status) == ("wallet", "succeeded")
    assert entries(refund.ledger_transaction_id) == sorted([(ledger.wallet(buyer.id), 5000), ("revenue", -5000)])
    assert refund_jobs() == [] and notices(NOTICE_REFUND_MANUAL) == []


def test_a_topup_whose_wallet_spent_the_money_is_refused_and_nothing_is_written(database):
    buyer = sales.customer()
    topup = sales.topped_up(buyer, 30000)
    order = create_order(buyer.id, "purchase", "RUB", plan_id=sales.plan().id)
    settle_order(order.id, "wallet")  # 29 900 of the 30 000 spent
    transactions = LedgerTransaction.select().count()

    with pytest.raises(SettlementRejected) as refused:
        refund_order(topup.id)

    assert refused.value.code == REFUND_EXCEEDS_WALLET
    assert Order.get_by_id(topup.id).status == "fulfilled"
    assert (Refund.select().count(), LedgerTransaction.select().count()) == (0, transactions)
    refund_order(topup.id, 100)  # what the wallet still holds comes back
    assert ledger.balance(buyer.id, "RUB") == 0


def test_a_crypto_pay_refund_goes_to_the_wallet_as_crypto_pay_has_no_refund_api(database):
    buyer = sales.customer()
    order, _, _ = sales.paid_order(buyer, sales.plan(), provider="cryptobot")

    refund_order(order.id)

    refund = Refund.get(Refund.order == order.id)
    assert (refund.destination, refund.status, refund.provider) == ("wallet", "succeeded", "cryptobot")
    assert ledger.balance(buyer.id, "RUB") == 29900
    assert notices(NOTICE_REFUND_MANUAL) == [] and refund_jobs() == []


def test_a_crypto_pay_refund_asked_back_to_the_provider_is_manual_with_an_operator_notice(database):
    buyer = sales.customer()
    order, _, _ = sales.paid_order(buyer, sales.plan(), provider="cryptobot")

    refund_order(order.id, to="provider")

    refund = Refund.get(Refund.order == order.id)
    assert (refund.destination, refund.status, refund.provider) == ("manual", "manual", "cryptobot")
    assert entries(refund.ledger_transaction_id) == sorted(
        [("provider_clearing:cryptobot", 29900), ("revenue", -29900)]
    )
    (notice,) = notices(NOTICE_REFUND_MANUAL)
    assert notice.dedupe_key == f"refund:{refund.id}"
    assert refund_jobs() == []


def test_a_refund_refused_writes_nothing_not_even_its_status(database):
    buyer = sales.customer()
    order, _, _ = sales.paid_order(buyer, sales.plan(), provider="stars", currency="XTR")

    with pytest.raises(SettlementRejected) as refused:
        refund_order(order.id, 100)  # Telegram refunds a Stars charge whole

    assert refused.value.code == PARTIAL_REFUND_UNSUPPORTED
    assert (Order.get_by_id(order.id).status, Refund.select().count()) == ("paid", 0)
    assert LedgerTransaction.select().where(LedgerTransaction.kind == "refund").count() == 0


def test_a_refund_its_caller_rolls_back_leaves_no_job_no_ledger_and_no_refund(database):
    buyer = sales.customer()
    order, _, _ = sales.paid_order(buyer, sales.plan())
    transactions = LedgerTransaction.select().count()

    with pytest.raises(RuntimeError):
        with db.atomic():
            refund_order(order.id)
            raise RuntimeError("the caller's audit failed")

    assert Order.get_by_id(order.id).status == "paid"
    assert (Refund.select().count(), LedgerTransaction.select().count(), refund_jobs()) == (0, transactions, [])


def test_the_refund_job_is_declared_by_every_worker_and_unique_by_its_refund():
    assert "commerce.provider_refund" in omniflow.JOB_KIND_MODULES
    spec = huey.kinds.get("provider_refund")
    assert (spec.unique_states, spec.max_attempts) == (UNIQUE_WHILE_ACTIVE, 12)
    assert spec.unique_key({"refundId": 7}) == spec.unique_key({"refundId": 7}) != spec.unique_key({"refundId": 8})


# -- YooKassa ------------------------------------------------------------------------------------


def test_a_yookassa_refund_goes_through_the_api_and_its_state_is_recorded(shop):
    order, intent = paid_at(shop)

    refund_order(order.id, 5000)
    (job,) = run_refund_jobs()

    refund = Refund.get(Refund.order == order.id)
    assert (refund.status, refund.last_error_code) == ("succeeded", None)
    assert refund.provider_refund_id is not None and refund.completed_at is not None
    at_provider = shop.providers["yookassa"].fetch_payment(intent.provider_payment_id)
    assert at_provider.refunded_minor == 5000
    assert Job.get_by_id(job.id).state == "completed"


def test_a_yookassa_refund_retried_after_a_lost_answer_never_refunds_twice(shop):
    order, intent = paid_at(shop)
    refund_order(order.id)
    # The first call is done at YooKassa but its answer never arrives (the worker might as well have crashed).
    # Its refund.succeeded is lost too: here only the job's retry can finish it (test_refund_notifications.py).
    shop.yookassa.set_faults(timeout_rate=1.0, routes=["POST /v3/refunds"], webhook_lost_rate=1.0)

    run_refund_jobs()
    refund = Refund.get(Refund.order == order.id)
    assert (refund.status, refund.last_error_code) == ("pending", "provider_unavailable")
    (job,) = refund_jobs()
    assert Job.get_by_id(job.id).state == "retryable"

    shop.yookassa.clear_faults()
    make_due(job.id)
    run_refund_jobs()

    refund = Refund.get(Refund.order == order.id)
    assert refund.status == "succeeded"
    assert shop.yookassa.stats()["refunds"] == 1
    assert shop.providers["yookassa"].fetch_payment(intent.provider_payment_id).refunded_minor == order.amount_minor


def test_a_refund_yookassa_refuses_fails_with_its_code_and_one_notice(shop):
    order, intent = paid_at(shop)
    refund_order(order.id, 1000)
    # Someone refunded the whole payment at YooKassa's dashboard: ours is now more than is left there.
    shop.providers["yookassa"].refund(
        payment_id=intent.provider_payment_id, amount_minor=order.amount_minor, currency="RUB", idempotence_key="x"
    )

    run_refund_jobs()

    refund = Refund.get(Refund.order == order.id)
    assert (refund.status, refund.last_error_code) == ("failed", "provider_rejected")
    (notice,) = notices(NOTICE_REFUND_FAILED)
    assert notice.dedupe_key == f"refund:{refund.id}"


def test_a_refund_yookassa_holds_pending_is_processing_and_polled_until_it_is_done(shop):
    order, _ = paid_at(shop)
    shop.yookassa.hold_refunds = True
    refund_order(order.id, 2000)

    run_refund_jobs()
    refund = Refund.get(Refund.order == order.id)
    assert (refund.status, refund.completed_at) == ("processing", None)
    (job,) = refund_jobs()
    snoozed = Job.get_by_id(job.id)
    assert (snoozed.state, snoozed.attempt) == ("scheduled", 0)  # snoozed: no attempt spent

    make_due(job.id)
    run_refund_jobs()  # still pending at YooKassa: asked again later
    assert Refund.get_by_id(refund.id).status == "processing"

    shop.yookassa.settle_refund(refund.provider_refund_id)
    make_due(job.id)
    run_refund_jobs()
    done = Refund.get_by_id(refund.id)
    assert (done.status, done.completed_at is not None) == ("succeeded", True)
    assert Job.get_by_id(job.id).state == "completed"


def test_a_refund_yookassa_cancels_after_accepting_it_fails_with_a_notice(shop):
    order, _ = paid_at(shop)
    shop.yookassa.hold_refunds = True
    refund_order(order.id, 2000)
    run_refund_jobs()
    refund = Refund.get(Refund.order == order.id)

    shop.yookassa.settle_refund(refund.provider_refund_id, succeed=False)
    make_due(refund_jobs()[0].id)
    run_refund_jobs()

    failed = Refund.get_by_id(refund.id)
    assert (failed.status, failed.last_error_code) == ("failed", "refund_canceled")
    assert len(notices(NOTICE_REFUND_FAILED)) == 1


# -- Telegram Stars ------------------------------------------------------------------------------


@pytest.fixture
def telegram():
    fake = FakeTelegram(token=TELEGRAM_TOKEN).start()
    providers.use_stars(StarsRefunds(TELEGRAM_TOKEN, fake.base_url, timeout=1.0))
    yield fake
    providers.use_stars(None)
    fake.stop()


def paid_with_stars(telegram):
    buyer = sales.customer()
    order = create_order(buyer.id, "purchase", "XTR", plan_id=sales.plan().id, provider="stars")
    charge = "stxrefund" + str(order.id)
    telegram.successful_payment(buyer.telegram_id, "XTR", order.amount_minor, f"order:{order.id}", charge_id=charge)
    assert settle_stars_payment(order.id, charge, order.amount_minor).outcome == "settled"
    return Order.get_by_id(order.id), buyer, charge


def test_a_stars_refund_calls_refund_star_payment_for_the_charge(database, telegram):
    order, buyer, charge = paid_with_stars(telegram)

    refund_order(order.id)
    run_refund_jobs()

    refund = Refund.get(Refund.order == order.id)
    assert (refund.destination, refund.status, refund.provider_refund_id) == ("provider", "succeeded", charge)
    calls = [call for call in telegram.accepted() if call["method"] == "refundStarPayment"]
    assert [call["params"]["telegram_payment_charge_id"] for call in calls] == [charge]
    assert entries(refund.ledger_transaction_id) == sorted([("provider_clearing:stars", 250), ("revenue", -250)])


def test_a_stars_refund_whose_answer_was_lost_is_recorded_once_the_retry_hears_it_was_done(database, telegram):
    order, buyer, charge = paid_with_stars(telegram)
    refund_order(order.id)
    telegram.set_fault("refundStarPayment", "slow", count=1, delay=3.0)  # done, answered after our deadline

    run_refund_jobs()
    assert Refund.get(Refund.order == order.id).status == "pending"
    (job,) = refund_jobs()
    make_due(job.id)
    run_refund_jobs()

    assert Refund.get(Refund.order == order.id).status == "succeeded"
    calls = [call for call in telegram.accepted() if call["method"] == "refundStarPayment"]
    assert len(calls) == 1  # the second call was answered CHARGE_ALREADY_REFUNDED: nothing paid twice


def test_the_customer_is_told_of_each_refund_where_the_money_goes_and_when_access_ends(database):
    from models.ops import CustomerNotice

    buyer = sales.customer()
    order, _, _ = sales.paid_order(buyer, sales.plan(), provider="cryptobot")
    refund_order(order.id, 100)  # in part: to the wallet (Crypto Pay has no refund API), access kept
    refund_order(order.id, to="provider")  # the rest, by hand at the provider: access ends

    told = [(n.customer_id, n.kind, json.loads(n.payload)) for n in CustomerNotice.select().order_by(CustomerNotice.id)]
    assert [(customer, kind) for customer, kind, _ in told if kind.startswith("order_refunded")] == [
        (buyer.id, "order_refunded_wallet"),
        (buyer.id, "order_refunded_full"),
    ]
    amounts = [payload["amountMinor"] for _, kind, payload in told if kind.startswith("order_refunded")]
    assert amounts == [100, 29800]
