"""Omniflow's one entry point.

    python omniflow.py migrate              apply pending schema migrations (the `release` process)
    python omniflow.py worker               run the queue consumer (the same worker as `huey_consumer omniflow.huey`)
    python omniflow.py web                  serve the HTTP API on $PORT (the `web` process)
    python omniflow.py bot                  run the Telegram bot (the `bot` process; exactly one)
    python omniflow.py jobs list [--state S] [--limit N]   the queue's rows ("jobs" means queue rows only)
    python omniflow.py jobs retry ID | jobs cancel ID [--reason TEXT]   audited (actor `cli`)
    python omniflow.py operators create NAME [--permissions a,b] | list
    python omniflow.py operators disable|enable|reset-password|revoke-sessions NAME --reason TEXT   audited
    python omniflow.py keys generate | keys rotate [--batch N]
    python omniflow.py outbox destinations add URL --topics a,b|'*' [--secret S] | list | remove ID
    python omniflow.py backup now|list|verify FILE|restore FILE --into URL [--force]
    python omniflow.py demo [--seconds N]   development: SQLite, fake panel, paid orders, a worker, the result
    python omniflow.py dev-seed             development: migrate, then sample data for the dev stack
    python omniflow.py dev-wait-panel       development: return once APP_REMNAWAVE_URL answers (the stack's worker)
    python omniflow.py dev-sample-payment   development: a sample YooKassa payment the fake completes, then waits
    python omniflow.py fake-remnawave       development and tests: a fake Remnawave panel
    python omniflow.py fake-goods           development and tests: a fake digital-goods provider
    python omniflow.py fake-yookassa        development and tests: a fake YooKassa
    python omniflow.py fake-cryptobot       development and tests: a fake Crypto Pay (CryptoBot)
    python omniflow.py fake-telegram        development and tests: a fake Telegram Bot API with a chat page

`huey` (the application's queue) is importable from here as `omniflow.huey`:
`huey_consumer omniflow.huey` runs the worker. Importing this module sets
nothing up; a worker process's start-up (`start_worker_process`) runs when
its consumer is created, whichever of the two commands started it.
"""

import argparse
import logging
import os
import sys

from config.database import DatabaseUnreachable, bind_database, require_reachable
from config.logging import configure_logging
from config.settings import ConfigError, load_settings
from jobs import huey
from jobs.engine.consumer_options import SHUTDOWN_TIMEOUT_S
from jobs.engine.kinds import QUEUES
from ops import sealing
from security.redactor import redact, register_settings

logger = logging.getLogger("omniflow")

CLI_ACTOR = "cli"  # who the audit names for a change made from this command line
NOTICE_UNDECLARED_WORK = "undeclared_work"  # jobs wait that no running worker runs (SPEC 1.11)
WORKER_POOL_EXTRA = 8  # producers, completer, maintenance, and slack
# Modules that declare the production job kinds and periodic passes.
JOB_KIND_MODULES = (
    "jobs.fulfillment",
    "jobs.passes.fulfillment_reconcile",
    "jobs.passes.fulfillment_revive",
    "jobs.outbox_delivery",
    "jobs.passes.retention",
    "commerce.passes.commerce_maintenance",
    "commerce.passes.payment_reconcile",
    "commerce.passes.renewal",
    "commerce.passes.lifecycle_sweep",
    "ops.campaign_expansion",
    "commerce.provider_refund",
    "commerce.webhooks",
    "goods.delivery",
)
# Passes registered only when the worker has what they need (SPEC 5.2): the
# module's register(settings) declares the pass, or answers why it did not.
CONDITIONAL_PASSES = (
    ("outbox_publish", "jobs.passes.outbox_publish"),
    ("backup", "jobs.passes.backup"),
    ("anomaly_evaluation", "jobs.passes.anomaly_evaluation"),
    ("goods_delivery_schedule", "goods.schedule"),
    ("bulk_actions", "jobs.passes.bulk_actions"),
)


def bootstrap(pool_size=10, log_level=None, log_file=None):
    """Settings, logging, redactor and database; a bad setting exits with its name."""
    try:
        settings = load_settings()
    except ConfigError as error:
        print(f"configuration error: {error}", file=sys.stderr)
        raise SystemExit(2) from None
    configure_logging(log_level or settings.log_level, log_file)
    register_settings(settings)
    sealing.use_keys(settings.data_encryption_key)
    bind_database(settings.database, pool_size=pool_size, direct=settings.direct_database)
    return settings


