#!/usr/bin/env bash
# The conditional RBM through the service (docs/benchmarks.md, "The
# conditional RBM"): one server, one new database, on a rating split
# (default ML-1M r90: ../shared/data/splits/ml1m.r90.{train,test}):
#   `rbmrec import TRAIN`, then three models, each followed by
#   `rbmrec evaluate TEST` (PredictRatings user by user: a conditional
#   model's r holds the test items each call asks about):
#   plain  `rbmrec train` (server defaults)
#   (a)    `rbmrec train --conditional` (no views stored)
#   (b)    `rbmrec import TEST --kind view` (the test pairs as views, the
#          seed paper's set-up), then `rbmrec train --conditional`
# Every figure is printed by `rbmrec evaluate`. Starts its own server on a
# free port with a temporary database and removes it on exit. ML-1M: about
# three trainings' time (minutes).
#
# Usage: bench/conditional_service.sh [TRAIN TEST]
# Env:   TRAIN_FLAGS (extra `rbmrec train` flags for all three, e.g.
#        "--epochs 20")
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
. "$root/bench/lib.sh"
train=${1:-$root/../shared/data/splits/ml1m.r90.train}
test=${2:-$root/../shared/data/splits/ml1m.r90.test}
bin=$root/build/bin
for f in "$train" "$test"; do
  [ -r "$f" ] || { echo "conditional_service: missing $f" >&2; exit 1; }
done
for t in rbmrec rbmrec-server; do
  [ -x "$bin/$t" ] || cmake --build "$root/build" -j2 --target "$t" >&2
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rbmrec-conditional.XXXXXX")
server_pid=
cleanup() {
  if [ -n "$server_pid" ]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

port=$(free_port)
"$bin/rbmrec-server" --listen "127.0.0.1:$port" --db "$tmp/db" \
  >"$tmp/server.log" 2>&1 &
server_pid=$!
cli() { "$bin/rbmrec" --server "127.0.0.1:$port" "$@"; }
for _ in $(seq 100); do
  cli --timeout 1 health >/dev/null 2>&1 && break
  sleep 0.1
done
read -r -a flags <<<"${TRAIN_FLAGS:-}"

step() {
  local name=$1
  shift
  local t0
  t0=$(date +%s)
  cli train --activate always ${flags[@]+"${flags[@]}"} "$@" >"$tmp/train.log"
  echo "== $name: rbmrec train --activate always ${TRAIN_FLAGS:-}$* ($(($(date +%s) - t0)) s)"
  cli evaluate "$test"
}

cli import "$train" >/dev/null
step plain
step "(a) conditional, no views" --conditional
cli import "$test" --kind view >/dev/null
cli stats | grep -E "^(ratings|views) "
step "(b) conditional, test pairs as views" --conditional
