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

root=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=../../scripts/pg-cluster.sh
source "$root/scripts/pg-cluster.sh"
work=$(mktemp -d /tmp/rbmrec_pg_XXXXXX)
cleanup() {
  pg_cluster_stop
  rm -rf "$work"
}
trap cleanup EXIT
rc=0
pg_cluster_start "$work" || rc=$?
[ $rc -eq 0 ] || exit $rc

export RBMREC_TEST_PG="$PG_URI"
# For the reconnect test: a fast restart (open connections are cut).
export RBMREC_TEST_PG_RESTART="${PG_AS[*]} $PG_BIN/pg_ctl -D $PG_DATA -m fast -w -t 60 restart >/dev/null"
echo "pg_test: PostgreSQL $("$PG_BIN/postgres" --version | awk '{print $3}') on $work"
"$bin" --gtest_filter='*Postgres*' "$@"
