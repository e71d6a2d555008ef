#!/usr/bin/env bash
# Measures the service on ML-100k (docs/benchmarks.md), loopback, printing
# every figure as measured:
#   (a) `rbmrec import u.data` into a new database vs the sqlite3 shell's
#       `.import` of the same file (same run, ratio); plus the same import
#       into a server that already has an active model (online updates on)
#   (b) `rbmrec evaluate u1.test` after `import u1.base` + `train` (server
#       defaults) vs `rbmrec-eval --train u1.base --test u1.test` RMSE
#   (c) PredictRatings, 10 items, concurrency 16: QPS and p99, and the same
#       server's health Check QPS in the same run (ratio)
#   (d) Recommend top 10, concurrency 16: p99
#   (d2) SimilarItems top 10 of one random item, concurrency 16: p99 (the
#        verdict's); each round also prints the same server's health Check
#        p99 at concurrency 16 (the queueing floor of any RPC there) and
#        SimilarItems at concurrency 4 (its own latency, little queueing)
#   (e) PredictRatings while full Train jobs run back to back: errors and p99
#       vs the idle p99 of a load run just before (ratio)
# With --tls, only:
#   (f) PredictRatings, 10 items, concurrency 16, on one trained database
#       served by four servers at once (copies): plain, TLS only, token only,
#       TLS + token (throwaway certificates and a read token from
#       docker/make-certs.sh; the loadgen sends --tls-ca / --token-file).
#       Each round runs the four in turn; every run is printed with its QPS
#       ratio to the plain run of the same round; the verdict uses the
#       median ratio of TLS + token (target >= 0.8). Runs in ~1.5 min.
#       Also printed: the CPU per call of the server and of the loadgen
#       apart (both run on the same cores, so the QPS ratio reflects their
#       sum). With OLD_SERVER and/or OLD_LOADGEN (binaries, e.g. a build
#       before a change), a fifth run per round: TLS + token served by
#       OLD_SERVER (its own copy of the database, which it must be able to
#       read) and driven by OLD_LOADGEN (either defaults to the new one),
#       with the new/old QPS ratio of TLS + token in the same round.
# With --ml1m, only (c) and (d) at MovieLens 1M scale, as a new user would
#   try it: `rbmrec import ratings.dat` (timed), `rbmrec train` with the
#   server's defaults (timed), then PredictRatings vs health and Recommend
#   (and SimilarItems, d2) with the load generator drawing users and items
#   from ratings.dat; targets Predict/health QPS >= 0.6 and Recommend p99
#   <= 5 ms. Also (d') filtered Recommend in the same rounds as (d), after
#   `rbmrec items import movies.dat`: one genre (the one nearest 10% of the
#   items) and a candidate set of 500 items (a fixed pseudo-random sample);
#   target each filtered p99 <= the unfiltered p99 of its round (median
#   of the rounds' ratios: the machine's load drifts between rounds); then (g)
#   `rbmrec recommend --all-users -n 10` (RecommendAll, every user into a
#   CSV file; passes adding up to half a load run) in users/s against the
#   QPS of (d)'s Recommend load run again right before it, per round
#   (target: median ratio >= 2x), and 20 sampled users' lists against their
#   Recommend. ~6 min.
# Starts its own servers on free ports with temporary databases and removes
# them on exit. Data is read from ../shared/data/movielens/ml-100k (ml-1m
# with --ml1m; relative to the repository root; never copied into the
# repo). Runs in ~2.5 min.
#
# Usage: bench/service_bench.sh [--tls | --ml1m] [DATA_DIR]
# Env:   DURATION=5 (seconds per load run), CONCURRENCY=16, REPEAT=3 (rounds
#        of (c), (d) and (e); 5 with --ml1m; every round is printed,
#        verdicts use medians),
#        OLD_SERVER=path/to/rbmrec-server (with --tls: see (f); otherwise
#        optional: also time the
#        with-model import on this binary, e.g. a build before a change,
#        and run every load of (c) and (d) on it too, right after the same
#        load on the new binary, each serving its own copy of the same
#        database: old/new QPS ratios per round, and the medians)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mode=all
case "${1:-}" in
  --tls) mode=tls; shift ;;
  --ml1m) mode=ml1m; shift ;;
esac
if [ "$mode" = ml1m ]; then
  ml=${1:-$root/../shared/data/movielens/ml-1m}
  data_files=(ratings.dat movies.dat)
  load_ratings=$ml/ratings.dat
else
  ml=${1:-$root/../shared/data/movielens/ml-100k}
  data_files=(u.data u1.base u1.test)
  load_ratings=$ml/u1.base
fi
bin=$root/build/bin
duration=${DURATION:-5}
conc=${CONCURRENCY:-16}
# --ml1m's verdicts are p99 ratios and p99s on a machine the load generator
# shares: 5 rounds there, so that one disturbed round cannot decide them.
if [ "$mode" = ml1m ]; then repeat=${REPEAT:-5}; else repeat=${REPEAT:-3}; fi

