"""The development stack's sample YooKassa payment (`python omniflow.py dev-sample-payment`), so a
newcomer watches money come in the way it does in production.

Once the fake YooKassa and the web process answer, the sample customer checks
out a plan through YooKassa (`commerce.checkout`, which creates the payment at
the fake with the intent's idempotence key), and a few seconds later the
fake's control side completes it. The fake then POSTs its unsigned
notification to the web process's /v1/webhooks/yookassa, which stores it with
its job and answers; the worker's job fetches the payment back from the fake
and settles the order, and the worker makes the user on the fake panel.
Nothing here settles anything itself.

The checkout is keyed, so a restarted stack finds the same order and payment
instead of making another. Afterwards the command waits for the order to be
fulfilled, says so, and stays up until stopped: honcho stops the whole stack
when one of its processes exits.
"""

import base64
import signal
import time

import requests

from commerce import providers as configured
from commerce.checkout import checkout
from models.commerce import Customer, Order, Plan
from models.payments import PaymentIntent

SAMPLE_CUSTOMER = ("Elena Smirnova", "elena_s")
SAMPLE_PLAN = "dev-monthly"
SAMPLE_KEY = "dev-sample-yookassa-payment"
PAY_AFTER_S = 5  # long enough to see the order pending in the panel first
POLL_S = 0.5
WAIT_S = 120


def run(settings, pay_after_s=PAY_AFTER_S, wait_s=WAIT_S):
    """Check out, have the fake complete the payment, report the settlement; True when it was fulfilled."""
    customer = Customer.get_or_none(Customer.telegram_username == SAMPLE_CUSTOMER[1])
    if customer is None:
        print("dev-sample-payment: no sample customer (run dev-seed first)", flush=True)
        return False
    if not _answers(f"{settings.public_url}/healthz", wait_s) or not _answers(_fake_control(settings), wait_s):
        print("dev-sample-payment: the web process or the fake YooKassa did not answer", flush=True)
        return False
    plan = Plan.get(Plan.code == SAMPLE_PLAN)
    started = checkout(
        configured.process_providers(),
        settings.public_url,
        customer.id,
        "purchase",
        configured.YOOKASSA,
        "RUB",
        plan_id=plan.id,
        key=f"checkout:{customer.id}:{SAMPLE_KEY}",
    )
    print(f"dev-sample-payment: order {started.order_id} waits for its YooKassa payment", flush=True)
    intent = (
        PaymentIntent.select()
        .where(PaymentIntent.order == started.order_id, PaymentIntent.provider == configured.YOOKASSA)
        .order_by(PaymentIntent.id.desc())
        .first()
    )
    if started.order_status == "pending" and intent is not None and intent.provider_payment_id:
        time.sleep(pay_after_s)
        _complete_at_the_fake(settings, intent.provider_payment_id)
        print(f"dev-sample-payment: the fake YooKassa completed payment {intent.provider_payment_id}", flush=True)
    fulfilled = _wait_fulfilled(started.order_id, wait_s)
    if fulfilled:
        print(
            f"dev-sample-payment: the webhook settled order {started.order_id}; the worker made its user"
            " on the fake panel",
            flush=True,
        )
    else:
        status = Order.get_by_id(started.order_id).status
        print(f"dev-sample-payment: order {started.order_id} is still {status}", flush=True)
    return fulfilled


def _fake_control(settings):
    return settings.yookassa_api_url.rsplit("/v3", 1)[0] + "/_fake/payments"


def _auth(settings):
    pair = f"{settings.yookassa_shop_id}:{settings.yookassa_secret_key}".encode()
    return {"Authorization": "Basic " + base64.b64encode(pair).decode()}


def _answers(url, wait_s):
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            requests.get(url, timeout=2)
            return True
        except requests.RequestException:
            time.sleep(POLL_S)
    return False


def _complete_at_the_fake(settings, payment_id):
    answer = requests.post(
        f"{_fake_control(settings)}/{payment_id}/succeed", json={}, headers=_auth(settings), timeout=10
    )
    answer.raise_for_status()


def _wait_fulfilled(order_id, wait_s):
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if Order.get_by_id(order_id).status == "fulfilled":
            return True
        time.sleep(POLL_S)
    return False


def stay():
    """Until stopped: SIGTERM's default action ends the process when honcho stops the stack."""
    while True:
        signal.pause()

