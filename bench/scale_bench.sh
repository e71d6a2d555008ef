#!/usr/bin/env bash
# Issue 12's scale test, on this machine, without containers: rbmrec-server
# replicas on one PostgreSQL behind nginx (grpc_pass), printing every figure
# as measured:
#   (a) setup: a private PostgreSQL cluster (initdb under /tmp, as the
#       postgres user when run as root, Unix socket only, default
#       durability: fsync and synchronous_commit on); `rbmrec import u.data`
#       (ML-100k) and `rbmrec train` (server defaults) through replica 1;
#       replicas 2 and 3 start on the same database; three nginx processes
#       (generated configs under the temp dir) proxy to the first 1, 2 and 3
#       replicas. A SQLite-backed server gets the same import and training.
#   (b) PredictRatings (10 items, rbmrec-loadgen, concurrency 16) through
#       nginx with 1, 2 and 3 replicas, and straight to replica 1 without
#       the proxy: QPS and p99 per setup, REPEAT rounds, each round running
#       every setup in turn (the nginx setups in a rotating order; medians
#       printed). All processes share this
#       machine's cores: with 2 cores the replicas, nginx and the load
#       generator compete for the same CPUs, so the QPS of 2 or 3 replicas
#       is bounded by the cores, not by the replica count.
#   (c) PredictRatings straight to the PostgreSQL-backed replica 1 vs the
#       SQLite-backed server, in the same rounds as (b), alternating which
#       goes first: the median ratio PG/SQLite (target: >= 0.9).
#   (d) failover (needs replication: exactly one replica reporting
#       rbmrec_leader 1 on its metrics endpoint; skipped otherwise): a writer
#       sends one rating per AddRatings call through nginx (3 replicas) and
#       records each acknowledged one; a long Train is started through
#       nginx (the CLI follows the FAILED_PRECONDITION + rbmrec-leader
#       answer of a follower to the leader); the leader is SIGKILLed while
#       it trains; then `rbmrec train --epochs FAILOVER_EPOCHS --activate
#       always` is retried through nginx until it succeeds. Prints the times
#       from the kill until another replica reports rbmrec_leader 1 (metrics
#       polled every 20 ms) and until that Train has finished, when
#       every live replica serves the new model version, the
#       writer's acknowledged/failed calls and its longest stall, and the
#       number of acknowledged ratings missing from PostgreSQL (psql; must
#       be 0).
# Starts everything on free loopback ports; stops every process and removes
# the temp directory on exit. Data: ../shared/data/movielens/ml-100k/u.data
# (relative to the repository root; never copied into the repo). Needs
# PostgreSQL and python3-grpcio (scripts/install-deps.sh installs them),
# nginx (installed with apt-get when missing: only this benchmark uses it)
# and the binaries in build/bin (built when missing). ~2 min.
#
# Usage: bench/scale_bench.sh [--no-failover | --failover-only | --pg-vs-sqlite] [DATA_DIR]
#   --pg-vs-sqlite  only (c) (no nginx, one PostgreSQL replica)
#   --failover-only (a) without the SQLite server, then (d)
# Env:   DURATION=5 (seconds per load run), CONCURRENCY=16, REPEAT=3 (rounds
#        of (b)/(c)), FAILOVER_EPOCHS=5 (epochs of the Train after the kill),
#        FAILOVER_TIMEOUT=60 (seconds to wait for it), NGINX=nginx.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mode=all
case "${1:-}" in
  --no-failover) mode=no-failover; shift ;;
  --failover-only) mode=failover; shift ;;
  --pg-vs-sqlite) mode=pg-vs-sqlite; shift ;;
  -h | --help) sed -n '2,50p' "$0"; exit 0 ;;
esac
ml=${1:-$root/../shared/data/movielens/ml-100k}
data=$ml/u.data
bin=$root/build/bin
duration=${DURATION:-5}
conc=${CONCURRENCY:-16}
repeat=${REPEAT:-3}
failover_epochs=${FAILOVER_EPOCHS:-5}
failover_timeout=${FAILOVER_TIMEOUT:-60}
nginx=${NGINX:-nginx}

