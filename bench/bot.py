"""The bot under load: plain updates handled per second, beside a bare pyTelegramBotAPI echo bot.

    python -m bench.bot [--chats 20] [--updates 600] [--rounds 3] [--purchases 200] [--rate 10]
                        [--out bench/results/bot.json]

(a) Plain updates. A fresh PostgreSQL database and the fake Bot API (in this
process, on 127.0.0.1). In each round, first the peer, then the bot:

- the peer is `bench/systems/echo_bot.py`, the echo bot of pyTelegramBotAPI's
  README (threaded handlers, its defaults): no database, no lease, the
  ceiling of the library and of the fake on this machine;
- the bot is `python omniflow.py bot`: each update is a /start from a known
  customer, so a read of the customer and one answer, with the update's id
  recorded in the transaction that applies it (SPEC 14.3; the updates of one
  getUpdates answer share transactions of up to 25, bot/updates.py).

Each system's process is started fresh, warmed by one /start per chat (the
customers exist before the clock starts), then `updates` messages from
`chats` chats are queued at once and the clock runs until the fake has
accepted as many answers. `updates_per_s` is the median over the rounds,
`ratio_to_echo` the median of each round's bot rate over the echo rate
measured just before it. Both share this machine with PostgreSQL and the
fake, so the ratio is what holds from one machine to another; the rates are
this machine's.

(b) Access ready. `purchases` customers with a chat, each with a pending
Stars order (250 XTR), the fake panel answering after 20 ms (`latency_ms`),
the bot and one worker (`huey_consumer omniflow.huey`) running: the
customers' `successful_payment` updates arrive at `rate` per second, and
for each the time runs from its arrival at the fake to the fake accepting
the bot's "your access is ready" photo (the link's QR code) in that chat:
settlement in the update's transaction, the create job, the panel call, the
customer notice written by the worker's record transaction, the bot's
notice loop. `ready_p50_s` and `ready_p95_s` over the purchases.
"""

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

from fakes.remnawave import api_token

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "bench" / "results" / "bot.json"
BENCH_DB = "omniflow_bench_bot"
FIRST_USER = 7_000_000
FIRST_BUYER = 8_000_000  # (b)'s customers; (a)'s chats made customers from FIRST_USER on
START_TIMEOUT_S = 60
ANSWER_TIMEOUT_S = 300
PANEL_TOKEN = api_token("bench")
PANEL_LATENCY_MS = 20
STARS_PRICE = 250
READY_TIMEOUT_S = 300


def answers(fake):
    return fake.accepted_count("sendMessage")


def wait_for_answers(fake, count, timeout, process):
    deadline = time.monotonic() + timeout
    while answers(fake) < count:
        if process.poll() is not None:
            raise SystemExit(f"the bot under test exited with {process.returncode}")
        if time.monotonic() > deadline:
            raise SystemExit(f"{answers(fake)} of {count} answers after {timeout} s")
        time.sleep(0.02)
    return time.monotonic()


def start_system(name, fake, database_url, log_dir, panel_url=None):
    log = open(log_dir / f"{name}.log", "a")
    if name == "echo":
        command = [sys.executable, "-m", "bench.systems.echo_bot", fake.base_url, fake.token]
        env = dict(os.environ)
    else:
        huey_consumer = str(Path(sys.executable).parent / "huey_consumer")  # the virtualenv's console script
        command = [sys.executable, "omniflow.py", "bot"] if name == "omniflow" else [huey_consumer, "omniflow.huey"]
        env = {key: value for key, value in os.environ.items() if not key.startswith("APP_")}
        env.update(
            DATABASE_URL=database_url,
            APP_TELEGRAM_API_URL=fake.base_url,
            APP_TELEGRAM_BOT_TOKEN=fake.token,
            LOG_LEVEL="WARNING",
        )
        if panel_url:
            env.update(APP_REMNAWAVE_URL=panel_url, APP_REMNAWAVE_TOKEN=PANEL_TOKEN)
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)


