"""The development demo: paid orders become users on a fake Remnawave panel.

`python omniflow.py demo` makes a SQLite file of its own afresh
(var/demo.sqlite3), starts the fake panel in-process (it fails one call in
five, so retries show), settles a few orders (one twice: the second
settlement changes nothing) plus one whose operation carries a corrupt
desired state (it fails for good and lands in the dead-letter view), runs
the worker, and prints what happened.

It never runs on the configured database (DATABASE_URL, or the development
file the dev stack uses): its worker would take that database's jobs too and
push them to its own in-process panel, and, as leader, reconcile every
subscription there against that panel.
"""

import json
import os
import shlex
import sys
from pathlib import Path

from commerce.settlement import settle_order
from config.settings import PROJECT_ROOT, DatabaseTarget
from fakes.remnawave import api_token
from models.commerce import Customer, Order, Plan
from models.fulfillment import FulfillmentOperation

DEMO_DATABASE_PATH = PROJECT_ROOT / "var" / "demo.sqlite3"
DEMO_TOKEN = api_token("demo")
DEMO_ORDERS = 5
PANEL_FAIL_RATE = 0.2


def command_line(*args):
    """`omniflow.py args` as a shell runs it from the current directory, with the interpreter
    running now: a bare `python` may be another one, without the project's packages."""
    here = Path.cwd()

    def shown(path):
        path = Path(path)
        return str(path.relative_to(here)) if path.is_relative_to(here) else str(path)

    python = shown(sys.executable)
    if "/" not in python:
        python = f"./{python}"  # a bare name would be looked up on PATH
    return shlex.join([python, shown(Path(PROJECT_ROOT) / "omniflow.py"), *args])


def rows_hint(database_path):
    """The command that lists the demo's rows again."""
    return f"DATABASE_URL={shlex.quote(f'sqlite:///{database_path}')} {command_line('jobs', 'list')}"


def fresh_database():
    """The demo's own SQLite file, emptied: each run shows only its own orders."""
    for suffix in ("", "-wal", "-shm"):
        try:
            os.remove(f"{DEMO_DATABASE_PATH}{suffix}")
        except FileNotFoundError:
            pass
    return DatabaseTarget("sqlite", path=str(DEMO_DATABASE_PATH))


def start_panel():
    from fakes.remnawave import FakeRemnawave
    from integrations.remnawave import RemnawaveClient
    from jobs.fulfillment import use_panel

    panel = FakeRemnawave(token=DEMO_TOKEN, seed=1)
    panel.start()
    panel.set_faults(fail_rate=PANEL_FAIL_RATE)
    use_panel(RemnawaveClient(panel.base_url, DEMO_TOKEN))
    return panel


def monthly_plan(code, name):
    """30 days, 100 GB, 3 devices, one squad, a day's grace: the plan sample data sells."""
    return Plan.create(
        code=code,
        name=name,
        duration_days=30,
        traffic_allowance_bytes=100 << 30,
        device_limit=3,
        squad_ids=json.dumps(["7c4b1f0e-2a3d-4e5f-8a6b-9c0d1e2f3a4b"]),
        grace_period_hours=24,
        price_minor=499,
    )


def seed():
    """Settle the demo orders; returns (settlements, duplicates skipped)."""
    plan = Plan.get_or_none(Plan.code == "demo-monthly") or monthly_plan("demo-monthly", "Demo monthly")
    settlements = []
    for index in range(DEMO_ORDERS):
        customer = Customer.create(display_name=f"demo customer {index + 1}")
        order = Order.create(
            customer=customer, plan=plan, operation="purchase", amount_minor=plan.price_minor, provider="yookassa"
        )
        settlements.append(settle_order(order.id, "provider_webhook"))
    repeated = settle_order(settlements[0].order_id, "provider_webhook")
    broken = settlements[-1]
    FulfillmentOperation.update(desired_state="{not json").where(
        FulfillmentOperation.id == broken.operation_id
    ).execute()
    return settlements, repeated.already_settled


def report(panel):
    print(f"\n{'operation':>9}  {'kind':<10} {'status':<10} {'attempts':>8}  error")
    for operation in FulfillmentOperation.select().order_by(FulfillmentOperation.id):
        print(
            f"{operation.id:>9}  {operation.operation:<10} {operation.status:<10} {operation.attempt_count:>8}  "
            f"{operation.last_error_code or ''}"
        )
    print(f"\n{'panel user':<26} {'status':<9} expires")
    for user in panel.users():
        print(f"{user['username']:<26} {user['status']:<9} {user['expireAt']}")
    calls = ", ".join(f"{route}: {n}" for route, n in sorted(panel.stats()["calls"].items()))
    print(f"\npanel calls: {calls}")
