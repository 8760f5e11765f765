#!/usr/bin/env bash
# Make sure a PostgreSQL server answers on 127.0.0.1:5432 for the test suite:
# start the local cluster if it is stopped; on a machine without PostgreSQL,
# install it from Debian's packages and let local TCP connections in without
# a password (a throwaway test server, never a production one).
set -euo pipefail

ready() { pg_isready -h 127.0.0.1 -p 5432 -q 2>/dev/null; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

# The suite runs several worker, bot and web processes at once, each with its
# own connection pool (a worker holds one connection per queue thread): more
# than PostgreSQL's stock 100 connections at peak. On the local Debian
# cluster this script manages, raise the limit once (ALTER SYSTEM, restart).
# A server it does not manage is left as it is, with a warning.
WANTED_CONNECTIONS=300
enough_connections() {
  local now
  now=$(psql -h 127.0.0.1 -U postgres -Atc "SHOW max_connections" 2>/dev/null || echo 0)
  if [ "${now:-0}" -ge 200 ]; then return 0; fi
  local version
  version=$(ls /etc/postgresql 2>/dev/null | sort -V | tail -n 1)
  if [ -z "$version" ] || ! command -v pg_ctlcluster >/dev/null 2>&1; then
    echo "warning: PostgreSQL allows $now connections; the suite may need up to 200" >&2
    return 0
  fi
  echo "raising PostgreSQL $version's max_connections from $now to $WANTED_CONNECTIONS for the suite" >&2
  psql -h 127.0.0.1 -U postgres -qc "ALTER SYSTEM SET max_connections = $WANTED_CONNECTIONS" >/dev/null
  as_root pg_ctlcluster --skip-systemctl-redirect "$version" main restart
  for _ in $(seq 1 30); do
    if ready; then return 0; fi
    sleep 1
  done
  echo "PostgreSQL did not come back on 127.0.0.1:5432 after the restart" >&2
  return 1
}

if command -v pg_isready >/dev/null 2>&1 && ready; then
  enough_connections
  exit $?
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
  if ready; then
    enough_connections
    exit $?
  fi
  sleep 1
done
echo "PostgreSQL did not come up on 127.0.0.1:5432" >&2
exit 1
