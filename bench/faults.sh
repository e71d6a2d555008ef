#!/usr/bin/env bash
# Fault injection against the real rbmrec-server. Each scenario runs TRIALS
# trials on its own database in a temp dir:
#   import       one batch per AddRatings call (an OK response acknowledges
#                the batch); the server is SIGKILLed after a random number of
#                acknowledgements plus a random jitter, then restarted.
#   import-cli   `rbmrec import` (a multi-batch stream) with the server
#                SIGKILLed at a random moment; the CLI's "N rows ... certainly
#                committed" (when it prints it) must be <= the rows stored,
#                and the stored batches must be a leading run of the stream.
#   train        SIGKILL at a random moment of `rbmrec train` (half of the
#                trials in the last 20% of a job's duration and just after it,
#                around the publish); after the restart `rbmrec stats` shows
#                an active model without model_load_error and Predict works.
#   online       --online-publish-seconds 1, ratings of known users arriving
#                one batch per call; SIGKILL at a random moment; the active
#                model loads after the restart.
#   disk-full    --db-max-mb: import until a call fails; it must fail with
#                RESOURCE_EXHAUSTED + `rbmrec-error-reason: STORAGE_FULL`, and
#                the server stays up and keeps answering PredictRatings.
#                SKIPPED when the server has no --db-max-mb flag.
#   locked       another process holds BEGIN EXCLUSIVE on the database past
#                the server's busy timeout: AddRatings fails with UNAVAILABLE
#                (the reason seen is printed; DATABASE_LOCKED expected),
#                PredictRatings keeps working, writes succeed after release.
#   two-servers  a second rbmrec-server on the port of a running one (another
#                database) and one on the running one's database (another
#                port): each must exit non-zero within 15 s, saying "address
#                already in use" / "in use by another process (pid P" with the
#                first server's pid, while the first keeps answering.
# After every restart (and at the end of disk-full / locked): PRAGMA
# integrity_check is ok (read-only, while the server runs), every
# acknowledged row is stored with its value, no batch is partially stored.
# "acknowledged rows" counts every row checked, including a scenario's setup
# import of u.data (train, online, disk-full, locked).
# Targets: 0 acknowledged rows lost, 0 partial batches, 0 failed
# restarts, integrity ok after every restart. Exits 1 when one is missed.
#
# Usage: bench/faults.sh [--ci] [--trials N] [--seed S] [ML100K_DIR]
#   --ci        3 trials per scenario (default 20)
#   ML100K_DIR  default ../shared/data/movielens/ml-100k (from the repo root)
# Env: BUILD=build (the build directory); KEEP_TMP=1 keeps the temp dir
# (databases, journals, server logs). Ports 52200-52299.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
trials=20 seed=$(date +%s) ml=
while [ $# -gt 0 ]; do
  case $1 in
    --ci) trials=3 ;;
    --trials) trials=$2; shift ;;
    --seed) seed=$2; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) ml=$1 ;;
  esac
  shift
done
# shellcheck source=suites/paths.sh
source "$root/bench/suites/paths.sh"
suite_paths faults "$ml" rbmrec-server rbmrec
PY=python3
if ! python3 -c 'import grpc' 2>/dev/null; then PY=/usr/bin/python3; fi
RANDOM=$((seed % 32768))

