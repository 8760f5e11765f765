"""Sample data for the development stack (`python omniflow.py dev-seed`), and the
wait that starts the stack's worker only once the fake panel answers
(`python omniflow.py dev-wait-panel`).

An operator to sign in with, a plan, a few customers with paid orders (the
worker provisions them on the fake panel), and one operation whose desired
state is corrupt, so System → Operations has a failed operation to look at and
retry. Seeding twice adds nothing.
"""

import time

from commerce.settlement import settle_order
from devtools.demo import monthly_plan
from models.base import db
from models.commerce import Customer, Order, Plan
from models.fulfillment import FulfillmentOperation
from models.operators import Operator
from ops.operators import PERMISSIONS, create_operator

DEV_OPERATOR = "admin"
DEV_PASSWORD = "omniflow-dev-password"  # development only: the stack runs on 127.0.0.1
PAID_ORDERS = 4
PANEL_POLL_S = 0.2


def seed(password=DEV_PASSWORD):
    """Returns True when it seeded, False when the data was already there."""
    if Operator.get_or_none(Operator.username == DEV_OPERATOR) is not None:
        return False
    create_operator(DEV_OPERATOR, password, list(PERMISSIONS), actor="dev-seed")
    with db.atomic():
        plan = monthly_plan("dev-monthly", "Monthly, 100 GB, 3 devices")
        Plan.create(code="dev-unlimited", name="Unlimited", duration_days=30, price_minor=999)
    settlements = []
    for index in range(PAID_ORDERS + 1):
        customer = Customer.create(display_name=f"dev customer {index + 1}")
        order = Order.create(
            customer=customer, plan=plan, operation="purchase", amount_minor=plan.price_minor, provider="yookassa"
        )
        settlements.append(settle_order(order.id, "provider_webhook"))
    FulfillmentOperation.update(desired_state="{not json").where(
        FulfillmentOperation.id == settlements[-1].operation_id
    ).execute()
    return True


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
