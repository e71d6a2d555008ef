#!/usr/bin/env bash
# Serving speed of two server binaries in the same run (before/after a
# change), loopback, one load generator for both: ML-100k u1.base, or with
# an ML-1M directory all of ratings.dat:
#   PredictRatings 10 items, health Check and Recommend top 10, concurrency
#   16, each run alternating OLD, NEW so every comparison is of adjacent
#   runs on the same (noisy, shared) machine.
# Prints every run, the medians, NEW's Predict/health QPS ratio, the
# Recommend p99 ratio NEW/OLD and the NEW/OLD QPS ratios of Predict and
# Recommend (medians of the rounds' ratios), with verdicts for the targets
# "Predict/health QPS >= 0.5" (ML-100k), "Recommend p99 within 10% of OLD"
# and "no QPS regression" (NEW/OLD >= 0.9, the rounds' spread on this
# machine).
#
# Usage: bench/serving_ab.sh OLD_BIN_DIR [NEW_BIN_DIR] [DATA_DIR]
#   *_BIN_DIR hold rbmrec-server (NEW_BIN_DIR also rbmrec and rbmrec-loadgen;
#   default build/bin). DATA_DIR: ../shared/data/movielens/ml-100k (u1.base)
#   by default, or an ML-1M directory (ratings.dat). Each server imports the
#   ratings into its own temporary database and trains with its defaults
#   (same seed).
# Env: DURATION=5 (seconds per load run), CONCURRENCY=16, REPEAT=5,
#   WRITES=1 (during every Predict and Recommend load, a writer re-rates
#   one item of one extra user through `rbmrec import` every 0.1 s, so the
#   online updater publishes a new model snapshot every few hundred ms and
#   the servers' per-snapshot user caches are rebuilt as they would be
#   under a stream of writes).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
old_bin=${1:?usage: bench/serving_ab.sh OLD_BIN_DIR [NEW_BIN_DIR] [ML100K_DIR]}
new_bin=${2:-$root/build/bin}
ml=${3:-$root/../shared/data/movielens/ml-100k}
duration=${DURATION:-5}
conc=${CONCURRENCY:-16}
repeat=${REPEAT:-5}
if [ -r "$ml/u1.base" ]; then
  ratings=$ml/u1.base
elif [ -r "$ml/ratings.dat" ]; then
  ratings=$ml/ratings.dat
else
  echo "serving_ab: missing $ml/u1.base (ML-100k) or $ml/ratings.dat (ML-1M)" >&2
  exit 1
fi
echo "serving_ab: ratings $ratings, concurrency $conc, ${duration}s per load run, $repeat rounds"
for b in "$old_bin/rbmrec-server" "$new_bin/rbmrec-server" "$new_bin/rbmrec" \
  "$new_bin/rbmrec-loadgen"; do
  [ -x "$b" ] || { echo "serving_ab: missing $b" >&2; exit 1; }
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/rbmrec-serving-ab.XXXXXX")
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }
median() { python3 -c "import statistics,sys; print('%.6g' % statistics.median(map(float,sys.argv[1:])))" "$@"; }
ratio() { python3 -c "import sys; print('%.3f' % (float(sys.argv[1])/float(sys.argv[2])))" "$1" "$2"; }
verdict() { python3 -c "import sys; print('MET' if eval(sys.argv[1]) else 'MISSED')" "$1"; }

# start NAME BIN_DIR: a server with the ratings imported and a trained model.
declare -A port
start() {
  local name=$1 dir=$2 p
  p=$(free_port)
  "$dir/rbmrec-server" --listen "127.0.0.1:$p" --db "$tmp/$name.db" \
    >"$tmp/$name.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do
    "$new_bin/rbmrec" --server "127.0.0.1:$p" --timeout 1 health >/dev/null 2>&1 && break
    sleep 0.1
  done
  "$new_bin/rbmrec" --server "127.0.0.1:$p" import "$ratings" >/dev/null 2>&1
  "$new_bin/rbmrec" --server "127.0.0.1:$p" train >/dev/null 2>&1
  port[$name]=$p
}
start old "$old_bin"
start new "$new_bin"