tmp=$(mktemp -d "${TMPDIR:-/tmp}/rbmrec-faults.XXXXXX")
server_pid='' server_job=''
cleanup() {
  if [ -n "$server_pid" ]; then kill -KILL "$server_pid" 2>/dev/null || true; fi
  wait 2>/dev/null || true
  [ "${KEEP_TMP:-0}" = 1 ] || rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

client() { "$PY" "$root/bench/suites/faults_client.py" --stubs "$tmp/stubs" "$@"; }
# uniform A B: a random number in [A, B] with 3 decimals.
uniform() { awk -v a="$1" -v b="$2" -v r=$RANDOM 'BEGIN { printf "%.3f", a + (b - a) * r / 32767 }'; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }
field() { sed -n "s/.*\\<$1=\\([^ ]*\\).*/\\1/p" <<<"$2"; }  # field KEY "k=v ..."

server_help=$("$bin/rbmrec-server" --help 2>&1 || true)
# sflag NAME: the server's spelling of a flag (dashes or underscores);
# fails when the server has no such flag.
sflag() {
  local u=${1//-/_}
  if grep -q -e "--$1\\b" <<<"$server_help"; then echo "--$1"
  elif grep -q -e "--$u\\b" <<<"$server_help"; then echo "--$u"
  else return 1; fi
}
port='' db=''
cli() { "$bin/rbmrec" --server "127.0.0.1:$port" "$@"; }
# start_server [FLAGS...]: starts on $port/$db, waits until health answers
# SERVING (at most 30 s); returns 1 if it exits or never answers.
# The server runs under a subshell that waits for it, so that bash prints no
# "Killed" notice for each SIGKILL; $server_pid is the server's own pid.
start_server() {
  rm -f "$tmp/pid"
  (
    "$bin/rbmrec-server" "$(sflag listen)" "127.0.0.1:$port" "$(sflag db)" "$db" "$@" \
      >>"$tmp/server-$port.log" 2>&1 &
    echo $! >"$tmp/pid"
    wait $!
  ) 2>/dev/null &
  server_job=$!
  until [ -s "$tmp/pid" ]; do sleep 0.01; done
  server_pid=$(cat "$tmp/pid")
  local deadline=$(($(now_ms) + 30000))
  until cli --timeout 1 health >/dev/null 2>&1; do
    if ! kill -0 "$server_pid" 2>/dev/null || [ "$(now_ms)" -gt "$deadline" ]; then
      echo "faults: server on $db did not start; log tail:" >&2
      tail -5 "$tmp/server-$port.log" >&2
      return 1
    fi
    sleep 0.05
  done
}
kill_server() {
  kill -KILL "$server_pid" 2>/dev/null || true
  reap_server
}
# Waits for a server the client has SIGKILLed.
reap_server() { wait "$server_job" 2>/dev/null || true; server_pid='' server_job=''; }
# setup_model [TRAIN FLAGS]: u.data imported (journaled as acknowledged) and
# a model trained; prints the train's wall ms.
setup_model() {
  cli import "$data" >/dev/null 2>&1
  client journal-file --journal "$journal" --file "$data" --id setup >/dev/null
  local t0
  t0=$(now_ms)
  cli train "$@" >/dev/null
  echo $(($(now_ms) - t0))
}

# Per-scenario counters; `verify` updates them, `report` prints them.
acked=0 lost=0 partial=0 restarts_failed=0 integrity_ok=0 checks=0 extra_bad=0
cli_bad=0 cli_checked=0
notes='' failed=0
reset() { acked=0 lost=0 partial=0 restarts_failed=0 integrity_ok=0 checks=0 extra_bad=0 notes=''; }
verify() {
  local r
  r=$(client verify --db "$db" --journal "$journal")
  checks=$((checks + 1))
  [ "$(field integrity "$r")" = ok ] && integrity_ok=$((integrity_ok + 1))
  acked=$(field acked_rows "$r")
  # Cumulative over the journal: the latest check covers all earlier trials.
  lost=$(field lost "$r") partial=$(field partial "$r")
  cli_bad=$(field cli_bad "$r") cli_checked=$(field cli_checked "$r")
}
# model_ok: the active model loads (stats) and answers a PredictRatings.
model_ok() {
  local s
  s=$(cli --json stats) || return 1
  "$PY" -c 'import json,sys; d=json.loads(sys.argv[1]); sys.exit(0 if d["active_model_version"] > 0 and not d.get("model_load_error") else 1)' "$s" \
    || { echo "faults: after restart: $s" >&2; return 1; }
  cli predict 196 242 >/dev/null
}
# restart [FLAGS]: after a SIGKILL; counts a failed restart.
restart() {
  if start_server "$@"; then return 0; fi
  restarts_failed=$((restarts_failed + 1))
  return 1
}
report() {  # report NAME TRIALS_DONE
  local ok=MET
  if [ "$lost" != 0 ] || [ "$partial" != 0 ] || [ "$restarts_failed" != 0 ] ||
    [ "$integrity_ok" != "$checks" ] || [ "$extra_bad" != 0 ] || [ "$2" = 0 ]; then
    ok=MISSED failed=1
  fi
  printf '%-11s trials %2d  acknowledged rows %7d  rows lost %d  partial batches %d  failed restarts %d  integrity ok %d/%d%s  %s\n' \
    "$1" "$2" "$acked" "$lost" "$partial" "$restarts_failed" "$integrity_ok" "$checks" "$notes" "$ok"
}

echo "rbmrec fault injection: $trials trials per scenario, seed $seed, $bin"
client stubs >/dev/null

# ---- import: one batch per call, SIGKILL after K acks + jitter -------------
reset
port=52201 db=$tmp/import.db journal=$tmp/import.journal
start_server
done_trials=0
for t in $(seq "$trials"); do
  k=$((RANDOM % 40))
  client ack-import --addr "127.0.0.1:$port" --journal "$journal" --id "imp$t" \
    --data "$data" --seed $((seed + t)) --batch-min 1 --batch-max 2000 \
    --max-batches $((k + 40)) --kill-pid "$server_pid" --kill-after-acks "$k" \
    --jitter-ms 30 >/dev/null
  reap_server
  restart || break
  verify
  done_trials=$t
done
kill_server
report import "$done_trials"

# ---- import-cli: `rbmrec import` stream, SIGKILL at a random moment --------
reset
port=52202 db=$tmp/import-cli.db journal=$tmp/import-cli.journal
start_server
cli_args=(--addr "127.0.0.1:$port" --journal "$journal" --data "$data"
  --cli "$bin/rbmrec" --tmp "$tmp" --rows 40000 --batch 200 --log "$tmp/cli.log")
# Calibration (not a trial): how long the whole import takes without a kill.
r=$(client cli-import "${cli_args[@]}" --id cal --kill-pid "$server_pid" --kill-after-seconds -1)
dur=$(field seconds "$r")
done_trials=0 certain=0 cli_success=0
for t in $(seq "$trials"); do
  r=$(client cli-import "${cli_args[@]}" --id "cli$t" --seed $((seed + t)) \
    --kill-pid "$server_pid" --kill-after-seconds "$(uniform 0 "$dur")")
  [ "$(field rc "$r")" = 0 ] && cli_success=$((cli_success + 1))
  [ "$(field committed "$r")" != none ] && certain=$((certain + 1))
  reap_server
  restart || break
  verify
  done_trials=$t
done
kill_server
extra_bad=$cli_bad
notes="  (import ${dur}s; CLI finished before the kill $cli_success; stated committed rows $certain, checked $cli_checked, over-stated $cli_bad)"
report import-cli "$done_trials"

# ---- train / publish: SIGKILL during `rbmrec train` -------------------------
reset
port=52203 db=$tmp/train.db journal=$tmp/train.journal
start_server
train_ms=$(setup_model)
done_trials=0 model_bad=0
for t in $(seq "$trials"); do
  if [ $((t % 2)) = 1 ]; then
    delay=$(uniform 0 "$(awk -v d="$train_ms" 'BEGIN { print 1.2 * d / 1000 }')")
  else  # around the publish at the end of the job
    delay=$(uniform "$(awk -v d="$train_ms" 'BEGIN { print 0.8 * d / 1000 }')" \
      "$(awk -v d="$train_ms" 'BEGIN { print 1.2 * d / 1000 }')")
  fi
  cli train >"$tmp/train-$t.log" 2>&1 &
  train_pid=$!
  sleep "$delay"
  kill_server
  wait "$train_pid" 2>/dev/null || true
  restart || break
  model_ok || model_bad=$((model_bad + 1))
  verify
  done_trials=$t
done
versions=$(cli --json models | "$PY" -c 'import json,sys; print(len(json.load(sys.stdin)["models"]))')
kill_server
extra_bad=$model_bad
notes="  (train ${train_ms} ms; active model failed to load $model_bad; versions stored $versions)"
report train "$done_trials"

# ---- online publish: --online-publish-seconds 1, SIGKILL at random ---------
reset
port=52204 db=$tmp/online.db journal=$tmp/online.journal
online_flags=("$(sflag online-publish-seconds)" 1)
start_server "${online_flags[@]}"
setup_model >/dev/null
done_trials=0 model_bad=0
for t in $(seq "$trials"); do
  client ack-import --addr "127.0.0.1:$port" --journal "$journal" --id "onl$t" \
    --data "$data" --seed $((seed + t)) --mode known --batch-min 1 \
    --batch-max 20 --pace-ms 5 --max-batches 1000000 --kill-pid "$server_pid" \
    --kill-after-seconds "$(uniform 0.3 3.5)" >/dev/null
  reap_server
  restart "${online_flags[@]}" || break
  model_ok || model_bad=$((model_bad + 1))
  verify
  done_trials=$t
done
online_versions=$(cli --json models | "$PY" -c 'import json,sys; print(sum(m["kind"] == "online" for m in json.load(sys.stdin)["models"]))')
kill_server
extra_bad=$model_bad
notes="  (online versions published $online_versions; active model failed to load $model_bad)"
report online "$done_trials"

# ---- disk full: --db-max-mb -----------------------------------------------
if max_mb=$(sflag db-max-mb); then
  reset
  port=52205
  done_trials=0 wrong=0 down=0 reasons=''
  for t in $(seq "$trials"); do
    db=$tmp/full-$t.db journal=$tmp/full-$t.journal
    start_server "$max_mb" 32
    setup_model --hidden 8 >/dev/null
    r=$(client diskfull --addr "127.0.0.1:$port" --journal "$journal" \
      --id "full$t" --data "$data" --seed $((seed + t)))
    code=$(field code "$r") reason=$(field reason "$r")
    case " $reasons " in *" $code/$reason "*) ;; *) reasons="$reasons $code/$reason" ;; esac
    [ "$code/$reason" = RESOURCE_EXHAUSTED/STORAGE_FULL ] || wrong=$((wrong + 1))
    if [ "$(field health_ok "$r")$(field predict_ok "$r")" != 11 ] ||
      ! kill -0 "$server_pid" 2>/dev/null; then down=$((down + 1)); fi
    verify
    kill_server
    done_trials=$t
  done
  extra_bad=$((wrong + down))
  notes="  (failures seen:$reasons; not STORAGE_FULL $wrong; server down or not serving $down)"
  report disk-full "$done_trials"
