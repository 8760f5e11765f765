#!/usr/bin/env bash
# Set up and run the development flow: a virtualenv with the pinned
# dependencies, then the worker on a local SQLite file with a demo load,
# and the job list at the end. Extra arguments go to `omniflow.py demo`.
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -r requirements.txt
exec .venv/bin/python omniflow.py demo "$@"