def require_reachable_database(settings):
    """One line naming the database's host (never its password) and exit 2, not a traceback."""
    from models import db

    try:
        require_reachable(db.obj, settings.database)
    except DatabaseUnreachable as error:
        print(redact(str(error)), file=sys.stderr)
        raise SystemExit(2) from None


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


def load_job_kinds(settings=None):
    """Declare the job kinds, and the conditional passes `settings` allow (none
    without settings); a pass left out is recorded with its reason, which the
    worker logs at start (SPEC 5.2)."""
    import importlib

    for module in JOB_KIND_MODULES:
        importlib.import_module(module)
    for name, module in CONDITIONAL_PASSES:
        if name in huey.periodic_schedules:
            continue
        why = importlib.import_module(module).register(settings) if settings is not None else "no settings loaded"
        if why:
            huey.leave_out(name, why)


def cmd_migrate(args):
    import migrations
    from models import db

    bootstrap()
    applied = migrations.apply(db.obj)
    print("applied: " + ", ".join(applied) if applied else "schema is up to date")


def start_worker_process(options):
    """A worker process's start-up, run by `huey.create_consumer` before the consumer exists:
    settings, logging, redactor, the database (pool sized for the queues), the schema
    check, every job kind and the metrics port. `options` are the consumer's WorkerOptions."""
    from jobs.engine import metrics

    settings = bootstrap(
        pool_size=sum(QUEUES.values()) + WORKER_POOL_EXTRA, log_level=options.log_level, log_file=options.log_file
    )
    require_reachable_database(settings)
    require_current_schema()
    load_job_kinds(settings)
    for line in worker_summary(settings, huey.periodic_registrations()[1]):
        print(f"worker: {line}", flush=True)
    metrics.serve(settings.worker_metrics_port, settings.worker_metrics_address, settings.metrics_token)


def worker_summary(settings, left_out):
    """What a worker runs against and what it lacks, for its first lines: a worker started with
    nothing set runs on the development file with no panel, and should say so."""
    from urllib.parse import urlsplit

    from config.database import location
    from config.settings import DEFAULT_SQLITE_PATH

    database = location(settings.database)
    if settings.database.path == str(DEFAULT_SQLITE_PATH):
        database += " (DATABASE_URL is not set: the development file)"
    lines = [f"database: {database}"]
    if settings.direct_database is not None:
        lines.append(f"wake-ups (LISTEN): {location(settings.direct_database)} (DATABASE_DIRECT_URL)")
    missing = []
    if settings.remnawave_url:
        panel = urlsplit(settings.remnawave_url)
        lines.append(f"panel: {panel.scheme}://{panel.netloc.rpartition('@')[2]}{panel.path}")
    else:
        missing.append("panel (APP_REMNAWAVE_URL: fulfillment jobs fail and are retried until it is set)")
    providers = [name for name, configured in (
        ("YooKassa", settings.yookassa_shop_id), ("Crypto Pay", settings.cryptobot_token),
    ) if configured]  # fmt: skip
    if providers:
        lines.append(f"payment providers: {', '.join(providers)}")
    else:
        missing.append("payment providers (APP_YOOKASSA_SHOP_ID, APP_CRYPTOBOT_TOKEN)")
    if not settings.data_encryption_key:
        missing.append("data key (APP_DATA_ENCRYPTION_KEY: lifecycle_sweep skips the blocklist refresh)")
    if not settings.backup_dir:
        missing.append("backups (APP_BACKUP_DIR)")
    if missing:
        lines.append(f"not configured: {'; '.join(missing)}")
    if left_out:
        passes = "; ".join(f"periodic pass {name} ({why})" for name, why in left_out.items())
        lines.append(f"not declared, so left for a worker that declares them: {passes}")
    return lines


huey.on_worker_start(start_worker_process)


def notify_undeclared_work(work, oldest_job_id):
    """One operator notice per waiting work and oldest row: another appears only if it waits again later."""
    from ops.records import queue_notice

    queue_notice(NOTICE_UNDECLARED_WORK, f"{work}:{oldest_job_id}", {"work": work, "jobId": oldest_job_id})