for f in "${data_files[@]}"; do
  [ -r "$ml/$f" ] || { echo "service_bench: missing $ml/$f" >&2; exit 1; }
done
need=()
tools=(rbmrec rbmrec-server rbmrec-loadgen)
[ "$mode" = all ] && tools+=(rbmrec-eval)
for t in "${tools[@]}"; do
  [ -x "$bin/$t" ] || need+=(--target "$t")
done
if [ ${#need[@]} -gt 0 ]; then
  cmake --build "$root/build" -j2 "${need[@]}" >&2
fi
if [ "$mode" = all ] && ! command -v sqlite3 >/dev/null; then
  echo "service_bench: sqlite3 not found; installing it with apt-get" >&2
  apt-get install -y sqlite3 >/dev/null
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/rbmrec-service-bench.XXXXXX")
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

now_ms() { echo $(($(date +%s%N) / 1000000)); }
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
# json FILE EXPR: evaluates a Python expression over the JSON object d.
json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }
ratio() { python3 -c "import sys; a,b=map(float,sys.argv[1:]); print('%.2f' % (a/b) if b else 'inf')" "$1" "$2"; }
verdict() { python3 -c "import sys; print('MET' if eval(sys.argv[1]) else 'MISSED')" "$1"; }

server_pid=
port=
# Extra flags of the next start_server (e.g. TLS) and of the CLI and loadgen
# calls against it (e.g. --tls-ca, --token-file).
server_extra=()
client_extra=()
# start_server DB [SERVER_BINARY]
start_server() {
  port=$(free_port)
  "${2:-$bin/rbmrec-server}" --listen "127.0.0.1:$port" --db "$1" \
    ${server_extra[@]+"${server_extra[@]}"} >"$tmp/server-$port.log" 2>&1 &
  server_pid=$!
  pids+=("$server_pid")
  local i
  for i in $(seq 100); do
    if "$bin/rbmrec" --server "127.0.0.1:$port" --timeout 1 \
      ${client_extra[@]+"${client_extra[@]}"} health >/dev/null 2>&1; then return 0; fi
    sleep 0.1
  done
  echo "service_bench: server did not start; log:" >&2
  cat "$tmp/server-$port.log" >&2
  exit 1
}
stop_server() {
  kill -TERM "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
}
cli() { "$bin/rbmrec" --server "127.0.0.1:$port" ${client_extra[@]+"${client_extra[@]}"} "$@"; }
server_cpu_ticks() { awk '{print $14 + $15}' "/proc/$server_pid/stat"; }
# loadgen OUT_JSON [loadgen flags]; also writes OUT_JSON.cpu: "server S
# loadgen L" CPU seconds used during the run (both share the same cores).
loadgen() {
  local out=$1 s0 s1
  shift
  s0=$(server_cpu_ticks)
  /usr/bin/time -f "%U %S" -o "$out.time" \
    "${loadgen_bin:-$bin/rbmrec-loadgen}" --server "127.0.0.1:$port" --concurrency "$conc" \
    --duration "$duration" --warmup 1 --json \
    ${client_extra[@]+"${client_extra[@]}"} "$@" >"$out"
  s1=$(server_cpu_ticks)
  python3 -c "import sys; s=(int(sys.argv[2])-int(sys.argv[1]))/int(sys.argv[3]); u,k=map(float,open(sys.argv[4]).read().split()[-2:]); print('server %.1f s, loadgen %.1f s' % (s, u+k))" \
    "$s0" "$s1" "$(getconf CLK_TCK)" "$out.time" >"$out.cpu"
}
# time_import FILE -> prints the wall ms of `rbmrec import FILE`
time_import() {
  local t0 t1
  t0=$(now_ms)
  cli import "$1" >"$tmp/import.out" 2>&1
  t1=$(now_ms)
  echo $((t1 - t0))
}

echo "rbmrec service benchmark: $(nproc) cores, concurrency $conc, ${duration}s per load run"
echo "data: $ml"
median() { python3 -c "import statistics,sys; print(statistics.median(map(float,sys.argv[1:])))" "$@"; }

if [ "$mode" = tls ]; then
  # ---- (f) PredictRatings plain vs TLS + token ------------------------------
  bash "$root/docker/make-certs.sh" "$tmp/certs" --tokens "$bin/rbmrec-server" 2>/dev/null
  start_server "$tmp/f.db"
  cli import "$ml/u1.base" >/dev/null 2>&1
  cli train >/dev/null 2>&1
  stop_server
  certs=$tmp/certs
  tls_server=(--tls-cert "$certs/server.pem" --tls-key "$certs/server.key")
  tls_client=(--tls-ca "$certs/ca.pem")
  token_server=(--auth-tokens "$certs/tokens")
  token_client=(--token-file "$certs/reader.token")
  # Four servers on copies of the database: plain, TLS only, token only
  # (allowed without TLS on loopback), TLS + token.
  kinds=(plain tls token both)
  [ -n "${OLD_SERVER:-}${OLD_LOADGEN:-}" ] && kinds+=(old)
  declare -A k_port k_pid k_client k_loadgen
  for k in "${kinds[@]}"; do
    for f in "$tmp"/f.db*; do cp "$f" "$tmp/f-$k.db${f#"$tmp"/f.db}"; done
    case $k in
      plain) server_extra=() client_extra=() ;;
      tls) server_extra=("${tls_server[@]}") client_extra=("${tls_client[@]}") ;;
      token) server_extra=("${token_server[@]}") client_extra=("${token_client[@]}") ;;
      both | old) server_extra=("${tls_server[@]}" "${token_server[@]}")
        client_extra=("${tls_client[@]}" "${token_client[@]}") ;;
    esac
    if [ "$k" = old ]; then
      start_server "$tmp/f-$k.db" "${OLD_SERVER:-$bin/rbmrec-server}"
      k_loadgen[$k]=${OLD_LOADGEN:-$bin/rbmrec-loadgen}
    else
      start_server "$tmp/f-$k.db"
      k_loadgen[$k]=$bin/rbmrec-loadgen
    fi
    k_port[$k]=$port k_pid[$k]=$server_pid k_client[$k]="${client_extra[*]}"
  done
  # The read token must be enough, and no token must be refused.
  port=${k_port[both]}
  read -r -a client_extra <<<"${k_client[both]}"
  cli stats >/dev/null
  if "$bin/rbmrec" --server "127.0.0.1:$port" "${tls_client[@]}" --token-file '' \
    stats >/dev/null 2>&1; then
    echo "service_bench: the TLS + token server answered without a token" >&2
    exit 1
  fi
  if [ -n "${k_port[old]:-}" ]; then
    echo "(f) old: TLS + token on OLD_SERVER=${OLD_SERVER:-(new)}, driven by OLD_LOADGEN=${OLD_LOADGEN:-(new)}"
  fi
  declare -A k_qps_all k_ratios k_cpu_all k_scpu_all k_lcpu_all
  old_ratios=()
  echo
  for r in $(seq "$repeat"); do
    for k in "${kinds[@]}"; do
      port=${k_port[$k]} server_pid=${k_pid[$k]} loadgen_bin=${k_loadgen[$k]}
      read -r -a client_extra <<<"${k_client[$k]}"
      loadgen "$tmp/$k.json" --mix predict=1 --items-per-predict 10 --ratings "$ml/u1.base"
    done
    loadgen_bin=
    p_qps=$(json "$tmp/plain.json" 'd["rpcs"][0]["qps"]')
    for k in "${kinds[@]}"; do
      qps=$(json "$tmp/$k.json" 'd["rpcs"][0]["qps"]')
      p99=$(json "$tmp/$k.json" 'd["rpcs"][0]["p99_ms"]')
      err=$(json "$tmp/$k.json" 'd["rpcs"][0]["errors"]')
      first=$(json "$tmp/$k.json" 'd["rpcs"][0]["first_error"]')
      kr=$(ratio "$qps" "$p_qps")
      # CPU (server + loadgen) per call, less sensitive than QPS to what else
      # runs on the machine: the CPU of the whole run (warmup included) over
      # QPS x (duration + warmup).
      # Server, loadgen and total us per call.
      read -r s_us l_us cpu_us < <(python3 -c "import re,sys; s,l=map(float,re.findall(r'([0-9.]+) s',open(sys.argv[1]).read())); n=float(sys.argv[2])*(float(sys.argv[3])+1); print('%.0f %.0f %.0f' % (s*1e6/n, l*1e6/n, (s+l)*1e6/n))" \
        "$tmp/$k.json.cpu" "$qps" "$duration")
      printf '(f) run %s: PredictRatings 10 items, c=%s, %-6s QPS %s, p99 %s ms, errors %s%s; /plain %s; CPU %s, ~%s us/call (server ~%s, loadgen ~%s)\n' \
        "$r" "$conc" "$k:" "$qps" "$p99" "$err" "${first:+ (first: $first)}" "$kr" "$(cat "$tmp/$k.json.cpu")" "$cpu_us" "$s_us" "$l_us"
      k_qps_all[$k]="${k_qps_all[$k]:-} $qps"
      k_ratios[$k]="${k_ratios[$k]:-} $kr"
      k_cpu_all[$k]="${k_cpu_all[$k]:-} $cpu_us"
      k_scpu_all[$k]="${k_scpu_all[$k]:-} $s_us"
      k_lcpu_all[$k]="${k_lcpu_all[$k]:-} $l_us"
    done
    if [ -n "${k_port[old]:-}" ]; then
      b_qps=$(json "$tmp/both.json" 'd["rpcs"][0]["qps"]')
      o_qps=$(json "$tmp/old.json" 'd["rpcs"][0]["qps"]')
      old_ratios+=("$(ratio "$b_qps" "$o_qps")")
      echo "(f) run $r: TLS + token new/old QPS $(ratio "$b_qps" "$o_qps")"
    fi
  done
  echo "(f) median of $repeat (ratio to the plain run of the same round):"
  for k in "${kinds[@]}"; do
    # shellcheck disable=SC2086 # word lists
    printf '    %-24s QPS %s, ratio %s; CPU (server + loadgen) ~%s us/call: server ~%s, loadgen ~%s\n' \
      "$k$([ "$k" = both ] && echo ' (TLS + read token)')$([ "$k" = old ] && echo ' (TLS + token, old)'):" \
      "$(median ${k_qps_all[$k]})" "$(median ${k_ratios[$k]})" "$(median ${k_cpu_all[$k]})" \
      "$(median ${k_scpu_all[$k]})" "$(median ${k_lcpu_all[$k]})"
  done
  # shellcheck disable=SC2086
  echo "    server CPU per call, plain/both (medians): $(ratio "$(median ${k_scpu_all[plain]})" "$(median ${k_scpu_all[both]})"); loadgen: $(ratio "$(median ${k_lcpu_all[plain]})" "$(median ${k_lcpu_all[both]})")"
  if [ -n "${k_port[old]:-}" ]; then
    echo "    TLS + token new/old QPS, median of $repeat: $(median "${old_ratios[@]}")"
  fi
  # shellcheck disable=SC2086
  tr=$(median ${k_ratios[both]})
  echo "    target TLS + token / plain QPS >= 0.8:  $tr $(verdict "$tr >= 0.8")"
  exit 0