# writer PORT: with WRITES=1, re-rates item 1 of user 999999 every 0.1 s
# (the ratings file's own format) until killed.
writer() {
  local i=0 sep=$'\t' file=$tmp/write.data
  case $ratings in *.dat) sep='::' file=$tmp/write.dat ;; esac
  while :; do
    printf '999999%s1%s%d%s0\n' "$sep" "$sep" $((i % 5 + 1)) "$sep" >"$file"
    "$new_bin/rbmrec" --server "127.0.0.1:$1" import "$file" >/dev/null 2>&1
    i=$((i + 1))
    sleep 0.1
  done
}
run() {  # run NAME OUT [loadgen flags]
  local name=$1 out=$2 wpid=""
  shift 2
  if [ "${WRITES:-0}" = 1 ] && [[ " $* " != *" health=1 "* ]]; then
    writer "${port[$name]}" &
    wpid=$!
  fi
  "$new_bin/rbmrec-loadgen" --server "127.0.0.1:${port[$name]}" \
    --concurrency "$conc" --duration "$duration" --warmup 1 --json "$@" >"$out"
  if [ -n "$wpid" ]; then
    kill "$wpid" 2>/dev/null
    wait "$wpid" 2>/dev/null || true
  fi
}
declare -A pq hq rp rqs
for k in old new; do pq[$k]="" hq[$k]="" rp[$k]="" rqs[$k]=""; done
p_ratios="" r_ratios=""
for r in $(seq "$repeat"); do
  for k in old new; do
    run "$k" "$tmp/p.json" --mix predict=1 --items-per-predict 10 --ratings "$ratings"
    run "$k" "$tmp/h.json" --mix health=1
    run "$k" "$tmp/r.json" --mix recommend=1 --n 10 --ratings "$ratings"
    p=$(json "$tmp/p.json" 'd["rpcs"][0]["qps"]')
    pp=$(json "$tmp/p.json" 'd["rpcs"][0]["p99_ms"]')
    pe=$(json "$tmp/p.json" 'd["rpcs"][0]["errors"]')
    h=$(json "$tmp/h.json" 'd["rpcs"][0]["qps"]')
    rq=$(json "$tmp/r.json" 'd["rpcs"][0]["qps"]')
    rr=$(json "$tmp/r.json" 'd["rpcs"][0]["p99_ms"]')
    re=$(json "$tmp/r.json" 'd["rpcs"][0]["errors"]')
    printf 'run %d %s: Predict QPS %s p99 %s ms (errors %s); health QPS %s; Recommend QPS %s p99 %s ms (errors %s)\n' \
      "$r" "$k" "$p" "$pp" "$pe" "$h" "$rq" "$rr" "$re"
    pq[$k]+=" $p" hq[$k]+=" $h" rp[$k]+=" $rr" rqs[$k]+=" $rq"
    if [ "$k" = old ]; then
      old_p=$p old_rq=$rq
    else
      p_ratios+=" $(ratio "$p" "$old_p")" r_ratios+=" $(ratio "$rq" "$old_rq")"
    fi
  done
done
echo
for k in old new; do
  # shellcheck disable=SC2086
  echo "$k: median Predict QPS $(median ${pq[$k]}), health QPS $(median ${hq[$k]}), Recommend QPS $(median ${rqs[$k]}), p99 $(median ${rp[$k]}) ms"
done
# shellcheck disable=SC2086
ph=$(ratio "$(median ${pq[new]})" "$(median ${hq[new]})")
# shellcheck disable=SC2086
rr=$(ratio "$(median ${rp[new]})" "$(median ${rp[old]})")
# shellcheck disable=SC2086
pr=$(median $p_ratios)
# shellcheck disable=SC2086
qr=$(median $r_ratios)
if [ "$ratings" = "$ml/u1.base" ]; then
  echo "new Predict/health QPS ratio:        $ph   target >= 0.5: $(verdict "$ph >= 0.5")"
else
  echo "new Predict/health QPS ratio:        $ph"
fi
echo "Recommend p99 new/old:               $rr   target <= 1.10: $(verdict "$rr <= 1.10")"
echo "Predict QPS new/old (rounds' median): $pr   target >= 0.9: $(verdict "$pr >= 0.9")"
echo "Recommend QPS new/old (rounds' median): $qr   target >= 0.9: $(verdict "$qr >= 0.9")"
