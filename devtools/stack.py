"""Sample data for the development stack (`python omniflow.py dev-seed`), and the
wait that starts the stack's worker only once the fake panel answers
(`python omniflow.py dev-wait-panel`).

An operator to sign in with; plans priced in RUB, USD and Telegram Stars,
and a free 3-day trial plan (the bot's Free trial); a few customers with a
Telegram identity whose orders were paid at YooKassa, CryptoBot and with
Stars (the ledger's sale, the payment and the settlement together, so Home
shows revenue per currency and the worker provisions them on the fake
panel), one who topped up their wallet and bought from it; and one
operation whose desired state is corrupt, so System → Operations has a
failed operation to look at and retry; the first customer has an open
support ticket to answer from Support. A voucher (digital goods) is on sale
from the fake goods provider (APP_FAKE_GOODS_PORT), and the CryptoBot
customer has paid one: the stack's worker delivers it and the bot sends its
code (only with APP_DATA_ENCRYPTION_KEY, which dev.sh sets: the provider's
token is sealed with it). The wallet customer also holds a
daily plan that renews itself from the wallet: its period ends within the
renewal pass's day, so the stack's first passes renew it. The customer of
the sample YooKassa payment (devtools/sample_payment.py) has no order yet.
Seeding twice adds nothing.
"""

import time
import uuid

from commerce.catalogue import set_plan_price
from commerce.orders import create_order
from commerce.settlement import settle_order
from devtools.demo import monthly_plan
from devtools.sample_payment import SAMPLE_CUSTOMER
from models.base import db
from models.commerce import Customer, Order, Plan, Subscription
from models.fulfillment import FulfillmentOperation
from models.operators import Operator
from models.payments import PaymentIntent
from ops import sealing
from ops.operators import PERMISSIONS, create_operator
from ops.support import customer_writes

DEV_OPERATOR = "admin"
DEV_PASSWORD = "omniflow-dev-password"  # development only: the stack runs on 127.0.0.1
PAID_ORDERS = 5  # provisioned by the stack's worker; the corrupt one comes on top
PANEL_POLL_S = 0.2
MONTHLY_PRICES = {"RUB": 29900, "USD": 399, "XTR": 250}
UNLIMITED_PRICES = {"RUB": 59900, "USD": 799, "XTR": 500}
DAILY_PRICES = {"RUB": 1500}  # the wallet customer's auto-renewing plan
# (name, Telegram username, currency, provider) of the customers who paid at a provider.
PAID_AT_A_PROVIDER = (
    ("Anna Petrova", "anna_p", "RUB", "yookassa"),
    ("Ben Carter", "bencarter", "USD", "cryptobot"),
    ("Chen Wei", "chenwei", "XTR", "stars"),
)
WALLET_CUSTOMER = ("Dana Ivanova", "dana_iv")
TOPUP_MINOR = 100000  # 1 000.00 RUB
FIRST_TELEGRAM_ID = 100000001
GOODS_PRICES = {"RUB": 50000, "USD": 599}
DEFAULT_GOODS_PORT = 3040
SUPPORT_QUESTION = "Hello! Which app should I use on an iPhone?"  # the first customer's open ticket (Support)