def stop_system(name, process):
    # The echo bot's infinity_polling waits out its long poll on SIGTERM; the peer keeps nothing.
    process.send_signal(signal.SIGKILL if name == "echo" else signal.SIGTERM)
    try:
        process.wait(20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def plain_round(name, fake, database_url, log_dir, chats, updates):
    """One system: start it, warm it with one /start per chat, then time `updates` queued at once."""
    fake.discard_pending()  # what the previous system left unconfirmed is not this one's
    process = start_system(name, fake, database_url, log_dir)
    try:
        for index in range(chats):
            fake.send_message({"id": FIRST_USER + index, "language_code": "en"}, "/start")
        wait_for_answers(fake, chats, START_TIMEOUT_S, process)
        before = answers(fake)
        started = time.monotonic()
        for index in range(updates):
            fake.send_message({"id": FIRST_USER + index % chats, "language_code": "en"}, "/start")
        finished = wait_for_answers(fake, before + updates, ANSWER_TIMEOUT_S, process)
    finally:
        stop_system(name, process)
    return round(updates / (finished - started), 1)


def pending_stars_orders(database_url, purchases):
    """A plan on sale in Stars, `purchases` customers with a chat, each with a pending Stars order."""
    import psycopg2

    with psycopg2.connect(database_url) as connection, connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO plans (code, name, duration_days, traffic_allowance_bytes, device_limit, squad_ids,"
            " grace_period_hours, price_minor, currency, active, trial)"
            " VALUES ('bench-stars', 'Bench', 30, 107374182400, 3, '[]', 24, %s, 'XTR', TRUE, FALSE) RETURNING id",
            (STARS_PRICE,),
        )
        plan_id = cursor.fetchone()[0]
        cursor.execute(
            "INSERT INTO plan_prices (plan_id, currency, amount_minor) VALUES (%s, 'XTR', %s)", (plan_id, STARS_PRICE)
        )
        cursor.execute(
            "INSERT INTO customers (id, display_name, telegram_id, language_code, blocked, created_at)"
            " SELECT md5('bench' || n)::uuid::text, 'bench ' || n, %s + n, 'en', FALSE, now()"
            " FROM generate_series(1, %s) AS n",
            (FIRST_BUYER, purchases),
        )
        cursor.execute(
            "INSERT INTO orders (customer_id, plan_id, operation, status, amount_minor, currency, provider,"
            " created_at, expires_at)"
            " SELECT id, %s, 'purchase', 'pending', %s, 'XTR', 'stars', now(), now() + interval '1 day'"
            " FROM customers WHERE telegram_id > %s ORDER BY telegram_id RETURNING id, customer_id",
            (plan_id, STARS_PRICE, FIRST_BUYER),
        )
        made = cursor.fetchall()
        cursor.execute("SELECT id, telegram_id FROM customers WHERE telegram_id > %s", (FIRST_BUYER,))
        chat_of = dict(cursor.fetchall())
        return [(chat_of[customer], order_id) for order_id, customer in made]


def ready_run(fake, database_url, log_dir, purchases, rate):
    """(b): seconds from each successful_payment to its access-ready photo."""
    from commerce.stars import invoice_payload
    from fakes.remnawave import FakeRemnawave

    orders = pending_stars_orders(database_url, purchases)
    panel = FakeRemnawave(token=PANEL_TOKEN, latency_ms=PANEL_LATENCY_MS).start()
    fake.discard_pending()
    worker = start_system("worker", fake, database_url, log_dir, panel.base_url)
    bot = start_system("omniflow", fake, database_url, log_dir, panel.base_url)
    arrived, ready = {}, {}
    try:
        before = answers(fake)
        fake.send_message({"id": orders[0][0], "language_code": "en"}, "/start")
        wait_for_answers(fake, before + 1, START_TIMEOUT_S, bot)  # the bot polls
        started = time.monotonic()
        for index, (chat, order_id) in enumerate(orders):
            time.sleep(max(0.0, started + index / rate - time.monotonic()))
            fake.successful_payment({"id": chat, "language_code": "en"}, "XTR", STARS_PRICE, invoice_payload(order_id))
            arrived[chat] = time.monotonic()
            seen_ready(fake, ready)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while len(ready) < len(orders):
            if time.monotonic() > deadline or bot.poll() is not None or worker.poll() is not None:
                raise SystemExit(f"{len(ready)} of {len(orders)} access-ready messages; see {log_dir}")
            time.sleep(0.02)
            seen_ready(fake, ready)
    finally:
        stop_system("omniflow", bot)
        stop_system("worker", worker)
        panel.stop()
    latencies = sorted(ready[chat] - arrived[chat] for chat in arrived)
    return {
        "ready_p50_s": round(statistics.median(latencies), 3),
        "ready_p95_s": round(latencies[min(len(latencies) - 1, int(0.95 * len(latencies)))], 3),
        "ready_max_s": round(latencies[-1], 3),
        "purchases": purchases,
        "rate_per_s": rate,
        "panel_latency_ms": PANEL_LATENCY_MS,
    }


def seen_ready(fake, ready):
    """Note when each chat's first access-ready photo was accepted (the first time this sees it)."""
    now = time.monotonic()
    for call in fake.accepted("sendPhoto"):
        ready.setdefault(call["chat_id"], now)


def run(server_url, chats, updates, rounds, log_dir, purchases, rate):
    import migrations
    from bench.chaos import _fresh_pg_database
    from config.database import open_database
    from config.settings import parse_database_url
    from fakes.telegram import FakeTelegram

    database_url = _fresh_pg_database(server_url, BENCH_DB)
    database = open_database(parse_database_url(database_url))
    migrations.apply(database)
    database.close()
    fake = FakeTelegram().start()
    echo, bot = [], []
    try:
        for index in range(rounds):
            echo.append(plain_round("echo", fake, database_url, log_dir, chats, updates))
            bot.append(plain_round("omniflow", fake, database_url, log_dir, chats, updates))
            print(f"round {index + 1}: echo {echo[-1]}/s, bot {bot[-1]}/s", flush=True)
        ready = ready_run(fake, database_url, log_dir, purchases, rate) if purchases else {}
        if ready:
            print(f"access ready: p50 {ready['ready_p50_s']} s, p95 {ready['ready_p95_s']} s", flush=True)
    finally:
        fake.stop()
    ratios = [b / e for b, e in zip(bot, echo, strict=True)]
    return {
        "updates_per_s": round(statistics.median(bot), 1),
        "echo_updates_per_s": round(statistics.median(echo), 1),
        "ratio_to_echo": round(statistics.median(ratios), 3),
        "ready_p50_s": ready.get("ready_p50_s"),
        "ready_p95_s": ready.get("ready_p95_s"),
        "access_ready": ready,
        "chats": chats,
        "updates": updates,
        "rounds": rounds,
        "runs": {"bot": bot, "echo": echo, "ratio_to_echo": [round(r, 3) for r in ratios]},
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chats", type=int, default=20)
    parser.add_argument("--updates", type=int, default=600)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--purchases", type=int, default=200, help="0 leaves (b) out")
    parser.add_argument("--rate", type=float, default=10.0, help="successful payments per second in (b)")
    parser.add_argument("--out", default=str(DEFAULT_OUT))
    parser.add_argument(
        "--pg", default=os.environ.get("BENCH_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
    )
    args = parser.parse_args(argv)
    log_dir = Path(os.environ.get("BENCH_LOG_DIR", "/tmp/omniflow-bench-bot"))
    log_dir.mkdir(parents=True, exist_ok=True)
    result = run(args.pg, args.chats, args.updates, args.rounds, log_dir, args.purchases, args.rate)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({key: value for key, value in result.items() if key not in ("runs", "access_ready")}), flush=True)


if __name__ == "__main__":
    main()