else
  echo "disk-full   SKIPPED (no --db-max-mb)"
fi

# ---- locked database: BEGIN EXCLUSIVE past the busy timeout ----------------
reset
port=52206 db=$tmp/locked.db journal=$tmp/locked.journal
busy_s=5 lock_flags=()
if busy=$(sflag busy-timeout-ms); then busy_s=1 lock_flags=("$busy" 1000); fi
start_server "${lock_flags[@]}"
setup_model --hidden 8 >/dev/null
done_trials=0 not_unavailable=0 predict_bad=0 after_bad=0 reasons='' add_s=''
for t in $(seq "$trials"); do
  r=$(client locked --addr "127.0.0.1:$port" --journal "$journal" --db "$db" \
    --id "lock$t" --data "$data" --seed $((seed + t)) --busy-s "$busy_s")
  code=$(field code "$r") reason=$(field reason "$r") add_s=$(field add_seconds "$r")
  case " $reasons " in *" $code/$reason "*) ;; *) reasons="$reasons $code/$reason" ;; esac
  [ "$code" = UNAVAILABLE ] || not_unavailable=$((not_unavailable + 1))
  [ "$(field predict_ok "$r")" = 1 ] || predict_bad=$((predict_bad + 1))
  [ "$(field write_after_release "$r")" = 1 ] || after_bad=$((after_bad + 1))
  kill -0 "$server_pid" 2>/dev/null || { restarts_failed=$((restarts_failed + 1)); break; }
  verify
  done_trials=$t
