#!/usr/bin/env bash
# Set up and run the development stack on SQLite: a virtualenv with the pinned
# dependencies, sample data (an operator, plans, paid orders, one operation
# that fails), then the fake Remnawave panel, the web process, a worker, the
# fake Telegram Bot API and the bot, the fake YooKassa and Crypto Pay, and a sample
# YooKassa payment that the fake completes, the fake goods provider, together from Procfile.dev. Ctrl-C stops them all.
set -euo pipefail
cd "$(dirname "$0")/.."

# One stack per machine (its ports are fixed): a second start says so in one
# line, before it installs, seeds or starts anything. var/dev.pid names the
# running stack (honcho, which this script becomes).
for port in "${PORT:-8000}" "${APP_FAKE_PANEL_PORT:-3010}" "${APP_FAKE_TELEGRAM_PORT:-8081}" \
  "${APP_FAKE_YOOKASSA_PORT:-3020}" "${APP_FAKE_CRYPTOBOT_PORT:-3030}" "${APP_FAKE_GOODS_PORT:-3040}"; do
  if (exec 3<>"/dev/tcp/127.0.0.1/${port}") 2>/dev/null; then
    running="$(cat var/dev.pid 2>/dev/null || true)"
    if [ -n "$running" ] && kill -0 "$running" 2>/dev/null; then
      echo "dev: a dev stack is already running on :${port} (pid ${running}); stop it first (Ctrl-C in its shell, or kill ${running})" >&2
    else
      echo "dev: port ${port} is already in use by another program; stop it or choose other ports (PORT, APP_FAKE_*_PORT)" >&2
    fi
    exit 1
  fi
done

