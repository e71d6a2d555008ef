#!/usr/bin/env bash
# End-to-end test: the real rbmrec-server binary and the rbmrec CLI.
#   e2e_test.sh [SERVER_BIN] [CLI_BIN]   (defaults: build/bin/...)
# Starts the server on a free port with a temporary database, imports a
# generated synthetic ratings file (MovieLens u.data format), trains,
# predicts, recommends, evaluates, reads stats; kills the server with
# SIGKILL, restarts it on the same database and checks that the ratings count
# and the active model version are unchanged; finally SIGTERM -> exit 0.
# Also: the health of "rbmrec.v1.Rbmrec" is NOT_SERVING before the first
# training and SERVING after; over raw gRPC calls (Debian's python3-grpcio),
# a stream with a malformed message fails and states what is committed, and
# server reflection v1 and v1alpha list and resolve the services.
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

# A python3 with grpc (Debian's python3-grpcio) for raw gRPC calls, or "".
PYGRPC=""
for py in python3 /usr/bin/python3; do
  if "$py" -c "import grpc" 2>/dev/null; then PYGRPC="$py"; break; fi
done

# raw_grpc CHECK: runs one of the raw-call checks below against $ADDR.
raw_grpc() {
  if [[ -z "$PYGRPC" ]]; then
    echo "SKIP raw gRPC check '$1': no python3 with grpc (python3-grpcio)"
    return 0
  fi
  "$PYGRPC" - "$ADDR" "$1" <<'PY'
import struct, sys
import grpc

addr, check = sys.argv[1], sys.argv[2]
ch = grpc.insecure_channel(addr)
grpc.channel_ready_future(ch).result(timeout=10)

def varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])

def field(num, payload):  # a length-delimited field
    return varint(num << 3 | 2) + varint(len(payload)) + payload

def batch(rows):  # AddRatingsRequest{ratings: Rating{user_id, item_id, rating}}
    return b"".join(
        field(1, field(1, u) + field(2, i) + varint(3 << 3 | 1) + struct.pack("<d", r))
        for u, i, r in rows)

def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)

if check == "malformed":
    add = ch.stream_unary("/rbmrec.v1.Rbmrec/AddRatings")
    stream = [batch([(b"e2e-a", b"1", 5.0), (b"e2e-a", b"2", 4.0)]),
              batch([(b"e2e-\xff", b"1", 5.0)]),  # invalid UTF-8
              batch([(b"e2e-c", b"1", 5.0)])]
    try:
        add(iter(stream), timeout=10)
        fail("a stream with a malformed message answered OK")
    except grpc.RpcError as e:
        md = dict(e.trailing_metadata() or ())
        print(e.code(), e.details(), md)
        if e.code() != grpc.StatusCode.INVALID_ARGUMENT:
            fail("code %s" % e.code())
        if "batch 1" not in e.details():
            fail("the message does not name batch 1")
        if md.get("rbmrec-error-reason") != "MALFORMED_MESSAGE":
            fail("reason %r" % md.get("rbmrec-error-reason"))
        if (md.get("rbmrec-committed-batches"), md.get("rbmrec-committed-rows")) != ("1", "2"):
            fail("committed metadata %r" % md)
elif check == "reflection":
    for version in ("v1", "v1alpha"):
        info = ch.stream_stream(
            "/grpc.reflection.%s.ServerReflection/ServerReflectionInfo" % version)
        requests = [field(7, b""),  # list_services
                    field(4, b"rbmrec.v1.Rbmrec"),  # file_containing_symbol
                    field(4, b"grpc.health.v1.Health")]
        answers = list(info(iter(requests), timeout=10))
        if len(answers) != 3:
            fail("%s: %d answers" % (version, len(answers)))
        for name in (b"rbmrec.v1.Rbmrec", b"grpc.health.v1.Health",
                     b"grpc.reflection.v1.ServerReflection"):
            if name not in answers[0]:
                fail("%s does not list %s" % (version, name))
        # The answers carry the files' descriptors (their names appear only
        # there, not in the echoed request).
        if b"proto/rbmrec.proto" not in answers[1]:
            fail("%s does not resolve rbmrec.v1.Rbmrec" % version)
        if b"proto/health.proto" not in answers[2]:
            fail("%s does not resolve grpc.health.v1.Health" % version)
        print("reflection %s: lists and resolves the services" % version)
else:
    fail("unknown check " + check)
PY
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

# Synthetic ratings with planted structure (200 users x 100 items).
python3 "$ROOT/tests/server/synthetic_ratings.py" "$TMP/ratings.data" "$TMP/test.data"
ROWS=$(wc -l <"$TMP/ratings.data")

echo "== start server on $ADDR"
start_server

echo "== health of rbmrec.v1.Rbmrec before the first training: NOT_SERVING"
if "$CLI" health rbmrec.v1.Rbmrec >"$TMP/health.txt" 2>&1; then
  fail "rbmrec.v1.Rbmrec is SERVING without a model"
fi
grep -q "NOT_SERVING" "$TMP/health.txt" || fail "health: $(cat "$TMP/health.txt")"
"$CLI" health >/dev/null || fail "overall health (liveness) is not SERVING"

echo "== reflection v1 and v1alpha"
raw_grpc reflection || fail "reflection"

echo "== import $ROWS rows"
"$CLI" import "$TMP/ratings.data" --batch 1000 || fail "import"

echo "== train"
"$CLI" train --hidden 16 --epochs 15 || fail "train"

echo "== health of rbmrec.v1.Rbmrec after training: SERVING"
for _ in $(seq 1 50); do
  if "$CLI" health rbmrec.v1.Rbmrec >/dev/null 2>&1; then break; fi
  sleep 0.1
done
"$CLI" health rbmrec.v1.Rbmrec || fail "rbmrec.v1.Rbmrec not SERVING after train"

echo "== predict"
"$CLI" predict 1 2 3 4 || fail "predict"
"$CLI" --json predict 1 2 >"$TMP/predict.json" || fail "predict --json"

echo "== recommend"
"$CLI" recommend 1 -n 5 || fail "recommend"
"$CLI" --json recommend 1 -n 5 >"$TMP/rec.json" || fail "recommend --json"

echo "== similar"
"$CLI" similar 2 -n 5 --user 1 || fail "similar"
"$CLI" --json similar 2 -n 5 >"$TMP/similar.json" || fail "similar --json"
[[ $(grep -o '"item_id"' "$TMP/similar.json" | wc -l) == 5 ]] ||
  fail "similar --json: expected 5 items: $(cat "$TMP/similar.json")"
if grep -q '"item_id":"2"' "$TMP/similar.json"; then
  fail "similar listed its query item: $(cat "$TMP/similar.json")"
fi

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
"$CLI" health rbmrec.v1.Rbmrec >/dev/null || fail "not SERVING after restart"

echo "== a malformed message fails its AddRatings stream"
raw_grpc malformed || fail "malformed message"
if [[ -n "$PYGRPC" ]]; then
  "$CLI" --json stats >"$TMP/stats3.json" || fail "stats after malformed"
  RATINGS3=$(json_field "$TMP/stats3.json" ratings)
  # Batch 0 (2 rows) is committed; batches 1 and 2 are not.
  [[ "$RATINGS3" == $((RATINGS2 + 2)) ]] ||
    fail "ratings $RATINGS2 -> $RATINGS3 after the malformed stream (want +2)"
fi

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