fi

if [ "$mode" = ml1m ]; then
  # ---- ML-1M: import and train as a new user would, then (c) and (d) -------
  cur_db=$tmp/m.db
  start_server "$cur_db"
  import_ms=$(time_import "$load_ratings")
  rows=$(grep -o 'accepted [0-9,]*' "$tmp/import.out" | tr -dc 0-9)
  t0=$(now_ms)
  cli train >"$tmp/train.out" 2>&1
  t1=$(now_ms)
  echo
  echo "(ml1m) rbmrec import ratings.dat: $import_ms ms, $rows rows accepted"
  echo "       rbmrec train (server defaults): $((t1 - t0)) ms ($(tail -1 "$tmp/train.out"))"
  cli items import "$ml/movies.dat" >"$tmp/items.out" 2>&1
  # The genre nearest 10% of the items, and 500 items drawn with a fixed seed.
  genre=$(python3 - "$ml/movies.dat" "$tmp/candidates.txt" <<'PY'
import collections, random, sys
ids, count = [], collections.Counter()
for line in open(sys.argv[1], encoding="latin-1"):
    f = line.rstrip("\n").split("::")
    if len(f) == 3:
        ids.append(f[0])
        count.update(g for g in f[2].split("|") if g)
open(sys.argv[2], "w").write("\n".join(random.Random(1).sample(ids, 500)) + "\n")
g = min(count, key=lambda g: abs(count[g] / len(ids) - 0.10))
print("%s %d %d" % (g, count[g], len(ids)))
PY
)
  read -r genre genre_items all_items <<<"$genre"
  echo "       rbmrec items import movies.dat: $(tail -1 "$tmp/items.out"); genre $genre: $genre_items of $all_items items"
  sleep 1