[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -r requirements-devstack.txt

# Development defaults; a variable already set in the environment wins.
# DATABASE_URL is left alone: unset, every command (this stack, `omniflow.py
# jobs list` in another shell, dev-seed) uses the one default file,
# var/omniflow.sqlite3 (config/settings.py).
export PORT="${PORT:-8000}"
export DEV_WEB_PORT="$PORT"  # honcho gives each process its own PORT; Procfile.dev passes this one to web
export APP_FAKE_PANEL_PORT="${APP_FAKE_PANEL_PORT:-3010}"
export APP_REMNAWAVE_URL="${APP_REMNAWAVE_URL:-http://127.0.0.1:${APP_FAKE_PANEL_PORT}}"
export APP_REMNAWAVE_TOKEN="${APP_REMNAWAVE_TOKEN:-eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJ1dWlkIjogIjg2ODc0M2FiLThlYjUtNTVhNC1hZmI5LTljMzhjMmNjMDRkZSIsICJ1c2VybmFtZSI6ICJvbW5pZmxvdy1kZXYifQ.UGGswe8IrAgoL0eoxlq-CNWh-Ds4s4P1pvjtyNSKcsQ}"  # fakes/remnawave.py's DEV_TOKEN
export APP_OPERATOR_TOKEN="${APP_OPERATOR_TOKEN:-dev-operator-token-0123456789}"
export APP_MAINTENANCE_PROBE_SECONDS="${APP_MAINTENANCE_PROBE_SECONDS:-10}"
export APP_COOKIE_SECURE="${APP_COOKIE_SECURE:-false}"  # the panel over plain http from another machine too
# Outbox receivers on this machine (production refuses loopback and private addresses).
export APP_OUTBOX_ALLOW_PRIVATE_DESTINATIONS="${APP_OUTBOX_ALLOW_PRIVATE_DESTINATIONS:-true}"
# The fake Telegram Bot API and the bot talking to it (fakes/telegram.py's development token).
export APP_FAKE_TELEGRAM_PORT="${APP_FAKE_TELEGRAM_PORT:-8081}"
export APP_TELEGRAM_API_URL="${APP_TELEGRAM_API_URL:-http://127.0.0.1:${APP_FAKE_TELEGRAM_PORT}}"
export APP_TELEGRAM_BOT_TOKEN="${APP_TELEGRAM_BOT_TOKEN:-123456789:omniflow-fake-telegram-dev-token-0000}"
# The fake YooKassa and Crypto Pay (fakes/yookassa.py's and fakes/cryptobot.py's development
# credentials), whose notifications go to this web process.
export APP_PUBLIC_URL="${APP_PUBLIC_URL:-http://127.0.0.1:${PORT}}"
export APP_FAKE_YOOKASSA_PORT="${APP_FAKE_YOOKASSA_PORT:-3020}"
export APP_YOOKASSA_SHOP_ID="${APP_YOOKASSA_SHOP_ID:-100500}"
export APP_YOOKASSA_SECRET_KEY="${APP_YOOKASSA_SECRET_KEY:-test_omniflow-fake-yookassa-dev-secret}"
export APP_YOOKASSA_API_URL="${APP_YOOKASSA_API_URL:-http://127.0.0.1:${APP_FAKE_YOOKASSA_PORT}/v3}"
# The fake notifies from this machine, not from YooKassa's published addresses: take notifications from anywhere.
export APP_YOOKASSA_WEBHOOK_ADDRESSES="${APP_YOOKASSA_WEBHOOK_ADDRESSES:-*}"
export APP_FAKE_CRYPTOBOT_PORT="${APP_FAKE_CRYPTOBOT_PORT:-3030}"
export APP_CRYPTOBOT_TOKEN="${APP_CRYPTOBOT_TOKEN:-1234:AAomniflowFakeCryptoPayDevToken}"
export APP_CRYPTOBOT_API_URL="${APP_CRYPTOBOT_API_URL:-http://127.0.0.1:${APP_FAKE_CRYPTOBOT_PORT}}"
# The fake goods provider the sample voucher is bought from (dev-seed records it, its token sealed).
export APP_FAKE_GOODS_PORT="${APP_FAKE_GOODS_PORT:-3040}"

# The data key every process seals secrets with (a bought gift card's code on its way to the buyer,
# outbox destinations' secrets): made once for this checkout, kept in var/ (development only).
if [ -z "${APP_DATA_ENCRYPTION_KEY:-}" ]; then
  [ -s var/dev-data-encryption-key ] || { mkdir -p var && .venv/bin/python omniflow.py keys generate > var/dev-data-encryption-key; }
  APP_DATA_ENCRYPTION_KEY="$(cat var/dev-data-encryption-key)"
fi
export APP_DATA_ENCRYPTION_KEY
# Support photos, shared by the bot (which stores them) and web (which shows them to operators).
export APP_SUPPORT_ATTACHMENT_DIR="${APP_SUPPORT_ATTACHMENT_DIR:-$PWD/var/support-attachments}"

# The fake panel, YooKassa and Crypto Pay keep their users and payments here, so a restart finds what the
# database remembers; DEV_FRESH_FAKES=1 starts them empty (the database stays).
export DEV_FAKE_STATE_DIR="${DEV_FAKE_STATE_DIR:-$PWD/var}"
export PATH="$PWD/.venv/bin:$PATH"  # Procfile.dev's `python` is the virtualenv's
python omniflow.py dev-seed
echo "dev: fake Remnawave panel on ${APP_REMNAWAVE_URL}; admin API token ${APP_OPERATOR_TOKEN}"
echo "dev: the users on the fake panel: curl -H 'Authorization: Bearer ${APP_REMNAWAVE_TOKEN}' ${APP_REMNAWAVE_URL}/_fake/users"
echo "dev: fake YooKassa on ${APP_YOOKASSA_API_URL}, fake Crypto Pay on ${APP_CRYPTOBOT_API_URL}; a sample YooKassa payment settles through the webhook within seconds"
echo "dev: fake goods provider on http://127.0.0.1:${APP_FAKE_GOODS_PORT}; what it sold: /_fake/orders (its development token)"
echo "dev: talk to the bot as a customer on http://127.0.0.1:${APP_FAKE_TELEGRAM_PORT}/chat (fake Telegram; send /start)"
mkdir -p var && echo $$ > var/dev.pid
exec honcho -f Procfile.dev start "$@"
