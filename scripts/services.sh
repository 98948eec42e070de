#!/usr/bin/env bash
# Start the services the test suite uses, where this machine can.
# Idempotent; prints what it did; never fails the caller (tests skip instead).
set -u
action="${1:-start}"

pg_start() {
  if ! command -v pg_ctlcluster >/dev/null 2>&1; then
    echo "services: PostgreSQL is not installed (apt-get install postgresql); its tests will skip"
    return 0
  fi
  if [ "$(id -u)" != 0 ]; then
    echo "services: not root, not starting PostgreSQL; set FLEETCTL_TEST_PG to a server's URL to run its tests"
    return 0
  fi
  local ver
  ver=$(pg_lsclusters -h 2>/dev/null | awk 'NR==1{print $1}')
  if [ -z "$ver" ]; then
    echo "services: no PostgreSQL cluster found; its tests will skip"
    return 0
  fi
  if ! pg_lsclusters -h | awk -v v="$ver" '$1==v && $4=="online"{found=1} END{exit !found}'; then
    pg_ctlcluster "$ver" main start || { echo "services: PostgreSQL $ver failed to start"; return 0; }
  fi
  su postgres -c "psql -tAc \"SELECT 1 FROM pg_roles WHERE rolname='root'\"" 2>/dev/null | grep -q 1 \
    || su postgres -c "createuser -s root" >/dev/null 2>&1 || true
  echo "services: PostgreSQL $ver is running"
}

case "$action" in
  start) pg_start ;;
  *) echo "usage: $0 start"; exit 2 ;;
esac
exit 0