huey.on_undeclared_work(notify_undeclared_work)


def run_worker_for(seconds):
    """Run a consumer in this (already set-up) process for `seconds`, then stop it gracefully."""
    import threading

    consumer = huey.consumer()
    threading.Timer(seconds, lambda: consumer.stop_flag.set()).start()
    consumer.start()
    consumer.stop_flag.wait()
    consumer.stop(graceful=True)


def cmd_worker(args):
    # The same path as `huey_consumer omniflow.huey -t SECONDS`.
    huey.create_consumer(shutdown_timeout=args.shutdown_timeout).run()


def cmd_web(args):
    from web.app import WEB_THREADS, create_app, serve, server_options

    settings = bootstrap(pool_size=WEB_THREADS + 3)
    load_job_kinds()  # the kinds' rules (queue, uniqueness) for the jobs web inserts; web never runs them
    from ops import maintenance_controller

    panel = None  # without a configured panel the controller samples the database alone
    if settings.remnawave_url:
        from integrations.remnawave import RemnawaveClient

        panel = RemnawaveClient(settings.remnawave_url, settings.remnawave_token)
    maintenance_controller.start(panel, settings.maintenance_probe_seconds)
    from ops import telemetry

    telemetry.start(settings)  # off unless APP_TELEMETRY_URL or APP_TELEMETRY_COLLECTOR is set
    serve(create_app(settings), settings.port, **server_options(settings))


# Polling, the answers, the lease, each loop, the campaign senders (bot/campaigns.py SENDERS), and slack.
BOT_POOL_SIZE = 16


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
    from models import db
    from ops import queue_changes

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
        else:
            change = queue_changes.retry_job if args.action == "retry" else queue_changes.cancel_job
            with db.atomic():
                job = change(args.id, CLI_ACTOR, args.reason)
            print(f"job {job.id} is {job.state}")
    except (JobNotFound, JobMutationRejected) as error:
        print(str(error), file=sys.stderr)
        raise SystemExit(1) from None


def _new_password(username):
    """OMNIFLOW_OPERATOR_PASSWORD, else typed twice."""
    import getpass

    password = os.environ.get("OMNIFLOW_OPERATOR_PASSWORD")
    if not password:
        password = getpass.getpass(f"password for {username}: ")
        if getpass.getpass("again: ") != password:
            print("the passwords differ", file=sys.stderr)
            raise SystemExit(2)
    return password


def cmd_operators(args):
    from ops import operators
    from security.passwords import WeakPassword

    bootstrap()
    require_current_schema()
    try:
        if args.action == "list":
            sessions = operators.live_sessions()
            print(f"{'username':<24} {'status':<9} {'sessions':>8}  permissions")
            for operator in operators.Operator.select().order_by(operators.Operator.username):
                status = "disabled" if operator.disabled_at else "active"
                print(f"{operator.username:<24} {status:<9} {sessions.get(operator.id, 0):>8}  "
                      f"{','.join(sorted(operator.permission_set))}")  # fmt: skip
            return
        if args.action == "create":
            permissions = list(operators.PERMISSIONS)
            if args.permissions:
                permissions = [name.strip() for name in args.permissions.split(",") if name.strip()]
            operator = operators.create_operator(args.username, _new_password(args.username), permissions)
            print(f"operator {operator.username} created with {', '.join(sorted(operator.permission_set))}")
            return
        operator = operators.operator_named(args.username)
        if args.action == "disable":
            operators.disable_operator(operator, CLI_ACTOR, args.reason)
            print(f"operator {operator.username} disabled; their sessions ended")
        elif args.action == "enable":
            operators.enable_operator(operator, CLI_ACTOR, args.reason)
            print(f"operator {operator.username} may sign in again")
        elif args.action == "reset-password":
            operators.reset_password(operator, _new_password(operator.username), CLI_ACTOR, args.reason)
            print(f"password of {operator.username} reset; their sessions ended")
        elif args.action == "revoke-sessions":
            ended = operators.revoke_sessions(operator, CLI_ACTOR, args.reason)
            print(f"{ended} session(s) of {operator.username} ended")
    except (operators.OperatorError, WeakPassword) as error:
        print(str(error), file=sys.stderr)
        raise SystemExit(2) from None


