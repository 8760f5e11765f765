"""The bot under load: plain updates handled per second, beside a bare pyTelegramBotAPI echo bot.

    python -m bench.bot [--chats 20] [--updates 600] [--rounds 3] [--out bench/results/bot.json]

(a) Plain updates. A fresh PostgreSQL database and the fake Bot API (in this
process, on 127.0.0.1). In each round, first the peer, then the bot:

- the peer is `bench/systems/echo_bot.py`, the echo bot of pyTelegramBotAPI's
  README (threaded handlers, its defaults): no database, no lease, the
  ceiling of the library and of the fake on this machine;
- the bot is `python omniflow.py bot`: each update is a /start from a known
  customer, so one read of the customer and one answer, with the update's
  id recorded in the same transaction (SPEC 14.3).

Each system's process is started fresh, warmed by one /start per chat (the
customers exist before the clock starts), then `updates` messages from
`chats` chats are queued at once and the clock runs until the fake has
accepted as many answers. `updates_per_s` is the median over the rounds,
`ratio_to_echo` the median of each round's bot rate over the echo rate
measured just before it. Both share this machine with PostgreSQL and the
fake, so the ratio is what holds from one machine to another; the rates are
this machine's.
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

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "bench" / "results" / "bot.json"
BENCH_DB = "omniflow_bench_bot"
FIRST_USER = 7_000_000
START_TIMEOUT_S = 60
ANSWER_TIMEOUT_S = 300


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


def start_system(name, fake, database_url, log_dir):
    log = open(log_dir / f"{name}.log", "a")
    if name == "echo":
        command = [sys.executable, "-m", "bench.systems.echo_bot", fake.base_url, fake.token]
        env = dict(os.environ)
    else:
        command = [sys.executable, "omniflow.py", "bot"]
        env = {key: value for key, value in os.environ.items() if not key.startswith("APP_")}
        env.update(
            DATABASE_URL=database_url,
            APP_TELEGRAM_API_URL=fake.base_url,
            APP_TELEGRAM_BOT_TOKEN=fake.token,
            LOG_LEVEL="WARNING",
        )
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


def run(server_url, chats, updates, rounds, log_dir):
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
    finally:
        fake.stop()
    ratios = [b / e for b, e in zip(bot, echo, strict=True)]
    return {
        "updates_per_s": round(statistics.median(bot), 1),
        "echo_updates_per_s": round(statistics.median(echo), 1),
        "ratio_to_echo": round(statistics.median(ratios), 3),
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
    parser.add_argument("--out", default=str(DEFAULT_OUT))
    parser.add_argument(
        "--pg", default=os.environ.get("BENCH_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
    )
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    log_dir = Path(os.environ.get("BENCH_LOG_DIR", "/tmp/omniflow-bench-bot"))
    log_dir.mkdir(parents=True, exist_ok=True)
    result = run(args.pg, args.chats, args.updates, args.rounds, log_dir)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({key: value for key, value in result.items() if key != "runs"}), flush=True)


if __name__ == "__main__":
    main()
