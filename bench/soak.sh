#!/usr/bin/env bash
# Soak test of the real rbmrec-server: one
# server with --online-publish-seconds 5, u.data imported and a model trained,
# then for DURATION seconds, all at once:
#   - Predict + Recommend load (rbmrec-loadgen, predict=8,recommend=2,
#     concurrency 4) in consecutive 10-s windows: QPS and p99 per window;
#   - streaming imports: `rbmrec import` of a 2,000-row slice of u.data every
#     second, cycling through the file, a third of the ratings changed each
#     cycle (so users known to the model get online updates and publishes);
#   - deletes: `rbmrec delete-ratings USER ITEM` of a random u.data rating of
#     a user with >= 20 ratings every second (re-imported by a later cycle);
#   - `rbmrec train` every 120 s (once, at a third of the run, with --ci).
# After each window it samples the server's RSS (VmRSS, the lowest of 10
# reads over a second), the sizes of the
# database file and of its WAL, the stored model versions (`rbmrec models
# --json`) and the errors so far, and prints them as a table at the end with
# the verdict (bench/suites/soak_report.py states how each figure is
# computed):
#   0 errors; RSS and the database file less its stored model versions
#   grow < 5% over the last third; the
#   WAL within the store's journal_size_limit, 64 MiB (the WAL keeps its
#   high-water mark, which grows by a model blob when a write finds a
#   checkpoint held back by a reader, until a reset truncates it to that
#   limit: a step, not a growth rate); Predict p99 of the last minute <=
#   1.5x the first minute; model versions within the retention limits
#   (--keep-full-models + --keep-online-models + active, when the server
#   has those flags; else "not applicable").
# Exits 1 when a target is missed.
#
# Usage: bench/soak.sh [--ci] [DURATION] [ML100K_DIR]
#   DURATION    seconds (default $DURATION or 600; --ci: 60)
#   ML100K_DIR  default ../shared/data/movielens/ml-100k (from the repo root)
# Env: BUILD=build (the build directory), CONCURRENCY=4, KEEP_TMP=1 keeps
# the temp dir (database, server log, samples). Port 52290.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
duration=${DURATION:-600} ci=0 ml=
while [ $# -gt 0 ]; do
  case $1 in
    --ci) ci=1 duration=60 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    [0-9]*) duration=$1 ;;
    *) ml=$1 ;;
  esac
  shift
done
# shellcheck source=suites/paths.sh
source "$root/bench/suites/paths.sh"
suite_paths soak "$ml" rbmrec-server rbmrec rbmrec-loadgen
conc=${CONCURRENCY:-4}
train_every=120
[ "$ci" = 1 ] && train_every=$((duration / 3))