fi

if [ "$mode" = all ]; then
# ---- (a) import into a new database, vs sqlite3 .import --------------------
start_server "$tmp/a.db"
import_ms=$(time_import "$ml/u.data")
rows=$(grep -o 'accepted [0-9,]*' "$tmp/import.out" | tr -dc 0-9)
stop_server
t0=$(now_ms)
sqlite3 "$tmp/sqlite.db" <<EOF
CREATE TABLE ratings(user TEXT, item TEXT, rating REAL, ts INTEGER);
.mode tabs
.import $ml/u.data ratings
EOF
t1=$(now_ms)
sqlite_ms=$((t1 - t0))
sqlite_rows=$(sqlite3 "$tmp/sqlite.db" 'SELECT count(*) FROM ratings')
r=$(ratio "$import_ms" "$sqlite_ms")
echo
echo "(a) rbmrec import u.data (new db): ${import_ms} ms, ${rows} rows accepted"
echo "    sqlite3 .import u.data:        ${sqlite_ms} ms, ${sqlite_rows} rows"
echo "    ratio rbmrec/sqlite3:          ${r}x"
echo "    target <= 2000 ms and <= 3x:   $(verdict "$import_ms <= 2000 and $r <= 3")"

# ---- (b) evaluate after import u1.base + train vs rbmrec-eval --------------
cur_db=$tmp/b.db
start_server "$cur_db"
cli import "$ml/u1.base" >/dev/null 2>&1
t0=$(now_ms)
cli train >"$tmp/train.out" 2>&1
t1=$(now_ms)
train_ms=$((t1 - t0))
cli --json evaluate "$ml/u1.test" >"$tmp/eval.json"
serve_rmse=$(json "$tmp/eval.json" 'd["rmse"]')
serve_n=$(json "$tmp/eval.json" 'd["n"]')
"$bin/rbmrec-eval" --json --quiet --train "$ml/u1.base" --test "$ml/u1.test" \
  >"$tmp/rbmrec-eval.json"