done
kill_server
extra_bad=$((not_unavailable + predict_bad + after_bad))
notes="  (AddRatings under the lock:$reasons after ${add_s}s, busy timeout ${busy_s}s; not UNAVAILABLE $not_unavailable; Predict failed $predict_bad; writes after release failed $after_bad)"
report locked "$done_trials"

# ---- two servers: one per port, one per database ---------------------------
port=52207 db=$tmp/two.db
start_server
first_pid=$server_pid
second() {  # second PORT DB LOG: runs a second server; 0 when it refused
  timeout 15 "$bin/rbmrec-server" "$(sflag listen)" "127.0.0.1:$1" \
    "$(sflag db)" "$2" >"$3" 2>&1
  local rc=$?
  [ "$rc" != 0 ] && [ "$rc" != 124 ]
}
done_trials=0 port_refused=0 db_refused=0 first_ok=0
for t in $(seq "$trials"); do
  if second "$port" "$tmp/two-other-$t.db" "$tmp/two-port-$t.log" &&
    grep -q "address already in use" "$tmp/two-port-$t.log"; then
    port_refused=$((port_refused + 1))
  fi
  if second $((port + 1)) "$db" "$tmp/two-db-$t.log" &&
    grep -q "in use by another process (pid $first_pid " "$tmp/two-db-$t.log"; then
    db_refused=$((db_refused + 1))
  fi
  cli --timeout 5 stats >/dev/null 2>&1 && first_ok=$((first_ok + 1))
  done_trials=$t
done
kill_server
ok=MET
if [ "$port_refused" != "$done_trials" ] || [ "$db_refused" != "$done_trials" ] ||
  [ "$first_ok" != "$done_trials" ] || [ "$done_trials" = 0 ]; then
  ok=MISSED failed=1
fi
printf '%-11s trials %2d  second server on the port refused %d/%d  on the database refused %d/%d  first server answering %d/%d  %s\n' \
  two-servers "$done_trials" "$port_refused" "$done_trials" "$db_refused" \
  "$done_trials" "$first_ok" "$done_trials" "$ok"

if [ "$failed" = 0 ]; then echo "faults: all targets MET"; else echo "faults: targets MISSED"; fi
exit "$failed"
