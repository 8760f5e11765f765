"""Omniflow's one entry point.

    python omniflow.py migrate              apply pending schema migrations (the `release` process)
    python omniflow.py worker               run the queue consumer (the `worker` process)
    python omniflow.py web                  serve the HTTP API on $PORT (the `web` process)
    python omniflow.py bot                  run the Telegram bot (the `bot` process; exactly one)
    python omniflow.py jobs list [--state S] [--limit N]
    python omniflow.py jobs retry ID | jobs cancel ID
    python omniflow.py demo [--seconds N]   development: SQLite, fake panel, paid orders, a worker, the result
    python omniflow.py fake-remnawave       development and tests: a fake Remnawave panel
    python omniflow.py fake-yookassa        development and tests: a fake YooKassa
    python omniflow.py fake-cryptobot       development and tests: a fake Crypto Pay (CryptoBot)
    python omniflow.py fake-telegram        development and tests: a fake Telegram Bot API with a chat page

`huey` (the application's queue) is importable from here as `omniflow.huey`.
"""

import argparse
import logging
import sys

from config.database import bind_database
from config.logging import configure_logging
from config.settings import ConfigError, load_settings
from jobs import huey
from jobs.engine.huey_app import SHUTDOWN_TIMEOUT_S
from jobs.engine.kinds import QUEUES
from security.redactor import register_settings

logger = logging.getLogger("omniflow")

WORKER_POOL_EXTRA = 8  # producers, completer, maintenance, and slack
# Modules that declare the production job kinds and periodic passes.
JOB_KIND_MODULES = (
    "jobs.fulfillment",
    "jobs.passes.fulfillment_reconcile",
    "jobs.passes.fulfillment_revive",
)


def bootstrap(pool_size=10):
    """Settings, logging, redactor and database; a bad setting exits with its name."""
    try:
        settings = load_settings()
    except ConfigError as error:
        print(f"configuration error: {error}", file=sys.stderr)
        raise SystemExit(2) from None
    configure_logging(settings.log_level)
    register_settings(settings)
    bind_database(settings.database, pool_size=pool_size)
    return settings


def require_current_schema():
    import migrations
    from models import db

    waiting = migrations.pending(db.obj)
    if waiting:
        print(
            f"the database schema is behind ({', '.join(waiting)} not applied): run `python omniflow.py migrate`",
            file=sys.stderr,
        )
        raise SystemExit(2)


def load_job_kinds():
    import importlib

    for module in JOB_KIND_MODULES:
        importlib.import_module(module)


def cmd_migrate(args):
    import migrations
    from models import db

    bootstrap()
    applied = migrations.apply(db.obj)
    print("applied: " + ", ".join(applied) if applied else "schema is up to date")


def run_worker(seconds=None, shutdown_timeout=SHUTDOWN_TIMEOUT_S):
    consumer = huey.create_consumer(shutdown_timeout=shutdown_timeout)
    if seconds is None:
        consumer.run()
        return
    import threading

    threading.Timer(seconds, lambda: consumer.stop_flag.set()).start()
    consumer.start()
    consumer.stop_flag.wait()
    consumer.stop(graceful=True)


def cmd_worker(args):
    from jobs.engine import metrics

    settings = bootstrap(pool_size=sum(QUEUES.values()) + WORKER_POOL_EXTRA)
    require_current_schema()
    load_job_kinds()
    metrics.serve(settings.worker_metrics_port)
    run_worker(shutdown_timeout=args.shutdown_timeout)


def cmd_web(args):
    from web.app import WEB_THREADS, create_app, serve

    settings = bootstrap(pool_size=WEB_THREADS + 3)
    load_job_kinds()  # the kinds' rules (queue, uniqueness) for the jobs web inserts; web never runs them
    if settings.remnawave_url:
        from integrations.remnawave import RemnawaveClient
        from ops import maintenance_controller

        panel = RemnawaveClient(settings.remnawave_url, settings.remnawave_token)
        maintenance_controller.start(panel, settings.maintenance_probe_seconds)
    serve(create_app(settings), settings.port)


BOT_POOL_SIZE = 6  # the polling thread, the lease, the notifier, and slack


def cmd_bot(args):
    from bot.process import BotProcess

    settings = bootstrap(pool_size=BOT_POOL_SIZE)
    if not settings.telegram_bot_token:
        print("configuration error: APP_TELEGRAM_BOT_TOKEN: is required by the bot", file=sys.stderr)
        raise SystemExit(2)
    require_current_schema()
    load_job_kinds()  # the kinds' rules for the jobs the bot's services insert; the bot never runs them
    raise SystemExit(BotProcess(settings).run())