def cmd_keys(args):
    if args.action == "generate":
        print(sealing.generate_key())
        return
    import models  # noqa: F401  (every sealed column registers itself with its model)
    from ops import key_rotation

    bootstrap()
    require_current_schema()
    if not sealing.available():
        print("APP_DATA_ENCRYPTION_KEY is not set: there is no key to re-seal with", file=sys.stderr)
        raise SystemExit(2)
    resealed = {}
    try:
        for column, count, last_id in key_rotation.rotate(args.batch):
            resealed[column] = resealed.get(column, 0) + count
            print(f"{column}: {resealed[column]} re-sealed (through row {last_id})", flush=True)
    except sealing.UnsealError as error:
        print(f"{error}; nothing after it was re-sealed (run again once the key is back)", file=sys.stderr)
        raise SystemExit(1) from None
    print(f"every sealed value is under key {sealing.keyring().newest_id} ({sum(resealed.values())} re-sealed now)")


def cmd_outbox(args):
    from ops import outbox

    bootstrap()
    require_current_schema()
    try:
        if args.action == "add":
            secret = args.secret or outbox.generate_secret()
            destination = outbox.add_destination(args.url, args.topics, secret, "cli", args.reason)
            print(f"destination {destination.id} added: {outbox.display_url(destination.url)} topics {args.topics}")
            if not args.secret:
                print(f"signing secret (shown once, keep it for the receiver): {secret}")
        elif args.action == "list":
            counts = outbox.delivery_counts()
            print(f"{'id':>4}  {'pending':>7} {'retrying':>8} {'dead':>5}  {'created':<19}  url  topics")
            for destination in outbox.active_destinations():
                n = counts.get(destination.id, dict.fromkeys(outbox.COUNTED, 0))
                topics = outbox.topics_of(destination.topics)
                print(
                    f"{destination.id:>4}  {n['pending']:>7} {n['retrying']:>8} {n['dead']:>5}  "
                    f"{destination.created_at:%Y-%m-%d %H:%M:%S}  {outbox.display_url(destination.url)}  "
                    f"{topics if topics == outbox.ALL_TOPICS else ','.join(topics)}"
                )
        elif args.action == "remove":
            outbox.remove_destination(args.id, "cli", args.reason)
            print(f"destination {args.id} removed; its undelivered events are dropped")
    except outbox.DestinationRejected as error:
        print(f"{error.code}: {error}", file=sys.stderr)
        raise SystemExit(2) from None
    except outbox.DestinationNotFound as error:
        print(str(error), file=sys.stderr)
        raise SystemExit(1) from None
    except sealing.SealingUnavailable as error:
        print(str(error), file=sys.stderr)
        raise SystemExit(2) from None


def cmd_backup(args):
    from ops import backups

    settings = bootstrap()
    try:
        if args.action == "now":
            require_current_schema()
            backup = backups.take(settings)
            pruned = backups.prune(backups.backup_directory(settings))
            rows = sum(backup.manifest["tables"].values())
            print(f"wrote {backup.path} ({len(backup.manifest['tables'])} tables, {rows} rows); pruned {len(pruned)}")
        elif args.action == "list":
            listed = backups.list_backups(backups.backup_directory(settings))
            keep = backups.to_keep(listed)
            for backup in listed:
                kept = "kept" if backup.name in keep else "pruned next"
                print(f"{backup.taken_at:%Y-%m-%d %H:%M:%S}Z  {backup.size:>12}  {kept:<11}  {backup.path}")
            if not listed:
                print(f"no backups in {settings.backup_dir}")
        elif args.action == "verify":
            verification = backups.verify(settings, args.file)
            for table, count in sorted(verification.manifest["tables"].items()):
                print(f"{table:<32} {count:>10}  restored {verification.counts.get(table, '-')}")
            print(f"checksum of {', '.join(verification.manifest['checksum']['tables']) or 'no tables'}: "
                  f"{'equal' if verification.checksum == verification.manifest['checksum']['sha256'] else 'DIFFERS'}")
            if not verification.ok:
                print("verify failed:\n  " + "\n  ".join(verification.problems), file=sys.stderr)
                raise SystemExit(1)
            print(f"verified: {args.file} (taken {verification.manifest['taken_at']}) restores as recorded")
        elif args.action == "restore":
            manifest = backups.restore(settings, args.file, args.into, force=args.force)
            print(f"restored {args.file} (taken {manifest['taken_at']}, {len(manifest['tables'])} tables)")
    except backups.BackupError as error:
        print(f"backup {args.action}: {error} [{error.code}]", file=sys.stderr)
        raise SystemExit(1) from None


