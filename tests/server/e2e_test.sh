#!/usr/bin/env bash
# End-to-end test: the real rbmrec-server binary and the rbmrec CLI.
#   e2e_test.sh [SERVER_BIN] [CLI_BIN]   (defaults: build/bin/...)
# Starts the server on a free port with a temporary database, imports a
# generated synthetic ratings file (MovieLens u.data format), trains,
# predicts, recommends, evaluates, reads stats; kills the server with
# SIGKILL, restarts it on the same database and checks that the ratings count
# and the active model version are unchanged; finally SIGTERM -> exit 0.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
SERVER="${1:-$ROOT/build/bin/rbmrec-server}"
CLI="${2:-$ROOT/build/bin/rbmrec}"
TMP="$(mktemp -d)"
SERVER_PID=""

cleanup() {
  if [[ -n "$SERVER_PID" ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -KILL "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  if [[ "${KEEP_TMP:-0}" != 1 ]]; then rm -rf "$TMP"; fi
}
trap cleanup EXIT

fail() {
  echo "FAIL: $*" >&2
  echo "--- server log (tail) ---" >&2
  tail -n 30 "$TMP/server.log" >&2 || true
  exit 1
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

PORT="$(free_port)"
ADDR="127.0.0.1:$PORT"
DB="$TMP/rbmrec.db"
export RBMREC_SERVER="$ADDR"

start_server() {
  # Small and fast training defaults; everything else from flags/env.
  RBMREC_HIDDEN=16 "$SERVER" --listen "$ADDR" --db "$DB" --epochs=15 \
    --train-threads 2 --online-publish-seconds 3600 >>"$TMP/server.log" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 1 100); do
    if "$CLI" health >/dev/null 2>&1; then return 0; fi
    kill -0 "$SERVER_PID" 2>/dev/null || fail "server exited during start"
    sleep 0.1
  done
  fail "server did not become healthy on $ADDR"
}

json_field() {  # json_field FILE KEY: the first numeric value of "KEY"
  python3 - "$1" "$2" <<'PY'
import json, sys
data = json.load(open(sys.argv[1]))
key = sys.argv[2]
def find(o):
    if isinstance(o, dict):
        if key in o and not isinstance(o[key], (dict, list)):
            return o[key]
        for v in o.values():
            r = find(v)
            if r is not None:
                return r
    elif isinstance(o, list):
        for v in o:
            r = find(v)
            if r is not None:
                return r
    return None
r = find(data)
print("" if r is None else r)
PY
}

# Synthetic ratings with planted structure: 200 users x 100 items, two taste
# groups; ~40% of pairs rated. u.data format: user \t item \t rating \t ts.
python3 - "$TMP/ratings.data" "$TMP/test.data" <<'PY'
import random, sys
rnd = random.Random(7)
with open(sys.argv[1], "w") as train, open(sys.argv[2], "w") as test:
    for u in range(1, 201):
        for i in range(1, 101):
            if rnd.random() > 0.4:
                continue
            likes = (i % 2) == (u % 2)
            r = rnd.choice([4, 5, 5]) if likes else rnd.choice([1, 2, 2])
            out = test if rnd.random() < 0.1 else train
            out.write(f"{u}\t{i}\t{r}\t{880000000 + u * 100 + i}\n")
PY
ROWS=$(wc -l <"$TMP/ratings.data")

echo "== start server on $ADDR"
start_server

echo "== import $ROWS rows"
"$CLI" import "$TMP/ratings.data" --batch 1000 || fail "import"

echo "== train"
"$CLI" train --hidden 16 --epochs 15 || fail "train"

echo "== predict"
"$CLI" predict 1 2 3 4 || fail "predict"
"$CLI" --json predict 1 2 >"$TMP/predict.json" || fail "predict --json"

echo "== recommend"
"$CLI" recommend 1 -n 5 || fail "recommend"
"$CLI" --json recommend 1 -n 5 >"$TMP/rec.json" || fail "recommend --json"

echo "== evaluate"
"$CLI" evaluate "$TMP/test.data" || fail "evaluate"

echo "== models / stats"
"$CLI" models || fail "models"
"$CLI" --json stats >"$TMP/stats1.json" || fail "stats"
cat "$TMP/stats1.json"; echo
RATINGS1=$(json_field "$TMP/stats1.json" ratings)
VERSION1=$(json_field "$TMP/stats1.json" active_model_version)
[[ "$RATINGS1" == "$ROWS" ]] || fail "stats ratings $RATINGS1, expected $ROWS"
[[ -n "$VERSION1" && "$VERSION1" != 0 ]] || fail "no active model version"

echo "== error cases keep the server serving"
if "$CLI" predict no-such-user 1 >/dev/null 2>"$TMP/err.txt"; then
  fail "predict for an unknown user succeeded"
fi
grep -q "NOT_FOUND" "$TMP/err.txt" || fail "unknown user: $(cat "$TMP/err.txt")"

echo "== SIGKILL and restart"
kill -KILL "$SERVER_PID"
wait "$SERVER_PID" 2>/dev/null || true
SERVER_PID=""
start_server
"$CLI" --json stats >"$TMP/stats2.json" || fail "stats after restart"
cat "$TMP/stats2.json"; echo
RATINGS2=$(json_field "$TMP/stats2.json" ratings)
VERSION2=$(json_field "$TMP/stats2.json" active_model_version)
[[ "$RATINGS2" == "$RATINGS1" ]] || fail "ratings $RATINGS1 -> $RATINGS2 after kill -9"
[[ "$VERSION2" == "$VERSION1" ]] || fail "active model $VERSION1 -> $VERSION2 after kill -9"
"$CLI" predict 1 2 >/dev/null || fail "predict after restart"

echo "== SIGTERM -> exit 0"
kill -TERM "$SERVER_PID"
set +e
wait "$SERVER_PID"
RC=$?
set -e
SERVER_PID=""
[[ "$RC" == 0 ]] || fail "server exited with $RC after SIGTERM"
grep -q "event=shutdown_complete" "$TMP/server.log" || fail "no shutdown_complete log line"

echo "PASS"