def _format_time(value):
    return value.strftime("%H:%M:%S") if value else "-"


def print_jobs(jobs_shown, counts):
    print(f"{'id':>6}  {'kind':<16} {'queue':<9} {'state':<10} {'attempt':>7}  {'created':>8}  last error")
    for job in jobs_shown:
        print(
            f"{job.id:>6}  {job.kind:<16} {job.queue:<9} {job.state:<10} "
            f"{f'{job.attempt}/{job.max_attempts}':>7}  {_format_time(job.created_at):>8}  {job.last_error or ''}"
        )
    summary = ", ".join(f"{queue}/{state}: {n}" for (queue, state), n in sorted(counts.items()))
    print(f"\ntotals: {summary or 'no jobs'}")


def cmd_jobs(args):
    from jobs import JobMutationRejected, JobNotFound, client
    from jobs.engine.states import ALL_STATES, DEAD_LETTER_STATES

    bootstrap()
    require_current_schema()
    try:
        if args.action == "list":
            if args.state == "dead_letter":
                states = DEAD_LETTER_STATES
            elif args.state in (None, "all"):
                states = None
            elif args.state in ALL_STATES:
                states = (args.state,)
            else:
                print(f"unknown state {args.state!r}", file=sys.stderr)
                raise SystemExit(2)
            print_jobs(client.list(states, limit=args.limit), client.counts())
        elif args.action == "retry":
            job = client.retry(args.id)
            print(f"job {job.id} is {job.state}")
        elif args.action == "cancel":
            job = client.cancel(args.id)
            print(f"job {job.id} is {job.state}")
    except (JobNotFound, JobMutationRejected) as error:
        print(str(error), file=sys.stderr)
        raise SystemExit(1) from None


def cmd_operators(args):
    import getpass
    import os

    from ops.operators import PERMISSIONS, OperatorError, create_operator
    from security.passwords import WeakPassword

    bootstrap()
    require_current_schema()
    password = os.environ.get("OMNIFLOW_OPERATOR_PASSWORD")
    if not password:
        password = getpass.getpass(f"password for {args.username}: ")
        if getpass.getpass("again: ") != password:
            print("the passwords differ", file=sys.stderr)
            raise SystemExit(2)
    permissions = list(PERMISSIONS)
    if args.permissions:
        permissions = [name.strip() for name in args.permissions.split(",") if name.strip()]
    try:
        operator = create_operator(args.username, password, permissions)
    except (OperatorError, WeakPassword) as error:
        print(str(error), file=sys.stderr)
        raise SystemExit(2) from None
    print(f"operator {operator.username} created with {', '.join(sorted(operator.permission_set))}")


def cmd_demo(args):
    import migrations
    from devtools import demo
    from jobs import client
    from models import db

    bootstrap(pool_size=sum(QUEUES.values()) + WORKER_POOL_EXTRA)
    migrations.apply(db.obj)
    load_job_kinds()
    panel = demo.start_panel()
    try:
        settlements, repeated = demo.seed()
        print(f"demo: fake Remnawave panel at {panel.base_url} (fails {demo.PANEL_FAIL_RATE:.0%} of calls)")
        print(f"demo: settled {len(settlements)} orders; settling order {settlements[0].order_id} again "
              f"{'changed nothing' if repeated else 'settled it twice (bug)'}")
        print(f"demo: running a worker for {args.seconds:.0f} s (Ctrl-C stops it early)")
        run_worker(seconds=args.seconds)
        print()
        print_jobs(client.list(limit=30), client.counts())
        demo.report(panel)
    finally:
        panel.stop()
    print("\nsee the rows again with: python omniflow.py jobs list  (or --state dead_letter)")


def cmd_dev_seed(args):
    import migrations
    from devtools import stack
    from models import db

    settings = bootstrap()
    migrations.apply(db.obj)
    seeded = stack.seed()
    base = f"http://127.0.0.1:{settings.port}"
    print("dev-seed: sample data added" if seeded else "dev-seed: sample data already there")
    print(f"dev-seed: panel {base}/panel/login  user {stack.DEV_OPERATOR}  password {stack.DEV_PASSWORD}")


def cmd_fake_remnawave(args):
    # Development and tests only: a fake Remnawave panel; no settings, no database.
    from fakes.remnawave import run_cli

    run_cli(host=args.host, port=args.port, token=args.token, latency_ms=args.latency_ms, dev_mode=args.dev_mode)