[ -r "$data" ] || { echo "scale_bench: missing $data" >&2; exit 1; }
need=()
for t in rbmrec rbmrec-server rbmrec-loadgen; do
  [ -x "$bin/$t" ] || need+=(--target "$t")
done
[ ${#need[@]} -eq 0 ] || cmake --build "$root/build" -j2 "${need[@]}" >&2
if [ "$mode" != pg-vs-sqlite ] && ! command -v "$nginx" >/dev/null; then
  # Only this benchmark uses nginx on the host (not the build or the tests).
  echo "scale_bench: installing nginx (the gRPC proxy in front of the replicas)" >&2
  bash "$root/scripts/install-deps.sh" nginx >&2
fi
# shellcheck source=../scripts/pg-cluster.sh
source "$root/scripts/pg-cluster.sh"

tmp=$(mktemp -d /tmp/rbmrec-scale-bench.XXXXXX)
chmod 0755 "$tmp"
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pg_cluster_stop
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

now_ms() { echo $(($(date +%s%N) / 1000000)); }
secs() { python3 -c "import sys; print('%.1f' % (int(sys.argv[1]) / 1000))" "$1"; }
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }
ratio() { python3 -c "import sys; a,b=map(float,sys.argv[1:]); print('%.2f' % (a/b) if b else 'inf')" "$1" "$2"; }
median() { python3 -c "import statistics,sys; print(statistics.median(map(float,sys.argv[1:])))" "$@"; }
verdict() { python3 -c "import sys; print('MET' if eval(sys.argv[1]) else 'MISSED')" "$1"; }
cli() { local addr=$1; shift; "$bin/rbmrec" --server "$addr" "$@"; }

# ---- PostgreSQL --------------------------------------------------------------
# Default durability (fsync on), like the SQLite server's default.
PG_DURABLE=1 pg_cluster_start "$tmp/pg" >&2 ||
  { echo "scale_bench: PostgreSQL not installed (scripts/install-deps.sh)" >&2; exit 1; }
psql() { command psql -X -q -d "$PG_URI" "$@"; }
psql -c "CREATE DATABASE rbmrec"
pg_uri="${PG_URI/\/postgres\?//rbmrec?}"

# ---- servers -----------------------------------------------------------------
# start_server NAME DB: an rbmrec-server on a free port with a metrics
# endpoint; sets addr_NAME, pid_NAME, metrics_NAME (via declare -g).
declare -A addr pid metrics
start_server() {
  local name=$1 db=$2 port mport
  port=$(free_port)
  mport=$(free_port)
  # RBMREC_ADVERTISE: the address other replicas and redirected clients use
  # (ignored by a server without replication).
  RBMREC_ADVERTISE=127.0.0.1:$port "$bin/rbmrec-server" --listen "127.0.0.1:$port" \
    --db "$db" --metrics-listen "127.0.0.1:$mport" >"$tmp/server-$name.log" 2>&1 &
  pid[$name]=$!
  pids+=("${pid[$name]}")
  addr[$name]=127.0.0.1:$port
  metrics[$name]=http://127.0.0.1:$mport/metrics
  for _ in $(seq 150); do
    if cli "${addr[$name]}" --timeout 1 health >/dev/null 2>&1; then return 0; fi
    kill -0 "${pid[$name]}" 2>/dev/null || break
    sleep 0.1
  done
  echo "scale_bench: server $name did not start; log:" >&2
  cat "$tmp/server-$name.log" >&2
  exit 1
}
# gauge NAME METRIC: the value of an unlabelled metric of server NAME, or "-".
gauge() {
  python3 -c 'import sys, urllib.request
try:
    lines = urllib.request.urlopen(sys.argv[1], timeout=2).read().decode().splitlines()
except Exception:
    lines = []
v = [l.split(" ")[1] for l in lines if l.split(" ")[0] == sys.argv[2]]
print(v[0] if v else "-")' "${metrics[$1]}" "$2"
}

# start_nginx NAME PORT UPSTREAM_ADDR...: nginx in the foreground (its own
# process, killed on exit), one gRPC entry point on 127.0.0.1:PORT.
declare -A nginx_addr
start_nginx() {
  local name=$1 port=$2 dir=$tmp/nginx-$1 a
  shift 2
  mkdir -p "$dir/tmp"
  chmod 0777 "$dir/tmp"  # the workers run as nobody when started by root
  {
    echo "daemon off;"
    echo "worker_processes auto;"
    echo "pid $dir/nginx.pid;"
    echo "error_log $dir/error.log warn;"
    echo "events { worker_connections 4096; }"
    echo "http {"
    echo "  access_log off;"
    echo "  client_body_temp_path $dir/tmp;"
    echo "  proxy_temp_path $dir/tmp; fastcgi_temp_path $dir/tmp;"
    echo "  uwsgi_temp_path $dir/tmp; scgi_temp_path $dir/tmp;"
    echo "  upstream rbmrec {"
    for a in "$@"; do echo "    server $a max_fails=1 fail_timeout=5s;"; done
    echo "    keepalive 64;"
    echo "    keepalive_requests 1000000;"
    echo "  }"
    echo "  server {"
    echo "    listen 127.0.0.1:$port http2;"
    echo "    keepalive_requests 1000000;"
    echo "    client_max_body_size 0;"
    echo "    location / {"
    echo "      grpc_pass grpc://rbmrec;"
    echo "      grpc_read_timeout 3600s;"
    echo "      grpc_send_timeout 3600s;"
    echo "      grpc_next_upstream error timeout;"
    echo "    }"
    echo "  }"
    echo "}"
  } >"$dir/nginx.conf"
  "$nginx" -p "$dir" -c "$dir/nginx.conf" -e "$dir/error.log" >"$dir/stdout.log" 2>&1 &
  pids+=($!)
  nginx_addr[$name]=127.0.0.1:$port
  for _ in $(seq 100); do
    if cli "${nginx_addr[$name]}" --timeout 1 health >/dev/null 2>&1; then return 0; fi
    sleep 0.1
  done
  echo "scale_bench: nginx $name does not answer health; its log:" >&2
  cat "$dir/error.log" "$dir/stdout.log" >&2
  exit 1
}

# loadgen OUT_JSON ADDR: PredictRatings, 10 items per call.
loadgen() {
  "$bin/rbmrec-loadgen" --server "$2" --concurrency "$conc" --duration "$duration" \
    --warmup 1 --json --mix predict=1 --items-per-predict 10 --ratings "$data" >"$1"
}

echo "rbmrec scale benchmark: $(nproc) cores, concurrency $conc, ${duration}s per load run, $repeat rounds"
echo "data: $data; PostgreSQL $("$PG_BIN/postgres" --version | awk '{print $3}'); $("$nginx" -v 2>&1)"

# ---- (a) setup -----------------------------------------------------------------
start_server r1 "$pg_uri"
t0=$(now_ms)
cli "${addr[r1]}" import "$data" >"$tmp/import.out" 2>&1 || { cat "$tmp/import.out" >&2; exit 1; }
t1=$(now_ms)
cli "${addr[r1]}" train >"$tmp/train.out" 2>&1 || { cat "$tmp/train.out" >&2; exit 1; }
t2=$(now_ms)
echo
echo "(a) PostgreSQL, replica 1: import u.data $(secs $((t1 - t0))) s ($(grep -o 'accepted [0-9,]*[0-9]' "$tmp/import.out" | head -n1) rows), train (server defaults) $(secs $((t2 - t1))) s"
echo "    ($(tail -n1 "$tmp/train.out"))"
if [ "$mode" = all ] || [ "$mode" = no-failover ] || [ "$mode" = pg-vs-sqlite ]; then
  start_server sqlite "$tmp/sqlite.db"
  t0=$(now_ms)
  cli "${addr[sqlite]}" import "$data" >"$tmp/import-sqlite.out" 2>&1
  t1=$(now_ms)
  cli "${addr[sqlite]}" train >"$tmp/train-sqlite.out" 2>&1
  t2=$(now_ms)
  echo "    SQLite server:           import u.data $(secs $((t1 - t0))) s, train $(secs $((t2 - t1))) s"
fi
if [ "$mode" != pg-vs-sqlite ]; then
  start_server r2 "$pg_uri"
  start_server r3 "$pg_uri"
  start_nginx p1 "$(free_port)" "${addr[r1]}"
  start_nginx p2 "$(free_port)" "${addr[r1]}" "${addr[r2]}"
  start_nginx p3 "$(free_port)" "${addr[r1]}" "${addr[r2]}" "${addr[r3]}"
  echo "    replicas ${addr[r1]} ${addr[r2]} ${addr[r3]} (PostgreSQL); nginx -> 1, 2, 3 replicas on ${nginx_addr[p1]} ${nginx_addr[p2]} ${nginx_addr[p3]}"
  for r in r1 r2 r3; do
    v=$(cli "${addr[$r]}" --json stats | python3 -c 'import json,sys; print(json.load(sys.stdin).get("active_model_version", 0))')
    echo "    $r: active model version $v, rbmrec_leader $(gauge "$r" rbmrec_leader)"
  done
fi

# ---- (b) + (c) load rounds -----------------------------------------------------
# run_setup KEY ADDR: one load run; prints its line, records QPS and p99.
declare -A qps_all p99_all
run_setup() {
  local key=$1 a=$2 label=$3 q p99 p50 err first
  loadgen "$tmp/$key.json" "$a"
  q=$(json "$tmp/$key.json" 'd["rpcs"][0]["qps"]')
  p50=$(json "$tmp/$key.json" 'd["rpcs"][0]["p50_ms"]')
  p99=$(json "$tmp/$key.json" 'd["rpcs"][0]["p99_ms"]')
  err=$(json "$tmp/$key.json" 'd["rpcs"][0]["errors"]')
  first=$(json "$tmp/$key.json" 'd["rpcs"][0]["first_error"]')
  printf '    %-34s QPS %8s, p50 %6s ms, p99 %6s ms, errors %s%s\n' "$label:" "$q" "$p50" "$p99" \
    "$err" "${first:+ (first: $first)}"
  qps_all[$key]="${qps_all[$key]:-} $q"
  p99_all[$key]="${p99_all[$key]:-} $p99"
}
if [ "$mode" != failover ]; then
  pg_ratios=()
  for r in $(seq "$repeat"); do
    echo
    echo "(b/c) round $r: PredictRatings, 10 items, c=$conc"
    # Alternate which backend goes first.
    if [ $((r % 2)) -eq 1 ]; then order=(pg sqlite); else order=(sqlite pg); fi
    for k in "${order[@]}"; do
      if [ "$k" = pg ]; then
        run_setup direct "${addr[r1]}" "replica 1 direct (PostgreSQL)"
      else
        run_setup sqlite "${addr[sqlite]}" "SQLite server direct"
      fi
    done
    pr=$(ratio "$(json "$tmp/direct.json" 'd["rpcs"][0]["qps"]')" \
      "$(json "$tmp/sqlite.json" 'd["rpcs"][0]["qps"]')")
    pg_ratios+=("$pr")
    echo "    PostgreSQL/SQLite QPS:             $pr"
    if [ "$mode" != pg-vs-sqlite ]; then
      # Rotate the order of the proxy setups from round to round.
      case $((r % 3)) in 1) ns=(1 2 3) ;; 2) ns=(2 3 1) ;; *) ns=(3 1 2) ;; esac
      for n in "${ns[@]}"; do
        run_setup "p$n" "${nginx_addr[p$n]}" "nginx -> $n replica$([ "$n" = 1 ] || echo s)"
      done
    fi
  done
  echo
  echo "(b/c) medians of $repeat rounds ($(nproc) cores shared by the load generator, nginx and every replica):"
  keys=(direct sqlite)
  [ "$mode" = pg-vs-sqlite ] || keys+=(p1 p2 p3)
  for k in "${keys[@]}"; do
    case $k in
      direct) label="replica 1 direct (PostgreSQL)" ;;
      sqlite) label="SQLite server direct" ;;
      p1) label="nginx -> 1 replica" ;;
      *) label="nginx -> ${k#p} replicas" ;;
    esac
    # shellcheck disable=SC2086 # word lists
    printf '    %-34s QPS %8s, p99 %6s ms\n' "$label:" "$(median ${qps_all[$k]})" "$(median ${p99_all[$k]})"
  done
  if [ "$mode" != pg-vs-sqlite ]; then
    # shellcheck disable=SC2086
    q1=$(median ${qps_all[p1]}) q2=$(median ${qps_all[p2]}) q3=$(median ${qps_all[p3]}) qd=$(median ${qps_all[direct]})
    echo "    QPS ratios: 2/1 replicas $(ratio "$q2" "$q1"), 3/1 $(ratio "$q3" "$q1"), nginx 1 replica/direct $(ratio "$q1" "$qd")"
    echo "    (on $(nproc) cores the ratio is bounded by the cores: every replica, nginx and the"
    echo "     load generator share them; more replicas add CPU only on more machines)"
  fi
  pm=$(median "${pg_ratios[@]}")
  echo "(c) PredictRatings QPS PostgreSQL-backed / SQLite-backed, median of $repeat: $pm"
  echo "    target >= 0.9: $(verdict "$pm >= 0.9")"
