#!/usr/bin/env bash
# `rbmrec import u.data` (ML-100k, 100,000 ratings) into a fresh server on
# SQLite vs a fresh server on PostgreSQL, same run, several rounds in
# alternating order; prints every time, the per-round ratio and the median
# ratio PostgreSQL / SQLite (target: <= 3).
# PostgreSQL: a throwaway cluster under /tmp (initdb; as the postgres user
# when run as root), Unix socket only, default durability (fsync on,
# synchronous_commit on), like the server's SQLite default (synchronous=FULL).
# Both databases live under the same /tmp directory.
# Usage: bench/pg_import_bench.sh [DATA_DIR]    Env: REPEAT=3
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
ml=${1:-$root/../shared/data/movielens/ml-100k}
data=$ml/u.data
[ -r "$data" ] || { echo "pg_import_bench: missing $data" >&2; exit 1; }
bin=$root/build/bin
repeat=${REPEAT:-3}
for t in rbmrec rbmrec-server; do
  [ -x "$bin/$t" ] || cmake --build "$root/build" -j2 --target "$t" >&2
done
# shellcheck source=../scripts/pg-cluster.sh
source "$root/scripts/pg-cluster.sh"
tmp=$(mktemp -d /tmp/rbmrec-pg-import.XXXXXX)
chmod 0755 "$tmp"
server_pid=
cleanup() {
  [ -z "$server_pid" ] || { kill "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null; } || true
  pg_cluster_stop
  rm -rf "$tmp"
}
trap cleanup EXIT
PG_DURABLE=1 pg_cluster_start "$tmp/pg" ||
  { echo "pg_import_bench: PostgreSQL not installed (scripts/install-deps.sh)" >&2; exit 1; }

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
# import_ms DB: starts a server on DB, times `rbmrec import u.data`, stops it.
import_ms() {
  local port i t0 t1
  port=$(free_port)
  "$bin/rbmrec-server" --listen "127.0.0.1:$port" --db "$1" >"$tmp/server.log" 2>&1 &
  server_pid=$!
  for i in $(seq 100); do
    "$bin/rbmrec" --server "127.0.0.1:$port" --timeout 1 health >/dev/null 2>&1 && break
    sleep 0.1
  done
  t0=$(date +%s%N)
  "$bin/rbmrec" --server "127.0.0.1:$port" import "$data" >"$tmp/import.log" 2>&1 \
    || { cat "$tmp/import.log" "$tmp/server.log" >&2; exit 1; }
  t1=$(date +%s%N)
  "$bin/rbmrec" --server "127.0.0.1:$port" stats >"$tmp/stats.log" 2>&1 || true
  grep -Eq "ratings +100,?000$" "$tmp/stats.log" || { echo "import incomplete:" >&2; cat "$tmp/stats.log" >&2; exit 1; }
  kill -TERM "$server_pid"; wait "$server_pid" 2>/dev/null || true
  server_pid=
  echo $(((t1 - t0) / 1000000))
}

echo "pg_import_bench: $data, PostgreSQL $("$PG_BIN/postgres" --version | awk '{print $3}'), $repeat rounds"
ratios=()
for r in $(seq "$repeat"); do
  rm -f "$tmp/r.db" "$tmp/r.db-wal" "$tmp/r.db-shm"
  "${PG_PSQL[@]}" -c "DROP DATABASE IF EXISTS bench" 2>/dev/null
  "${PG_PSQL[@]}" -c "CREATE DATABASE bench"
  pg_uri="${PG_URI/\/postgres\?//bench?}"
  if [ $((r % 2)) -eq 1 ]; then
    s=$(import_ms "$tmp/r.db"); p=$(import_ms "$pg_uri")
  else
    p=$(import_ms "$pg_uri"); s=$(import_ms "$tmp/r.db")
  fi
  ratio=$(python3 -c "print('%.2f' % ($p / $s))")
  ratios+=("$ratio")
  echo "round $r: sqlite ${s} ms  postgresql ${p} ms  ratio ${ratio}"
done
median=$(python3 -c "import statistics,sys; print('%.2f' % statistics.median(map(float, sys.argv[1:])))" "${ratios[@]}")
verdict=$(python3 -c "print('MET' if $median <= 3 else 'MISSED')")
echo "median ratio postgresql/sqlite: $median (target <= 3: $verdict)"