def cmd_demo(args):
    import migrations
    from devtools import demo
    from jobs import client
    from models import db

    bootstrap()
    bind_database(demo.fresh_database(), pool_size=sum(QUEUES.values()) + WORKER_POOL_EXTRA)
    migrations.apply(db.obj)
    load_job_kinds()
    print(f"demo: on a SQLite file of its own, made afresh: {demo.DEMO_DATABASE_PATH}")
    panel = demo.start_panel()
    try:
        settlements, repeated = demo.seed()
        print(f"demo: fake Remnawave panel at {panel.base_url} (fails {demo.PANEL_FAIL_RATE:.0%} of calls)")
        print(f"demo: settled {len(settlements)} orders; settling order {settlements[0].order_id} again "
              f"{'changed nothing' if repeated else 'settled it twice (bug)'}")
        print(f"demo: running a worker for {args.seconds:.0f} s (Ctrl-C stops it early)")
        run_worker_for(args.seconds)
        print()
        print_jobs(client.list(limit=30), client.counts())
        demo.report(panel)
    finally:
        panel.stop()
    print(f"\nsee the rows again with: {demo.rows_hint(demo.DEMO_DATABASE_PATH)}  (or --state dead_letter)")


def cmd_dev_seed(args):
    import migrations
    from devtools import stack
    from models import db

    settings = bootstrap()
    migrations.apply(db.obj)
    seeded = stack.seed()
    base = f"http://127.0.0.1:{settings.port}"
    print(f"dev-seed: database {settings.database.path or 'PostgreSQL (DATABASE_URL)'}")
    print("dev-seed: sample data added" if seeded else "dev-seed: sample data already there")
    print(f"dev-seed: panel {base}/panel/login  user {stack.DEV_OPERATOR}  password {stack.DEV_PASSWORD}")


def cmd_dev_wait_panel(args):
    from devtools import stack

    settings = bootstrap()
    if not settings.remnawave_url or not settings.remnawave_token:
        print("dev-wait-panel: APP_REMNAWAVE_URL and APP_REMNAWAVE_TOKEN name the panel to wait for", file=sys.stderr)
        raise SystemExit(2)
    print(f"dev-wait-panel: waiting for the panel at {settings.remnawave_url}", flush=True)
    if not stack.wait_for_panel(settings.remnawave_url, settings.remnawave_token, args.timeout):
        print(f"dev-wait-panel: {settings.remnawave_url} did not answer within {args.timeout:.0f} s", file=sys.stderr)
        raise SystemExit(1)
    print(f"dev-wait-panel: the panel at {settings.remnawave_url} answers")


def cmd_dev_sample_payment(args):
    from devtools import sample_payment

    settings = bootstrap()
    try:
        if settings.yookassa_shop_id and settings.public_url:
            sample_payment.run(settings)
        else:
            print("dev-sample-payment: no sample payment: APP_YOOKASSA_* and APP_PUBLIC_URL are not set", flush=True)
        sample_payment.stay()  # honcho would stop the whole stack if this process ended
    except KeyboardInterrupt:
        pass


def cmd_fake_remnawave(args):
    # Development and tests only: a fake Remnawave panel; no settings, no database.
    from fakes.remnawave import run_cli

    run_cli(args.host, args.port, args.token, args.latency_ms, args.dev_mode, args.state_file, args.fresh)


def cmd_fake_provider(args):
    # Development and tests only: a fake payment provider; no settings, no database.
    if args.command == "fake-yookassa":
        from fakes.yookassa import run_cli
    else:
        from fakes.cryptobot import run_cli

    run_cli(args.host, args.port, args.webhook_url, args.auto_pay_seconds, args.state_file, args.fresh)


def cmd_fake_goods(args):
    # Development and tests only: a fake goods provider; no settings, no database.
    from fakes.goods import run_cli

    run_cli(args.host, args.port, args.token, args.latency_ms)