eval_rmse=$(json "$tmp/rbmrec-eval.json" 'd["rmse"]')
diff=$(python3 -c "import sys; print('%.4f' % abs(float(sys.argv[1])-float(sys.argv[2])))" "$serve_rmse" "$eval_rmse")
echo
echo "(b) train (server defaults):      ${train_ms} ms ($(tail -1 "$tmp/train.out"))"
echo "    rbmrec evaluate u1.test:       RMSE $serve_rmse (n $serve_n)"
echo "    rbmrec-eval u1.base/u1.test:   RMSE $eval_rmse"
echo "    |difference|:                  $diff"
echo "    target <= 0.002:               $(verdict "$diff <= 0.002")"

# ---- (a') import into a server with an active model (online updates) ------
with_model_ms=$(time_import "$ml/u.data")
echo
echo "(a') rbmrec import u.data into the server of (b) (model active, online on): ${with_model_ms} ms"
if [ -n "${OLD_SERVER:-}" ]; then
  stop_server
  start_server "$tmp/b2.db" "$OLD_SERVER"
  cli import "$ml/u1.base" >/dev/null 2>&1
  cli train >/dev/null 2>&1
  old_ms=$(time_import "$ml/u.data")
  echo "     same steps on OLD_SERVER=$OLD_SERVER: ${old_ms} ms (ratio old/new $(ratio "$old_ms" "$with_model_ms")x)"
  stop_server
  start_server "$tmp/b.db"
fi
sleep 1  # let the online updates of the import settle
fi

# With OLD_SERVER: a copy of the database, served by the old binary beside
# the new one (with a model it trained itself); use_server new|old points
# cli/loadgen at either.
new_port=$port new_pid=$server_pid
if [ -n "${OLD_SERVER:-}" ]; then
  stop_server
  for f in "$cur_db"*; do cp "$f" "$tmp/old.db${f#"$cur_db"}"; done
  start_server "$tmp/old.db" "$OLD_SERVER"
  old_port=$port old_pid=$server_pid
  # The old binary may not read the new binary's model file (a newer
  # format): it trains its own model on its copy of the ratings, with its
  # own defaults, and serves that.
  if ! cli train >"$tmp/old-train.out" 2>&1; then
    echo "service_bench: training on OLD_SERVER failed: $(tail -1 "$tmp/old-train.out")" >&2
    exit 1
  fi
  echo "       OLD_SERVER trained its own model: $(tail -1 "$tmp/old-train.out")"
  start_server "$cur_db"
  new_port=$port new_pid=$server_pid
  sleep 1
fi
use_server() {
  if [ "$1" = old ]; then port=$old_port server_pid=$old_pid; else port=$new_port server_pid=$new_pid; fi
}
# old_run TYPE NEW_JSON [loadgen flags]: the same load on OLD_SERVER; prints
# its line and appends the old/new QPS ratio to old_ratios_TYPE.
old_ratios_predict=() old_ratios_recommend=() old_p99_recommend=()
old_run() {
  local type=$1 new_json=$2 q p50 p99 e nq
  shift 2
  use_server old
  loadgen "$tmp/old.json" "$@"
  use_server new
  q=$(json "$tmp/old.json" 'd["rpcs"][0]["qps"]')
  p50=$(json "$tmp/old.json" 'd["rpcs"][0]["p50_ms"]')
  p99=$(json "$tmp/old.json" 'd["rpcs"][0]["p99_ms"]')
  e=$(json "$tmp/old.json" 'd["rpcs"][0]["errors"]')
  nq=$(json "$new_json" 'd["rpcs"][0]["qps"]')
  if [ "$e" != 0 ]; then
    echo "service_bench: OLD_SERVER answered $e calls with errors; no old/new figures" >&2
    exit 1
  fi
  echo "          OLD_SERVER, same load:             QPS $q, p50 $p50 ms, p99 $p99 ms, errors $e; new/old QPS $(ratio "$nq" "$q")"
  echo "          CPU old run: $(cat "$tmp/old.json.cpu")"
  if [ "$type" = predict ]; then
    old_ratios_predict+=("$(ratio "$nq" "$q")")
  else
    old_ratios_recommend+=("$(ratio "$nq" "$q")") old_p99_recommend+=("$p99")
  fi
}

