#!/usr/bin/env bash
# Cost of --metrics-listen on serving, ML-100k u1.base, loopback, same run:
# two servers of the same binary on copies of one trained database, one
# without metrics ("off") and one with them ("on"); the "on" server is also
# loaded while a scraper fetches /metrics every 0.1 s ("scraped", 150x a
# typical 15 s Prometheus interval). PredictRatings 10 items and health
# Check, concurrency 16, each round running off, on, scraped back to back.
# Prints every run, the medians and the on/off and scraped/off QPS and p99
# ratios.
#
# Usage: bench/metrics_ab.sh [BIN_DIR] [ML100K_DIR]
#   BIN_DIR holds rbmrec-server, rbmrec and rbmrec-loadgen (default build/bin).
# Env: DURATION=3 (seconds per load run), CONCURRENCY=16, REPEAT=3.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$root/build/bin}
ml=${2:-$root/../shared/data/movielens/ml-100k}
duration=${DURATION:-3}
conc=${CONCURRENCY:-16}
repeat=${REPEAT:-3}
[ -r "$ml/u1.base" ] || { echo "metrics_ab: missing $ml/u1.base" >&2; exit 1; }
command -v curl >/dev/null || { echo "metrics_ab: needs curl" >&2; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rbmrec-metrics-ab.XXXXXX")
pids=()
scraper=
cleanup() {
  [ -n "$scraper" ] && kill "$scraper" 2>/dev/null
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }
median() { python3 -c "import statistics,sys; print('%.4g' % statistics.median(map(float,sys.argv[1:])))" "$@"; }
ratio() { python3 -c "import sys; print('%.3f' % (float(sys.argv[1])/float(sys.argv[2])))" "$1" "$2"; }
wait_healthy() {
  for _ in $(seq 100); do
    "$bin/rbmrec" --server "127.0.0.1:$1" --timeout 1 health >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  return 1
}

# One trained database, copied for the two servers.
p=$(free_port)
"$bin/rbmrec-server" --listen "127.0.0.1:$p" --db "$tmp/seed.db" >"$tmp/seed.log" 2>&1 &
seed=$!
wait_healthy "$p"
"$bin/rbmrec" --server "127.0.0.1:$p" import "$ml/u1.base" >/dev/null
"$bin/rbmrec" --server "127.0.0.1:$p" train >/dev/null
kill -TERM "$seed"
wait "$seed" || true
cp "$tmp/seed.db" "$tmp/off.db"
cp "$tmp/seed.db" "$tmp/on.db"

declare -A port
port[off]=$(free_port)
port[on]=$(free_port)
mport=$(free_port)
"$bin/rbmrec-server" --listen "127.0.0.1:${port[off]}" --db "$tmp/off.db" >"$tmp/off.log" 2>&1 &
pids+=($!)
"$bin/rbmrec-server" --listen "127.0.0.1:${port[on]}" --db "$tmp/on.db" \
  --metrics-listen "127.0.0.1:$mport" >"$tmp/on.log" 2>&1 &
pids+=($!)
wait_healthy "${port[off]}"
wait_healthy "${port[on]}"
port[scraped]=${port[on]}

run() {  # run SERVER OUT [loadgen flags]
  local name=$1 out=$2
  shift 2
  "$bin/rbmrec-loadgen" --server "127.0.0.1:${port[$name]}" \
    --concurrency "$conc" --duration "$duration" --warmup 1 --json "$@" >"$out"
}
declare -A pq pp hq
for k in off on scraped; do pq[$k]="" pp[$k]="" hq[$k]=""; done
scrapes=0
for r in $(seq "$repeat"); do
  for k in off on scraped; do
    if [ "$k" = scraped ]; then
      (while true; do curl -s -o /dev/null "http://127.0.0.1:$mport/metrics"; sleep 0.1; done) &
      scraper=$!
    fi
    run "$k" "$tmp/p.json" --mix predict=1 --items-per-predict 10 --ratings "$ml/u1.base"
    run "$k" "$tmp/h.json" --mix health=1
    if [ -n "$scraper" ]; then
      kill "$scraper"
      wait "$scraper" 2>/dev/null || true
      scraper=
    fi
    p=$(json "$tmp/p.json" 'd["rpcs"][0]["qps"]')
    p99=$(json "$tmp/p.json" 'd["rpcs"][0]["p99_ms"]')
    pe=$(json "$tmp/p.json" 'd["rpcs"][0]["errors"]')
    h=$(json "$tmp/h.json" 'd["rpcs"][0]["qps"]')
    printf 'run %d %-7s: Predict QPS %s p99 %s ms (errors %s); health QPS %s\n' \
      "$r" "$k" "$p" "$p99" "$pe" "$h"
    pq[$k]+=" $p" pp[$k]+=" $p99" hq[$k]+=" $h"
  done
done
echo
for k in off on scraped; do
  # shellcheck disable=SC2086
  echo "$k: median Predict QPS $(median ${pq[$k]}), p99 $(median ${pp[$k]}) ms; health QPS $(median ${hq[$k]})"
done
for k in on scraped; do
  # shellcheck disable=SC2086
  echo "$k/off: Predict QPS $(ratio "$(median ${pq[$k]})" "$(median ${pq[off]})"), p99 $(ratio "$(median ${pp[$k]})" "$(median ${pp[off]})"), health QPS $(ratio "$(median ${hq[$k]})" "$(median ${hq[off]})")"
done
curl -s "http://127.0.0.1:$mport/metrics" >"$tmp/last.txt"
echo "scrape: $(wc -c <"$tmp/last.txt") bytes; time of one scrape (5 runs, s):" \
  "$(for _ in 1 2 3 4 5; do curl -s -o /dev/null -w '%{time_total} ' "http://127.0.0.1:$mport/metrics"; done)"
grep -E '^rbmrec_rpc_requests_total|^rbmrec_rpc_in_flight\{method="(PredictRatings|Check)"' "$tmp/last.txt"