def _state_arguments(parser, what):
    parser.add_argument(
        "--state-file", help=f"keep the {what} in this JSON file across restarts (default: in memory, empty at start)"
    )
    parser.add_argument("--fresh", action="store_true", help="delete the state file first: start empty")


def _positive(text):
    if not (text.isascii() and text.isdigit()) or int(text) == 0:
        raise argparse.ArgumentTypeError("a positive whole number")
    return int(text)


def cmd_fake_telegram(args):
    # Development and tests only: a fake Telegram Bot API; no settings, no database.
    from fakes.telegram import run_cli

    run_cli(host=args.host, port=args.port, state_file=args.state_file, fresh=args.fresh)


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

    jobs_parser = commands.add_parser("jobs", help="list, retry or cancel queue rows (jobs)")
    jobs_actions = jobs_parser.add_subparsers(dest="action", required=True)
    listing = jobs_actions.add_parser("list")
    listing.add_argument("--state", help="a job state, dead_letter, or all (default)")
    listing.add_argument("--limit", type=int, default=50)
    for action in ("retry", "cancel"):
        changing = jobs_actions.add_parser(action, help=f"{action} a job (audited, actor {CLI_ACTOR})")
        changing.add_argument("id", type=int)
        changing.add_argument("--reason", help="why; written to the audit event")
    jobs_parser.set_defaults(run=cmd_jobs)

    operators_parser = commands.add_parser("operators", help="panel operator accounts")
    operators_actions = operators_parser.add_subparsers(dest="action", required=True)
    creating = operators_actions.add_parser(
        "create", help="create an operator (password from OMNIFLOW_OPERATOR_PASSWORD, else asked)"
    )
    creating.add_argument("username")
    creating.add_argument("--permissions", help="comma-separated (default: all of them)")
    operators_actions.add_parser("list", help="operators, whether disabled, and their live sessions")
    for action, what in (
        ("disable", "no more sign-in; their sessions end now"),
        ("enable", "let a disabled operator sign in again"),
        ("reset-password", "a new password (OMNIFLOW_OPERATOR_PASSWORD, else asked); their sessions end"),
        ("revoke-sessions", "end every session of the operator now"),
    ):
        acting = operators_actions.add_parser(action, help=f"{what} (audited, actor {CLI_ACTOR})")
        acting.add_argument("username")
        acting.add_argument("--reason", required=True, help="why; written to the audit event")
    operators_parser.set_defaults(run=cmd_operators)

    keys_parser = commands.add_parser("keys", help="the keys that seal secrets at rest (APP_DATA_ENCRYPTION_KEY)")
    keys_actions = keys_parser.add_subparsers(dest="action", required=True)
    keys_actions.add_parser("generate", help="print a new key (put it first in APP_DATA_ENCRYPTION_KEY)")
    rotating = keys_actions.add_parser("rotate", help="re-seal every sealed value with the newest key")
    rotating.add_argument("--batch", type=_positive, default=500, help="rows per transaction (default 500)")
    keys_parser.set_defaults(run=cmd_keys)

    outbox_parser = commands.add_parser("outbox", help="where outbox events are published")
    outbox_nouns = outbox_parser.add_subparsers(dest="noun", required=True)
    destinations = outbox_nouns.add_parser("destinations", help="webhook destinations")
    destination_actions = destinations.add_subparsers(dest="action", required=True)
    adding = destination_actions.add_parser("add", help="add a destination (prints a generated secret once)")
    adding.add_argument("url")
    adding.add_argument("--topics", required=True, help="comma-separated topics, or '*' for all")
    adding.add_argument("--secret", help="its whsec_ signing secret (default: a new one, printed once)")
    adding.add_argument("--reason", default="added from the command line", help="for the audit log")
    destination_actions.add_parser("list", help="active destinations and their undelivered counts")
    removing = destination_actions.add_parser("remove", help="remove a destination")
    removing.add_argument("id", type=int)
    removing.add_argument("--reason", default="removed from the command line", help="for the audit log")
    outbox_parser.set_defaults(run=cmd_outbox)


    backup_parser = commands.add_parser("backup", help="encrypted database backups (APP_BACKUP_DIR)")
    backup_actions = backup_parser.add_subparsers(dest="action", required=True)
    backup_actions.add_parser("now", help="write a backup into APP_BACKUP_DIR now, then prune")
    backup_actions.add_parser("list", help="the backups in APP_BACKUP_DIR, newest first")
    backup_actions.add_parser(
        "verify", help="restore into a scratch database and compare every table's row count and the checksum"
    ).add_argument("file")
    restoring = backup_actions.add_parser("restore", help="restore a backup into an empty database")
    restoring.add_argument("file")
    restoring.add_argument("--into", required=True, metavar="URL", help="the target, as a DATABASE_URL")
    restoring.add_argument("--force", action="store_true", help="replace what a non-empty target holds")
    backup_parser.set_defaults(run=cmd_backup)

    demo_parser = commands.add_parser("demo", help="development: demo load on SQLite")
    demo_parser.add_argument("--seconds", type=float, default=40)
    demo_parser.set_defaults(run=cmd_demo)

    commands.add_parser(
        "dev-seed", help="development: migrate and add sample data (an operator, plans, paid orders)"
    ).set_defaults(run=cmd_dev_seed)

    waiting = commands.add_parser(
        "dev-wait-panel", help="development: wait until the panel APP_REMNAWAVE_URL names answers its health route"
    )
    waiting.add_argument("--timeout", type=float, default=60, help="give up (exit 1) after this many seconds")
    waiting.set_defaults(run=cmd_dev_wait_panel)

    commands.add_parser(
        "dev-sample-payment",
        help="development: the sample customer pays at the fake YooKassa, which completes it a few seconds later",
    ).set_defaults(run=cmd_dev_sample_payment)

    fake_parser = commands.add_parser("fake-remnawave", help="development: a fake Remnawave panel (no database)")
    fake_parser.add_argument("--host", default="127.0.0.1")
    fake_parser.add_argument("--port", type=int, default=3010)
    fake_parser.add_argument("--token", help="bearer token (default: APP_REMNAWAVE_TOKEN, else a fixed dev token)")
    fake_parser.add_argument(
        "--latency-ms", type=float, default=0, help="answer every API call this long after it arrives"
    )
    fake_parser.add_argument("--dev-mode", action="store_true", help="do not require the x-forwarded-* headers")
    _state_arguments(fake_parser, "users")
    fake_parser.set_defaults(run=cmd_fake_remnawave)

    goods_parser = commands.add_parser("fake-goods", help="development: a fake digital-goods provider (no database)")
    goods_parser.add_argument("--host", default="127.0.0.1")
    goods_parser.add_argument("--port", type=int, default=3040)
    goods_parser.add_argument("--token", help="bearer token (default: fakes/goods.py's development token)")
    goods_parser.add_argument("--latency-ms", type=float, default=0, help="answer every purchase this long after")
    goods_parser.set_defaults(run=cmd_fake_goods)

    for name, port, what in (("fake-yookassa", 3020, "YooKassa"), ("fake-cryptobot", 3030, "Crypto Pay (CryptoBot)")):
        provider_parser = commands.add_parser(name, help=f"development: a fake {what} (no database)")
        provider_parser.add_argument("--host", default="127.0.0.1")
        provider_parser.add_argument("--port", type=int, default=port)
        provider_parser.add_argument("--webhook-url", help="where notifications are POSTed")
        provider_parser.add_argument(
            "--auto-pay-seconds", type=float, help="complete every new payment by itself after this long"
        )
        _state_arguments(provider_parser, "payments")
        provider_parser.set_defaults(run=cmd_fake_provider)
    telegram_parser = commands.add_parser(
        "fake-telegram", help="development: a fake Telegram Bot API with a chat page (no database)"
    )
    telegram_parser.add_argument("--host", default="127.0.0.1")
    telegram_parser.add_argument("--port", type=int, default=8081)
    telegram_parser.add_argument("--state-file", help="keep the chats and the update counter in this file")
    telegram_parser.add_argument("--fresh", action="store_true", help="start empty, whatever the state file holds")
    telegram_parser.set_defaults(run=cmd_fake_telegram)
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        args.run(args)
        sys.stdout.flush()  # inside the try: a reader that left shows here, not at the interpreter's exit
    except BrokenPipeError:
        # The reader went away (`jobs list | head`): what it read is all it wanted; no traceback.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise SystemExit(0) from None


if __name__ == "__main__":
    main()