# ---- (c) PredictRatings vs health Check -------------------------------------
# The machine is shared and noisy: each load run is repeated $repeat times
# (predict and health alternating, so each ratio comes from adjacent runs);
# every run is printed and the verdicts use the medians.
p_qps_all=() p_p99_all=() h_qps_all=() ratios=()
echo
for r in $(seq "$repeat"); do
  loadgen "$tmp/predict.json" --mix predict=1 --items-per-predict 10 --ratings "$load_ratings"
  loadgen "$tmp/health.json" --mix health=1
  p_qps=$(json "$tmp/predict.json" 'd["rpcs"][0]["qps"]')
  p_p99=$(json "$tmp/predict.json" 'd["rpcs"][0]["p99_ms"]')
  p_p50=$(json "$tmp/predict.json" 'd["rpcs"][0]["p50_ms"]')
  p_err=$(json "$tmp/predict.json" 'd["rpcs"][0]["errors"]')
  h_qps=$(json "$tmp/health.json" 'd["rpcs"][0]["qps"]')
  h_p99=$(json "$tmp/health.json" 'd["rpcs"][0]["p99_ms"]')
  pr=$(ratio "$p_qps" "$h_qps")
  echo "(c) run $r: PredictRatings 10 items, c=$conc: QPS $p_qps, p50 $p_p50 ms, p99 $p_p99 ms, errors $p_err"
  echo "          health Check, c=$conc:             QPS $h_qps, p99 $h_p99 ms; Predict/health QPS $pr"
  echo "          CPU predict run: $(cat "$tmp/predict.json.cpu"); health run: $(cat "$tmp/health.json.cpu") (over $((duration + 1)) s wall, $(nproc) cores)"
  p_qps_all+=("$p_qps") p_p99_all+=("$p_p99") h_qps_all+=("$h_qps") ratios+=("$pr")
  if [ -n "${OLD_SERVER:-}" ]; then
    old_run predict "$tmp/predict.json" --mix predict=1 --items-per-predict 10 --ratings "$load_ratings"
  fi
done
p_p99=$(median "${p_p99_all[@]}")
pr=$(median "${ratios[@]}")
echo "(c) median of $repeat: PredictRatings QPS $(median "${p_qps_all[@]}"), p99 $p_p99 ms; health QPS $(median "${h_qps_all[@]}"); ratio $pr"
if [ -n "${OLD_SERVER:-}" ]; then
  echo "    new/old PredictRatings QPS, median of $repeat: $(median "${old_ratios_predict[@]}")"
fi
echo "    target p99 <= 2 ms:              $(verdict "$p_p99 <= 2")"
if [ "$mode" = ml1m ]; then
  echo "    target QPS ratio >= 0.6 (ML-1M): $(verdict "$pr >= 0.6")"
else
  echo "    target QPS ratio >= 0.5:         $(verdict "$pr >= 0.5")"
fi

# ---- (d) Recommend top 10 ---------------------------------------------------
r_p99_all=() r_qps_all=() g_p99_all=() c_p99_all=() g_rat_all=() c_rat_all=()
echo
for r in $(seq "$repeat"); do
  loadgen "$tmp/recommend.json" --mix recommend=1 --n 10 --ratings "$load_ratings"
  r_qps=$(json "$tmp/recommend.json" 'd["rpcs"][0]["qps"]')
  r_p50=$(json "$tmp/recommend.json" 'd["rpcs"][0]["p50_ms"]')
  r_p99=$(json "$tmp/recommend.json" 'd["rpcs"][0]["p99_ms"]')
  r_err=$(json "$tmp/recommend.json" 'd["rpcs"][0]["errors"]')
  echo "(d) run $r: Recommend top 10, c=$conc: QPS $r_qps, p50 $r_p50 ms, p99 $r_p99 ms, errors $r_err"
  echo "          CPU: $(cat "$tmp/recommend.json.cpu")"
  r_p99_all+=("$r_p99") r_qps_all+=("$r_qps")
  if [ -n "${OLD_SERVER:-}" ]; then
    old_run recommend "$tmp/recommend.json" --mix recommend=1 --n 10 --ratings "$load_ratings"
  fi
  if [ "$mode" = ml1m ]; then
    # (d') the same load with a filter, right after the unfiltered run.
    loadgen "$tmp/genre.json" --mix recommend=1 --n 10 --ratings "$load_ratings" --category "$genre"
    loadgen "$tmp/cand.json" --mix recommend=1 --n 10 --ratings "$load_ratings" --candidate-items "$tmp/candidates.txt"
    for k in genre cand; do
      f_qps=$(json "$tmp/$k.json" 'd["rpcs"][0]["qps"]')
      f_p50=$(json "$tmp/$k.json" 'd["rpcs"][0]["p50_ms"]')
      f_p99=$(json "$tmp/$k.json" 'd["rpcs"][0]["p99_ms"]')
      f_err=$(json "$tmp/$k.json" 'd["rpcs"][0]["errors"]')
      f_rat=$(python3 -c "import sys; print('%.3f' % (float(sys.argv[1]) / float(sys.argv[2])))" "$f_p99" "$r_p99")
      if [ "$k" = genre ]; then
        what="--category $genre"; g_p99_all+=("$f_p99") g_rat_all+=("$f_rat")
      else
        what="500 candidates"; c_p99_all+=("$f_p99") c_rat_all+=("$f_rat")
      fi
      echo "(d') run $r: Recommend top 10, $what, c=$conc: QPS $f_qps, p50 $f_p50 ms, p99 $f_p99 ms (unfiltered $r_p99 ms: ratio $f_rat), errors $f_err"
    done
  fi