def cmd_fake_provider(args):
    # Development and tests only: a fake payment provider; no settings, no database.
    if args.command == "fake-yookassa":
        from fakes.yookassa import run_cli
    else:
        from fakes.cryptobot import run_cli

    run_cli(host=args.host, port=args.port, webhook_url=args.webhook_url, auto_pay_seconds=args.auto_pay_seconds)


def cmd_fake_telegram(args):
    # Development and tests only: a fake Telegram Bot API; no settings, no database.
    from fakes.telegram import run_cli

    run_cli(host=args.host, port=args.port)


def build_parser():
    parser = argparse.ArgumentParser(prog="omniflow.py", description="Omniflow: paid orders to working VPN access.")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("migrate", help="apply pending migrations").set_defaults(run=cmd_migrate)
    worker_parser = commands.add_parser("worker", help="run the job consumer")
    worker_parser.add_argument(
        "--shutdown-timeout",
        type=float,
        default=SHUTDOWN_TIMEOUT_S,
        help="seconds to let running jobs finish after SIGTERM/SIGINT before handing them back",
    )
    worker_parser.set_defaults(run=cmd_worker)
    commands.add_parser("web", help="serve the HTTP API on $PORT").set_defaults(run=cmd_web)
    commands.add_parser("bot", help="run the Telegram bot (exactly one instance)").set_defaults(run=cmd_bot)

    jobs_parser = commands.add_parser("jobs", help="list, retry or cancel job rows")
    jobs_actions = jobs_parser.add_subparsers(dest="action", required=True)
    listing = jobs_actions.add_parser("list")
    listing.add_argument("--state", help="a job state, dead_letter, or all (default)")
    listing.add_argument("--limit", type=int, default=50)
    for action in ("retry", "cancel"):
        jobs_actions.add_parser(action).add_argument("id", type=int)
    jobs_parser.set_defaults(run=cmd_jobs)

    operators_parser = commands.add_parser("operators", help="panel operator accounts")
    operators_actions = operators_parser.add_subparsers(dest="action", required=True)
    creating = operators_actions.add_parser(
        "create", help="create an operator (password from OMNIFLOW_OPERATOR_PASSWORD, else asked)"
    )
    creating.add_argument("username")
    creating.add_argument("--permissions", help="comma-separated (default: all of them)")
    operators_parser.set_defaults(run=cmd_operators)

    demo_parser = commands.add_parser("demo", help="development: demo load on SQLite")
    demo_parser.add_argument("--seconds", type=float, default=40)
    demo_parser.set_defaults(run=cmd_demo)

    commands.add_parser(
        "dev-seed", help="development: migrate and add sample data (an operator, plans, paid orders)"
    ).set_defaults(run=cmd_dev_seed)

    fake_parser = commands.add_parser("fake-remnawave", help="development: a fake Remnawave panel (no database)")
    fake_parser.add_argument("--host", default="127.0.0.1")
    fake_parser.add_argument("--port", type=int, default=3010)
    fake_parser.add_argument("--token", help="bearer token (default: APP_REMNAWAVE_TOKEN, else a fixed dev token)")
    fake_parser.add_argument(
        "--latency-ms", type=float, default=0, help="answer every API call this long after it arrives"
    )
    fake_parser.add_argument("--dev-mode", action="store_true", help="do not require the x-forwarded-* headers")
    fake_parser.set_defaults(run=cmd_fake_remnawave)

    for name, port, what in (("fake-yookassa", 3020, "YooKassa"), ("fake-cryptobot", 3030, "Crypto Pay (CryptoBot)")):
        provider_parser = commands.add_parser(name, help=f"development: a fake {what} (no database)")
        provider_parser.add_argument("--host", default="127.0.0.1")
        provider_parser.add_argument("--port", type=int, default=port)
        provider_parser.add_argument("--webhook-url", help="where notifications are POSTed")
        provider_parser.add_argument(
            "--auto-pay-seconds", type=float, help="complete every new payment by itself after this long"
        )
        provider_parser.set_defaults(run=cmd_fake_provider)
    telegram_parser = commands.add_parser(
        "fake-telegram", help="development: a fake Telegram Bot API with a chat page (no database)"
    )
    telegram_parser.add_argument("--host", default="127.0.0.1")
    telegram_parser.add_argument("--port", type=int, default=8081)
    telegram_parser.set_defaults(run=cmd_fake_telegram)
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    args.run(args)


if __name__ == "__main__":
    main()