tmp=$(mktemp -d "${TMPDIR:-/tmp}/rbmrec-soak.XXXXXX")
server_pid=
cleanup() {
  touch "$tmp/stop"
  if [ -n "$server_pid" ]; then kill -KILL "$server_pid" 2>/dev/null || true; fi
  wait 2>/dev/null || true
  [ "${KEEP_TMP:-0}" = 1 ] || rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

port=52290 db=$tmp/soak.db
cli() { "$bin/rbmrec" --server "127.0.0.1:$port" "$@"; }
now() { date +%s.%N; }
server_help=$("$bin/rbmrec-server" --help 2>&1 || true)
# sflag NAME: the server's spelling of a flag (dashes or underscores);
# fails when the server has no such flag.
sflag() {
  local u=${1//-/_}
  if grep -q -e "--$1\\b" <<<"$server_help"; then echo "--$1"
  elif grep -q -e "--$u\\b" <<<"$server_help"; then echo "--$u"
  else return 1; fi
}
# errors KIND OUTPUT_FILE: records a failed CLI call.
error() { echo "$(date +%T) $1: $(tail -1 "$2")" >>"$tmp/errors.log"; }

server_flags=("$(sflag listen)" "127.0.0.1:$port" "$(sflag db)" "$db"
  "$(sflag online-publish-seconds)" 5)
version_limit=()
if kf=$(sflag keep-full-models) && ko=$(sflag keep-online-models); then
  server_flags+=("$kf" 3 "$ko" 2)
  version_limit=(--version-limit 6)  # 3 full + 2 online + the active one
fi
"$bin/rbmrec-server" "${server_flags[@]}" >"$tmp/server.log" 2>&1 &
server_pid=$!
until cli --timeout 1 health >/dev/null 2>&1; do
  kill -0 "$server_pid" 2>/dev/null || { cat "$tmp/server.log" >&2; exit 1; }
  sleep 0.05
done
echo "rbmrec soak: ${duration}s, loadgen concurrency $conc, train every ${train_every}s, $bin"
cli import "$data" >/dev/null 2>&1
cli train >/dev/null
# Ratings of users with >= 20 ratings: the deletes' candidates.
awk -F'\t' 'NR == FNR { n[$1]++; next } n[$1] >= 20 { print $1, $2 }' \
  "$data" "$data" | shuf --random-source=<(yes) >"$tmp/deletable"
rows=$(wc -l <"$data")
touch "$tmp/errors.log"

start=$(now)
elapsed() { awk -v s="$start" -v n="$(now)" 'BEGIN { printf "%d", n - s }'; }

# ---- background workers (each stops when $tmp/stop exists) ----------------
(
  k=0
  while [ ! -e "$tmp/stop" ]; do
    from=$((k * 2000 % rows)) cycle=$((k * 2000 / rows))
    awk -F'\t' -v OFS='\t' -v a="$from" -v c="$cycle" \
      'NR > a && NR <= a + 2000 { r = $3; if ((NR + c) % 3 == 0) r = (r - 1 + c) % 5 + 1; print $1, $2, r, $4 }' \
      "$data" >"$tmp/slice.data"
    cli import "$tmp/slice.data" --format ml100k >"$tmp/import.out" 2>&1 ||
      error import "$tmp/import.out"
    k=$((k + 1))
    sleep 1
  done
) &
(
  n=0 total=$(wc -l <"$tmp/deletable")
  while [ ! -e "$tmp/stop" ]; do
    read -r user item < <(sed -n "$((n % total + 1))p" "$tmp/deletable")
    cli delete-ratings "$user" "$item" >"$tmp/delete.out" 2>&1 ||
      error delete "$tmp/delete.out"
    n=$((n + 1))
    sleep 1
  done
) &
(
  next=$train_every
  while [ ! -e "$tmp/stop" ]; do
    if [ "$(elapsed)" -ge "$next" ] && [ "$next" -lt "$duration" ]; then
      cli train >"$tmp/train.out" 2>&1 || error train "$tmp/train.out"
      echo "$(elapsed)" >>"$tmp/trains"
      next=$((next + train_every))
      [ "$ci" = 1 ] && next=$((duration * 10))  # once
    fi
    sleep 1
  done
) &

# ---- load windows and samples ---------------------------------------------
printf 't predict_qps predict_p99 recommend_qps recommend_p99 load_errors rss_kb db_bytes wal_bytes versions_full versions_online other_errors model_bytes\n' \
  >"$tmp/samples"
# rss_floor: the server's lowest VmRSS (kB) of 10 reads 0.1 s apart. A
# publish holds its serialized model for ~0.3 s (a step of the blob's size,
# 18 MB at ML-100k with the item regression); a leak raises the floor.
rss_floor() {
  local min= r i
  for i in 1 2 3 4 5 6 7 8 9 10; do
    r=$(awk '/^VmRSS/ { print $2 }' "/proc/$server_pid/status" 2>/dev/null) || r=
    if [ -n "$r" ] && { [ -z "$min" ] || [ "$r" -lt "$min" ]; }; then min=$r; fi
    sleep 0.1
  done
  echo "${min:-0}"
}
died=0
while [ "$(elapsed)" -lt "$duration" ]; do
  "$bin/rbmrec-loadgen" --server "127.0.0.1:$port" --concurrency "$conc" \
    --duration 10 --warmup 0 --mix predict=8,recommend=2 --ratings "$data" \
    --json >"$tmp/load.json" || true
  if ! kill -0 "$server_pid" 2>/dev/null; then
    echo "soak: the server died at t=$(elapsed)s; log tail:" && tail -5 "$tmp/server.log"
    died=1
    break
  fi
  rss=$(rss_floor)
  dbb=$(stat -c %s "$db") walb=$(stat -c %s "$db-wal" 2>/dev/null || echo 0)
  cli --json models >"$tmp/models.json"
  other=$(cat "$tmp/errors.log" 2>/dev/null | wc -l)
  python3 - "$tmp/load.json" "$tmp/models.json" "$(elapsed)" "$rss" "$dbb" "$walb" "$other" >>"$tmp/samples" <<'PY'
import json, sys
load = {r["rpc"]: r for r in json.load(open(sys.argv[1]))["rpcs"]}
models = json.load(open(sys.argv[2]))["models"]
p, r = load.get("predict", {}), load.get("recommend", {})
full = sum(m["kind"] == "full" for m in models)
model_bytes = sum(int(m.get("size_bytes", 0)) for m in models)
print(sys.argv[3], p.get("qps", 0), p.get("p99_ms", 0), r.get("qps", 0),
      r.get("p99_ms", 0), load["overall"]["errors"], sys.argv[4], sys.argv[5],
      sys.argv[6], full, len(models) - full, sys.argv[7], model_bytes)
PY
  tail -1 "$tmp/samples" | awk '{ printf "  t=%ds predict p99 %.2f ms, RSS %.0f MB, db %.0f MB, WAL %.0f MB, versions %d, errors %d\n", $1, $3, $7 / 1024, $8 / 1048576, $9 / 1048576, $10 + $11, $6 + $12 }' >&2
done
touch "$tmp/stop"
wait_for_workers() { local p; for p in $(jobs -p); do [ "$p" = "$server_pid" ] || wait "$p"; done; }
wait_for_workers
echo "trains at t = $(tr '\n' ' ' <"$tmp/trains" 2>/dev/null || true)s; online updates $(cli --json stats | python3 -c 'import json,sys; print(json.load(sys.stdin)["online_updates"])' || echo "unknown")"
rc=0
kill -TERM "$server_pid" 2>/dev/null || true
wait "$server_pid" || rc=$?
server_pid=
echo "server exit code after SIGTERM: $rc"
echo
python3 "$root/bench/suites/soak_report.py" "$tmp/samples" --duration "$duration" \
  "${version_limit[@]}" --errors-log "$tmp/errors.log" || died=1
exit "$died"