done
r_p99=$(median "${r_p99_all[@]}")
echo "(d) median of $repeat: Recommend QPS $(median "${r_qps_all[@]}"), p99 $r_p99 ms"
if [ -n "${OLD_SERVER:-}" ]; then
  echo "    OLD_SERVER: p99 median $(median "${old_p99_recommend[@]}") ms; new/old Recommend QPS, median of $repeat: $(median "${old_ratios_recommend[@]}")"
fi
echo "    target p99 <= 5 ms:              $(verdict "$r_p99 <= 5")"

# ---- (d2) SimilarItems top 10 of one random item ------------------------------
# Each round: SimilarItems at the documented concurrency (the verdict's
# run), the same server's health Check at that concurrency right after (the
# floor of any RPC's p99 there: with c calls in flight on shared cores,
# latency is mostly queueing), and SimilarItems at concurrency 4 (the
# call's own latency with little queueing).
s_p99_all=() s_qps_all=() s_h99_all=() s4_p99_all=()
echo
for r in $(seq "$repeat"); do
  loadgen "$tmp/similar.json" --mix similar=1 --n 10 --ratings "$load_ratings"
  loadgen "$tmp/similar-health.json" --mix health=1
  saved_conc=$conc
  conc=4
  loadgen "$tmp/similar4.json" --mix similar=1 --n 10 --ratings "$load_ratings"
  conc=$saved_conc
  s_qps=$(json "$tmp/similar.json" 'd["rpcs"][0]["qps"]')
  s_p99=$(json "$tmp/similar.json" 'd["rpcs"][0]["p99_ms"]')
  s_err=$(json "$tmp/similar.json" 'd["rpcs"][0]["errors"]')
  s_h99=$(json "$tmp/similar-health.json" 'd["rpcs"][0]["p99_ms"]')
  s_hqps=$(json "$tmp/similar-health.json" 'd["rpcs"][0]["qps"]')
  s4_qps=$(json "$tmp/similar4.json" 'd["rpcs"][0]["qps"]')
  s4_p99=$(json "$tmp/similar4.json" 'd["rpcs"][0]["p99_ms"]')
  s4_err=$(json "$tmp/similar4.json" 'd["rpcs"][0]["errors"]')
  echo "(d2) run $r: SimilarItems top 10, c=$conc: QPS $s_qps, p99 $s_p99 ms, errors $s_err; health Check c=$conc: QPS $s_hqps, p99 $s_h99 ms"
  echo "(d2) run $r: SimilarItems top 10, c=4: QPS $s4_qps, p99 $s4_p99 ms, errors $s4_err"
  s_p99_all+=("$s_p99") s_qps_all+=("$s_qps") s_h99_all+=("$s_h99") s4_p99_all+=("$s4_p99")