def seed(password=DEV_PASSWORD):
    """Returns True when it seeded, False when the data was already there."""
    if Operator.get_or_none(Operator.username == DEV_OPERATOR) is not None:
        return False
    create_operator(DEV_OPERATOR, password, list(PERMISSIONS), actor="dev-seed")
    with db.atomic():
        plan = monthly_plan("dev-monthly", "Monthly, 100 GB, 3 devices")
        unlimited = Plan.create(code="dev-unlimited", name="Unlimited", duration_days=30, price_minor=999)
        Plan.create(  # what the bot's Free trial gives, once per customer
            code="dev-trial", name="Trial, 3 days", duration_days=3, traffic_allowance_bytes=5 << 30, price_minor=0,
            currency="RUB", trial=True,
        )  # fmt: skip
        daily = Plan.create(
            code="dev-daily", name="Daily, 5 GB", duration_days=1, traffic_allowance_bytes=5 << 30, price_minor=15
        )
        for priced, prices in ((plan, MONTHLY_PRICES), (unlimited, UNLIMITED_PRICES), (daily, DAILY_PRICES)):
            for currency, amount in prices.items():
                set_plan_price(priced, currency, amount)
    telegram_ids = iter(range(FIRST_TELEGRAM_ID, FIRST_TELEGRAM_ID + 100))
    for name, username, currency, provider in PAID_AT_A_PROVIDER:
        buyer = _customer(name, username, next(telegram_ids))
        _paid_at_a_provider(create_order(buyer.id, "purchase", currency, plan_id=plan.id, provider=provider))
    if sealing.available():
        _sell_a_voucher(Customer.get(Customer.telegram_username == PAID_AT_A_PROVIDER[1][1]))
    with db.atomic():
        customer_writes(
            Customer.get(Customer.telegram_username == PAID_AT_A_PROVIDER[0][1]).id,
            FIRST_TELEGRAM_ID,
            SUPPORT_QUESTION,
        )
    buyer = _customer(*WALLET_CUSTOMER, next(telegram_ids))
    _paid_at_a_provider(create_order(buyer.id, "topup", "RUB", amount_minor=TOPUP_MINOR, provider="yookassa"))
    settle_order(create_order(buyer.id, "purchase", "RUB", plan_id=plan.id).id, "wallet")
    renewing = settle_order(create_order(buyer.id, "purchase", "RUB", plan_id=daily.id).id, "wallet")
    subscription = Order.get_by_id(renewing.order_id).subscription_id
    Subscription.update(auto_renew=True, plan=daily).where(Subscription.id == subscription).execute()
    _customer(*SAMPLE_CUSTOMER, next(telegram_ids))
    broken = _customer("dev customer with a corrupt operation", None, next(telegram_ids))
    settlement = _paid_at_a_provider(create_order(broken.id, "purchase", "RUB", plan_id=plan.id, provider="yookassa"))
    FulfillmentOperation.update(desired_state="{not json").where(
        FulfillmentOperation.id == settlement.operation_id
    ).execute()
    return True


def _sell_a_voucher(buyer):
    """The fake goods provider, a voucher it sells, and one paid in USD by `buyer` (so the RUB figures
    stay those of the plans)."""
    import os

    from fakes.goods import DEV_TOKEN
    from goods.catalogue import add_goods, add_provider, create_goods_order

    port = os.environ.get("APP_FAKE_GOODS_PORT") or DEFAULT_GOODS_PORT
    provider = add_provider("dev-goods", f"http://127.0.0.1:{port}", DEV_TOKEN)
    voucher = add_goods("dev-voucher", "Gift voucher", provider, "voucher-500", GOODS_PRICES)
    _paid_at_a_provider(create_goods_order(buyer.id, voucher.id, "USD", provider="cryptobot"))


def _customer(name, username, telegram_id):
    return Customer.create(display_name=name, telegram_id=telegram_id, telegram_username=username, language_code="en")


def _paid_at_a_provider(order):
    """What a provider's confirmed payment leaves behind: the intent and the settlement
    (with its ledger movement: a sale to revenue, a top-up to the wallet), in one
    transaction. Returns the settlement."""
    with db.atomic():
        PaymentIntent.create(
            order=order,
            provider=order.provider,
            provider_payment_id=f"dev-{order.provider}-{order.id}",
            amount_minor=order.amount_minor,
            currency=order.currency,
            status="succeeded",
            idempotence_key=str(uuid.uuid4()),
        )
        return settle_order(order.id, "provider_webhook")


def wait_for_panel(url, token, timeout_s):
    """True once the panel answers its (authenticated) health route, False after
    timeout_s. The stack starts its processes together; a worker that claimed
    the sample orders before the fake panel listened would fail every first attempt."""
    from integrations.remnawave import RemnawaveClient

    panel = RemnawaveClient(url, token)
    deadline = time.monotonic() + timeout_s
    while not panel.healthy():
        if time.monotonic() >= deadline:
            return False
        time.sleep(PANEL_POLL_S)
    return True
