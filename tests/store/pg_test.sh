#!/usr/bin/env bash
# Runs the PostgreSQL store tests against a PostgreSQL server of their own:
# creates a cluster under /tmp (initdb), starts it on a Unix socket only (no
# TCP port), runs the store test binary's PostgreSQL cases with RBMREC_TEST_PG
# pointing at it, then stops the server and removes the cluster.
#   tests/store/pg_test.sh <store_store_test binary> [gtest args...]
# As root the server runs as the `postgres` user (root cannot run postgres).
# Exit 77 (ctest: SKIPPED) when PostgreSQL's server binaries are missing.
set -euo pipefail
bin=${1:?usage: pg_test.sh <store test binary> [gtest args]}
shift

pg_bin=""
for d in "${PG_BIN:-}" /usr/lib/postgresql/*/bin; do
  if [ -n "$d" ] && [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then pg_bin=$d; fi
done
if [ -z "$pg_bin" ]; then
  echo "SKIPPED: PostgreSQL server binaries (initdb, pg_ctl) not found;" \
    "install the Debian package postgresql (scripts/install-deps.sh)"
  exit 77
fi

as_pg=()
if [ "$(id -u)" -eq 0 ]; then
  if ! id postgres >/dev/null 2>&1; then
    echo "SKIPPED: running as root and there is no postgres user to run the server"
    exit 77
  fi
  as_pg=(runuser -u postgres --)
fi

work=$(mktemp -d /tmp/rbmrec_pg_XXXXXX)
chmod 0755 "$work"
[ ${#as_pg[@]} -eq 0 ] || chown postgres "$work"
data=$work/data
sock=$work
port=5432  # Unix socket only: the port only names the socket file in $sock
cleanup() {
  "${as_pg[@]}" "$pg_bin/pg_ctl" -D "$data" -m immediate -w stop >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

"${as_pg[@]}" "$pg_bin/initdb" -D "$data" -U postgres -A trust -E UTF8 \
  --no-locale >"$work/initdb.log" 2>&1 || { cat "$work/initdb.log"; exit 1; }
# Small and fast: no TCP, no fsync (a test cluster that is thrown away).
"${as_pg[@]}" "$pg_bin/pg_ctl" -D "$data" -w -t 60 -l "$work/server.log" \
  -o "-c listen_addresses='' -c unix_socket_directories='$sock' -p $port \
      -c fsync=off -c full_page_writes=off -c max_connections=100" \
  start >/dev/null || { cat "$work/server.log"; exit 1; }

export RBMREC_TEST_PG="postgresql://postgres@/postgres?host=$sock&port=$port"
# For the reconnect test: a fast restart (open connections are cut).
export RBMREC_TEST_PG_RESTART="${as_pg[*]} $pg_bin/pg_ctl -D $data -m fast -w -t 60 restart >/dev/null"
echo "pg_test: PostgreSQL $("$pg_bin/postgres" --version | awk '{print $3}') on $sock"
"$bin" --gtest_filter='*Postgres*' "$@"