done
s_p99=$(median "${s_p99_all[@]}")
echo "(d2) median of $repeat: SimilarItems QPS $(median "${s_qps_all[@]}"), p99 $s_p99 ms (c=$conc); health Check p99 $(median "${s_h99_all[@]}") ms (c=$conc); SimilarItems p99 $(median "${s4_p99_all[@]}") ms (c=4)"
echo "    target p99 <= 2 ms (c=$conc):      $(verdict "$s_p99 <= 2")"
if [ "$mode" = ml1m ]; then
  g_p99=$(median "${g_p99_all[@]}") c_p99=$(median "${c_p99_all[@]}")
  g_rat=$(median "${g_rat_all[@]}") c_rat=$(median "${c_rat_all[@]}")
  echo "(d') median of $repeat: p99 unfiltered $r_p99 ms, --category $genre $g_p99 ms, 500 candidates $c_p99 ms"
  echo "     filtered/unfiltered p99 within each round, median of $repeat: genre $g_rat, 500 candidates $c_rat"
  echo "    target each filtered p99 <= unfiltered p99 (median of the rounds' ratios <= 1): genre $(verdict "$g_rat <= 1"), candidates $(verdict "$c_rat <= 1")"
  # ---- (g) RecommendAll: top 10 of every user vs Recommend ----------------
  # Each round pairs the two in time (this machine's load drifts between
  # minutes): (d)'s Recommend load again (one call per user, c=16), then
  # `rbmrec recommend --all-users` (one stream, CSV file synced at most
  # once a second) passes over all users until they add up to at least
  # half a load run's seconds (one pass takes ~0.3 s: a single pass is
  # decided by a moment's noise); the round's ratio is the passes' users
  # per second over the Recommend QPS, the verdict uses the median ratio.
  # Then the same lists: 20 users' rows against their Recommend.
  g_rate_all=() g_qps_all=() g_ratio_all=()
  echo
  for r in $(seq "$repeat"); do
    loadgen "$tmp/recommend-g.json" --mix recommend=1 --n 10 --ratings "$load_ratings"
    g_qps=$(json "$tmp/recommend-g.json" 'd["rpcs"][0]["qps"]')
    g_users=0 g_s=0 g_passes=0
    while [ "$g_passes" -lt 2 ] || python3 -c "import sys; sys.exit(float(sys.argv[1]) >= float(sys.argv[2]) / 2)" "$g_s" "$duration"; do
      cli --json recommend --all-users -n 10 --out "$tmp/bulk.csv" >"$tmp/bulk.json"
      g_users=$((g_users + $(json "$tmp/bulk.json" 'd["users"]')))
      g_s=$(python3 -c "import sys; print(float(sys.argv[1]) + float(sys.argv[2]))" "$g_s" "$(json "$tmp/bulk.json" 'repr(d["seconds"])')")
      g_passes=$((g_passes + 1))
    done
    g_rate=$(python3 -c "import sys; print('%.0f' % (float(sys.argv[1])/float(sys.argv[2])))" "$g_users" "$g_s")
    g_s=$(python3 -c "import sys; print('%.3f' % float(sys.argv[1]))" "$g_s")
    gr=$(ratio "$g_rate" "$g_qps")
    echo "(g) run $r: RecommendAll top 10: $g_passes passes, $g_users users in $g_s s: $g_rate users/s; Recommend c=$conc just before: QPS $g_qps; ratio ${gr}x"
    g_rate_all+=("$g_rate") g_qps_all+=("$g_qps") g_ratio_all+=("$gr")
  done
  same=$(python3 - "$tmp/bulk.csv" "$bin/rbmrec" "127.0.0.1:$port" <<'PY'
import csv, json, subprocess, sys
rows = {}
for row in csv.DictReader(open(sys.argv[1])):
    rows.setdefault(row["user_id"], []).append(row["item_id"])
users = sorted(rows)[:: max(1, len(rows) // 20)][:20]
same = 0
for u in users:
    out = subprocess.run([sys.argv[2], "--server", sys.argv[3], "--json",
                          "recommend", u, "-n", "10"], check=True,
                         capture_output=True, text=True).stdout
    one = [r["item_id"] for r in json.loads(out)["recommendations"]]
    same += one == rows[u]
print(f"{same}/{len(users)}")
PY
)
  gr=$(median "${g_ratio_all[@]}")
  echo "(g) median of $repeat: RecommendAll $(median "${g_rate_all[@]}") users/s; Recommend c=$conc $(median "${g_qps_all[@]}") users/s (QPS); ratio ${gr}x (median of the rounds' ratios)"
  echo "    same lists as Recommend (sampled users): $same"
  echo "    target RecommendAll >= 2x Recommend: $(verdict "$gr >= 2")"
  stop_server
  exit 0
fi

# ---- (e) PredictRatings during full Train jobs -----------------------------
# Each of $repeat rounds: an idle load run, then a load run while Train jobs
# run back to back (one job takes ~2-3 s); the ratio is taken within the
# round, the verdict uses the median ratio and the total error count.
d_ratios=() d_errs=0 d_first=
echo
for r in $(seq "$repeat"); do
  loadgen "$tmp/idle.json" --mix predict=1 --items-per-predict 10 --ratings "$ml/u1.base"
  rm -f "$tmp/stop-training" "$tmp/trains"
  (
    while [ ! -e "$tmp/stop-training" ]; do
      if cli train >/dev/null 2>&1; then echo ok >>"$tmp/trains"; else echo fail >>"$tmp/trains"; fi
    done
  ) &
  trainer_pid=$!
  pids+=("$trainer_pid")
  sleep 0.5
  loadgen "$tmp/during.json" --mix predict=1 --items-per-predict 10 --ratings "$ml/u1.base"
  touch "$tmp/stop-training"
  wait "$trainer_pid" || true
  i_p99=$(json "$tmp/idle.json" 'd["rpcs"][0]["p99_ms"]')
  d_qps=$(json "$tmp/during.json" 'd["rpcs"][0]["qps"]')
  d_p99=$(json "$tmp/during.json" 'd["rpcs"][0]["p99_ms"]')
  d_err=$(json "$tmp/during.json" 'd["rpcs"][0]["errors"]')
  [ -z "$d_first" ] && d_first=$(json "$tmp/during.json" 'd["rpcs"][0]["first_error"]')
  n_ok=$(grep -c ok "$tmp/trains" 2>/dev/null || true)
  n_fail=$(grep -c fail "$tmp/trains" 2>/dev/null || true)
  dr=$(ratio "$d_p99" "$i_p99")
  echo "(e) run $r: PredictRatings during Train, c=$conc: QPS $d_qps, p99 $d_p99 ms (idle just before: $i_p99 ms, ratio $dr), errors $d_err; train jobs ${n_ok:-0} finished, ${n_fail:-0} failed"
  d_ratios+=("$dr")
  d_errs=$((d_errs + d_err))
done
dr=$(median "${d_ratios[@]}")
echo "(e) median ratio of $repeat: $dr; errors in total: $d_errs${d_first:+ (first: $d_first)}"
echo "    target no errors, ratio <= 3:    $(verdict "$d_errs == 0 and $dr <= 3")"
stop_server
