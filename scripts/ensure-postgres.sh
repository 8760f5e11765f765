#!/usr/bin/env bash
# Make sure a PostgreSQL server answers on 127.0.0.1:5432 for the test suite:
# start the local cluster if it is stopped; on a machine without PostgreSQL,
# install it from Debian's packages and let local TCP connections in without
# a password (a throwaway test server, never a production one).
set -euo pipefail

ready() { pg_isready -h 127.0.0.1 -p 5432 -q 2>/dev/null; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

if command -v pg_isready >/dev/null 2>&1 && ready; then
  exit 0
fi

installed_now=0
if ! command -v pg_ctlcluster >/dev/null 2>&1; then
  echo "PostgreSQL is not installed: installing it from Debian's packages" >&2
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
  installed_now=1
fi

version=$(ls /etc/postgresql | sort -V | tail -n 1)
if [ "$installed_now" = 1 ]; then
  hba="/etc/postgresql/$version/main/pg_hba.conf"
  as_root sed -i '1i host all all 127.0.0.1/32 trust\nhost all all ::1/128 trust' "$hba"
fi
echo "starting PostgreSQL $version" >&2
as_root pg_ctlcluster --skip-systemctl-redirect "$version" main start || true

for _ in $(seq 1 30); do
  if ready; then exit 0; fi
  sleep 1
done
echo "PostgreSQL did not come up on 127.0.0.1:5432" >&2
exit 1