fi
[ "$mode" = all ] || [ "$mode" = failover ] || exit 0

# ---- (d) failover --------------------------------------------------------------
echo
live=(r1 r2 r3)
leaders=()
for r in "${live[@]}"; do
  [ "$(gauge "$r" rbmrec_leader)" = 1 ] && leaders+=("$r")
done
if [ ${#leaders[@]} -ne 1 ]; then
  echo "(d) SKIPPED: ${#leaders[@]} of ${#live[@]} replicas report rbmrec_leader 1 (this build has no"
  echo "    leader election: every server on the database thinks it is the only one)"
  exit 0
fi
leader=${leaders[0]}
proxy=${nginx_addr[p3]}
echo "(d) failover: leader $leader (${addr[$leader]}), writer and Train through nginx $proxy"
writer=(/usr/bin/python3 "$root/bench/scale_writer.py")
rm -f "$tmp/stop-writer"
"${writer[@]}" write --server "$proxy" --acks "$tmp/acks.tsv" --stop "$tmp/stop-writer" \
  --stubs "$tmp/stubs" >"$tmp/writer.out" 2>"$tmp/writer.err" &
writer_pid=$!
pids+=("$writer_pid")
for _ in $(seq 100); do [ -s "$tmp/acks.tsv" ] && break; sleep 0.1; done
[ -s "$tmp/acks.tsv" ] || { echo "scale_bench: the writer acknowledged nothing:" >&2; cat "$tmp/writer.out" "$tmp/writer.err" >&2; exit 1; }
# Without validation the trainer stops once the training RMSE levels off;
# 20 Gibbs steps per update make each epoch long enough that the Train
# outlives the kill below (checked there).
cli "$proxy" train --epochs 100000 --validation-fraction 0 --cd-steps 20 >"$tmp/train-long.out" 2>&1 &
train_pid=$!
pids+=("$train_pid")
running=no
for _ in $(seq 100); do
  if [ "$(gauge "$leader" rbmrec_training_running)" = 1 ]; then running=yes; break; fi
  sleep 0.1
done
[ "$running" = yes ] || { echo "scale_bench: the leader is not training:" >&2; cat "$tmp/train-long.out" >&2; exit 1; }
sleep 1
[ "$(gauge "$leader" rbmrec_training_running)" = 1 ] ||
  { echo "scale_bench: the Train ended before the kill:" >&2; cat "$tmp/train-long.out" >&2; exit 1; }
acks_before=$(wc -l <"$tmp/acks.tsv")
t_kill=$(now_ms)
kill -KILL "${pid[$leader]}"
wait "${pid[$leader]}" 2>/dev/null || true
live=()
for r in r1 r2 r3; do [ "$r" = "$leader" ] || live+=("$r"); done
# Poll the survivors' rbmrec_leader every 20 ms from the kill on (one python
# process): "NAME MS_SINCE_KILL" of the first that reports 1.
poll_urls=()
for r in "${live[@]}"; do poll_urls+=("$r=${metrics[$r]}"); done
python3 -c 'import sys, time, urllib.request
t_kill = int(sys.argv[1]) / 1000.0
deadline = time.time() + int(sys.argv[2])
while time.time() < deadline:
    for arg in sys.argv[3:]:
        name, url = arg.split("=", 1)
        try:
            lines = urllib.request.urlopen(url, timeout=1).read().decode().splitlines()
        except Exception:
            continue
        if any(l.split(" ")[:2] == ["rbmrec_leader", "1"] for l in lines):
            print(name, int((time.time() - t_kill) * 1000))
            sys.exit(0)
    time.sleep(0.02)' "$t_kill" "$failover_timeout" "${poll_urls[@]}" >"$tmp/elected" &
poll_pid=$!
pids+=("$poll_pid")
echo "    SIGKILL $leader during Train (training_running=1; $acks_before ratings acknowledged so far)"
attempts=0 t_done=""
deadline=$((t_kill + failover_timeout * 1000))
while [ "$(now_ms)" -lt "$deadline" ]; do
  attempts=$((attempts + 1))
  t_attempt=$(now_ms)
  if cli "$proxy" train --epochs "$failover_epochs" --activate always >"$tmp/train-new.out" 2>&1; then
    t_done=$(now_ms)
    break
  fi
  sleep 0.2
done
if [ -z "$t_done" ]; then
  echo "    FAILED: no Train succeeded within ${failover_timeout}s of the kill; last answer:"
  tail -n 3 "$tmp/train-new.out"
  touch "$tmp/stop-writer"
  exit 1
fi
wait "$poll_pid" || true
read -r new_leader elected_ms <"$tmp/elected" || true
new_version=$(sed -n 's/^published model v\([0-9]*\) .*/\1/p' "$tmp/train-new.out")
# Every live replica serves the new version (polled; the issue's bound is 2 s).
t_served=""
served=""
for _ in $(seq 100); do
  all=yes
  served=""
  for r in "${live[@]}"; do
    v=$(cli "${addr[$r]}" --timeout 2 --json stats 2>/dev/null |
      python3 -c 'import json,sys; print(json.load(sys.stdin).get("active_model_version", 0))' 2>/dev/null) || v=""
    [ "$v" = "$new_version" ] || all=no
    served="$served $r:v${v:-?}"
  done
  if [ $all = yes ]; then t_served=$(now_ms); break; fi
  sleep 0.1
done
sleep 1
touch "$tmp/stop-writer"
wait "$writer_pid" || true
wait "$train_pid" 2>/dev/null || true
command psql -X -q -d "$pg_uri" -At -F $'\t' -c "SELECT u.ext_id, i.ext_id, r.rating FROM ratings r
  JOIN users u ON u.idx = r.user_idx JOIN items i ON i.idx = r.item_idx
  WHERE u.ext_id LIKE 'failover-writer-%'" >"$tmp/stored.tsv"
set +e
check=$("${writer[@]}" verify --acks "$tmp/acks.tsv" --stored "$tmp/stored.tsv")
check_rc=$?
set -e
echo "    the killed Train's client: $(grep -m1 '^error:' "$tmp/train-long.out" || tail -n1 "$tmp/train-long.out")"
if [ -n "${new_leader:-}" ]; then
  echo "    new leader $new_leader: rbmrec_leader 1 ${elected_ms} ms after the kill (metrics polled every 20 ms)"
else
  echo "    NO surviving replica reported rbmrec_leader 1 within ${failover_timeout}s"
fi
echo "    Train --epochs $failover_epochs through nginx: $attempts attempt(s); the successful one"
echo "      took $(secs $((t_done - t_attempt))) s; kill -> Train finished: $(secs $((t_done - t_kill))) s; model version $new_version"
if [ -n "$t_served" ]; then
  echo "    every live replica (${live[*]}) serves version $new_version $(secs $((t_served - t_done))) s after the Train finished"
else
  echo "    NOT every live replica served version $new_version within 10 s (active versions:$served)"
fi
echo "    writer (one rating per AddRatings through nginx): $(cat "$tmp/writer.out")"
echo "    acknowledged ratings vs PostgreSQL: $check"
echo "    target 0 acknowledged ratings lost: $([ $check_rc = 0 ] && echo MET || echo MISSED)"
[ $check_rc = 0 ]
