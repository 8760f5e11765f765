#!/usr/bin/env bash
# Set up and run the whole test suite: a virtualenv with the pinned
# dependencies, a running PostgreSQL, then every test on SQLite and PostgreSQL.
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -r requirements-dev.txt
bash scripts/ensure-postgres.sh
exec .venv/bin/python -m pytest -q "$@"
