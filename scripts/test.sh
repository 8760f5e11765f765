#!/usr/bin/env bash
# Set up and run the whole test suite: a virtualenv with the pinned
# dependencies, a running PostgreSQL, then every test on SQLite and PostgreSQL.
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -r requirements-dev.txt
bash scripts/ensure-postgres.sh

# The Remnawave contract test checks the adapter's requests with the official
# contract's own zod schemas, in Node (tests/contract pins the package).
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
if ! command -v npm >/dev/null 2>&1; then
  echo "npm is not installed: installing nodejs and npm from Debian's packages" >&2
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
fi
npm ci --prefix tests/contract --no-audit --no-fund --loglevel=error >/dev/null

# The browser test drives Debian's Chromium with Playwright (no browser download).
if ! command -v chromium >/dev/null 2>&1; then
  echo "chromium is not installed: installing it from Debian's packages" >&2
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi

# The pooler tests start their own PgBouncer (transaction mode) in front of the test server.
if ! command -v pgbouncer >/dev/null 2>&1 && [ ! -x /usr/sbin/pgbouncer ]; then
  echo "pgbouncer is not installed: installing it from Debian's packages" >&2
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pgbouncer >/dev/null
fi

# Most of the suite's time is spent waiting on real worker processes, leases and
# intervals, not on the CPU: four test processes keep two cores busy.
exec .venv/bin/python -m pytest -q -n "${TEST_PROCESSES:-4}" --dist load "$@"
