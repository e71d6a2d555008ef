#!/usr/bin/env bash
# The HTTP/JSON listener's load target (issue 29; docs/http.md) on ML-100k,
# loopback, one server with both listeners, printing every figure as
# measured:
#   (h) PredictRatings, 10 items, concurrency 16, over HTTP (`wrk` with a Lua
#       script POSTing /v1/users/{user}:predict bodies drawn from u1.base:
#       random users and 10 distinct random items, as rbmrec-loadgen draws
#       them) against rbmrec-loadgen's gRPC PredictRatings at the same
#       concurrency, alternating in each of REPEAT rounds: QPS, p50/p99 and
#       errors of both, HTTP/gRPC QPS ratio. Targets (medians): ratio >= 0.5,
#       HTTP p99 <= 5 ms, 0 HTTP errors.
#   (i) the same HTTP load while other clients misbehave for the whole run:
#       malformed requests (a bad request line, a body that is not JSON),
#       oversized ones (a Content-Length over the limit, a chunked body
#       growing past it) and 32 slowloris connections sending a header byte
#       every 0.5 s. Targets: the load's p99 <= 5 ms and 0 errors; the bad
#       requests answered 400/413 (counted), the slow ones still open.
# The server runs with --max-message-mb 1 (the load's bodies are ~200 bytes)
# so the oversized bodies are cheap to send. Starts its own server on free
# ports with a temporary database and removes it on exit. Needs wrk (Debian
# package wrk). Runs in ~1 min.
#
# Usage: bench/http_bench.sh [DATA_DIR]   (default ../shared/data/movielens/ml-100k)
# Env:   DURATION=5 (seconds per load run), CONCURRENCY=16, REPEAT=3,
#        HTTP_THREADS (the server's --http-threads; default its own)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
ml=${1:-$root/../shared/data/movielens/ml-100k}
bin=$root/build/bin
duration=${DURATION:-5}
conc=${CONCURRENCY:-16}
repeat=${REPEAT:-3}

[ -r "$ml/u1.base" ] || { echo "http_bench: missing $ml/u1.base" >&2; exit 1; }
command -v wrk >/dev/null || {
  echo "http_bench: wrk not found (apt-get install wrk)" >&2
  exit 1
}
need=()
for t in rbmrec rbmrec-server rbmrec-loadgen; do
  [ -x "$bin/$t" ] || need+=(--target "$t")
done
if [ ${#need[@]} -gt 0 ]; then
  cmake --build "$root/build" -j2 "${need[@]}" >&2
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/rbmrec-http-bench.XXXXXX")
server_pid=
cleanup() {
  if [ -n "$server_pid" ]; then
    kill -TERM "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# shellcheck source=bench/lib.sh
source "$root/bench/lib.sh"

port=$(free_port)
http_port=$(free_port)
extra=()
[ -n "${HTTP_THREADS:-}" ] && extra+=(--http-threads "$HTTP_THREADS")
"$bin/rbmrec-server" --listen "127.0.0.1:$port" --http-listen "127.0.0.1:$http_port" \
  --db "$tmp/bench.db" --max-message-mb 1 ${extra[@]+"${extra[@]}"} >"$tmp/server.log" 2>&1 &
server_pid=$!
cli() { "$bin/rbmrec" --server "127.0.0.1:$port" "$@"; }
for _ in $(seq 100); do
  cli --timeout 1 health >/dev/null 2>&1 && break
  sleep 0.1
done
cli --timeout 1 health >/dev/null 2>&1 || {
  echo "http_bench: server did not start; log:" >&2
  cat "$tmp/server.log" >&2
  exit 1
}
cli import "$ml/u1.base" >/dev/null 2>&1
cli train >/dev/null 2>&1

# The wrk script: 20000 requests drawn as rbmrec-loadgen draws them (a
# random user of u1.base, 10 distinct random items of it), each thread
# starting at its own place in the list.
python3 - "$ml/u1.base" "$tmp/predict.lua" <<'EOF'
import json, random, sys
users, items = set(), set()
for line in open(sys.argv[1]):
    f = line.split()
    users.add(f[0]); items.add(f[1])
users, items = sorted(users), sorted(items)
rng = random.Random(1)
with open(sys.argv[2], "w") as out:
    out.write("local bodies = {\n")
    for _ in range(20000):
        body = json.dumps({"itemIds": rng.sample(items, 10)}, separators=(",", ":"))
        out.write('{"/v1/users/%s:predict", %s},\n' % (rng.choice(users), json.dumps(body)))
    out.write("}\n")
    out.write(r'''
local requests, next_request = {}, 1
local headers = {["Content-Type"] = "application/json"}
local thread_number = 0
function setup(thread)
  thread_number = thread_number + 1
  thread:set("first", thread_number * 7919)
end
function init(args)
  for i, b in ipairs(bodies) do
    requests[i] = wrk.format("POST", b[1], headers, b[2])
  end
  next_request = (first or 1) % #requests + 1
end
function request()
  local r = requests[next_request]
  next_request = next_request % #requests + 1
  return r
end
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '{"requests":%d,"qps":%.1f,"p50_ms":%.3f,"p99_ms":%.3f,"errors":%d}\n',
    summary.requests, summary.requests / (summary.duration / 1e6),
    latency:percentile(50) / 1000, latency:percentile(99) / 1000,
    e.connect + e.read + e.write + e.status + e.timeout))
end
''')
EOF

# The server's CPU time so far, in clock ticks.
server_ticks() { awk '{print $14 + $15}' "/proc/$server_pid/stat"; }
# cpu_per_call TICKS_BEFORE CALLS: the server's CPU microseconds per call
# since TICKS_BEFORE (a figure the other processes on the machine disturb
# less than QPS and latency).
cpu_per_call() {
  python3 -c "import sys; t=(int(sys.argv[2])-int(sys.argv[1]))/int(sys.argv[3]); print('%.0f' % (t*1e6/float(sys.argv[4])) if float(sys.argv[4]) else 'n/a')" \
    "$1" "$(server_ticks)" "$(getconf CLK_TCK)" "$2"
}
# http_load OUT_JSON SECONDS: wrk at c=$conc; its done() prints the JSON
# object on the last line; OUT_JSON.cpu: the server's CPU us per call.
http_load() {
  local t0
  t0=$(server_ticks)
  wrk -t 2 -c "$conc" -d "${2}s" --latency -s "$tmp/predict.lua" \
    "http://127.0.0.1:$http_port" >"$1.out" 2>&1
  tail -n 1 "$1.out" >"$1"
  cpu_per_call "$t0" "$(json "$1" 'd["requests"]')" >"$1.cpu"
}
# grpc_load OUT_JSON: rbmrec-loadgen (1 s warmup, counted in the CPU).
grpc_load() {
  local t0
  t0=$(server_ticks)
  "$bin/rbmrec-loadgen" --server "127.0.0.1:$port" --concurrency "$conc" \
    --duration "$duration" --warmup 1 --json --mix predict=1 \
    --items-per-predict 10 --ratings "$ml/u1.base" >"$1"
  cpu_per_call "$t0" "$(json "$1" 'd["rpcs"][0]["qps"] * '"$((duration + 1))")" >"$1.cpu"
}

echo "rbmrec HTTP benchmark: $(nproc) cores, concurrency $conc, ${duration}s per load run"
echo "data: $ml; uptime:$(uptime | sed 's/.*load average/ load average/')"
echo
h_qps_all=() h_p99_all=() h_err=0 ratios=()
for r in $(seq "$repeat"); do
  http_load "$tmp/warm.json" 1
  http_load "$tmp/http.json" "$duration"
  grpc_load "$tmp/grpc.json"
  h_qps=$(json "$tmp/http.json" 'd["qps"]')
  h_p50=$(json "$tmp/http.json" 'd["p50_ms"]')
  h_p99=$(json "$tmp/http.json" 'd["p99_ms"]')
  h_e=$(json "$tmp/http.json" 'd["errors"]')
  g_qps=$(json "$tmp/grpc.json" 'd["rpcs"][0]["qps"]')
  g_p50=$(json "$tmp/grpc.json" 'd["rpcs"][0]["p50_ms"]')
  g_p99=$(json "$tmp/grpc.json" 'd["rpcs"][0]["p99_ms"]')
  g_e=$(json "$tmp/grpc.json" 'd["rpcs"][0]["errors"]')
  hr=$(ratio "$h_qps" "$g_qps")
  echo "(h) run $r: HTTP PredictRatings 10 items, c=$conc (wrk): QPS $h_qps, p50 $h_p50 ms, p99 $h_p99 ms, errors $h_e; server CPU ~$(cat "$tmp/http.json.cpu") us/call"
  echo "          gRPC PredictRatings 10 items, c=$conc (loadgen): QPS $g_qps, p50 $g_p50 ms, p99 $g_p99 ms, errors $g_e; server CPU ~$(cat "$tmp/grpc.json.cpu") us/call; HTTP/gRPC QPS $hr"
  h_qps_all+=("$h_qps") h_p99_all+=("$h_p99") ratios+=("$hr")
  h_err=$((h_err + h_e))
done
h_p99=$(median "${h_p99_all[@]}")
hr=$(median "${ratios[@]}")
echo "(h) median of $repeat: HTTP QPS $(median "${h_qps_all[@]}"), p99 $h_p99 ms, errors $h_err (all runs); HTTP/gRPC QPS ratio $hr"
echo "    target ratio >= 0.5:   $(verdict "$hr >= 0.5")"
echo "    target p99 <= 5 ms:    $(verdict "$h_p99 <= 5")"
echo "    target 0 errors:       $(verdict "$h_err == 0")"

# ---- (i) the load while other clients misbehave ----------------------------
cat >"$tmp/abuse.py" <<'EOF'
# Misbehaving clients for SECONDS: counts the answers by kind and status.
import collections, socket, sys, threading, time
port, seconds = int(sys.argv[1]), float(sys.argv[2])
end = time.time() + seconds
counts = collections.Counter()

def connect(timeout=10):
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(timeout)
    return s

def status_of(s):
    data = b""
    try:
        while b"\r\n" not in data:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    except OSError:
        return "reset"
    parts = data.split(b" ", 2)
    return parts[1].decode() if len(parts) > 1 else "closed"

def once(kind, head, body_parts, timeout=10):
    # An oversized body's sender stops when the server no longer reads it
    # (it answered 413): the send times out, then the answer is read.
    s = connect(timeout)
    try:
        s.sendall(head)
        for p in body_parts:
            s.sendall(p)
    except OSError:
        pass  # answered early (413) and closed
    counts[kind + " " + status_of(s)] += 1
    s.close()

def malformed():
    while time.time() < end:
        once("malformed request line", b"GARBAGE \x01\x02\r\n\r\n", [])
        body = b"{not json"
        once("malformed JSON body",
             b"POST /v1/users/1:predict HTTP/1.1\r\nHost: x\r\n"
             b"Content-Length: %d\r\n\r\n" % len(body), [body])
        time.sleep(0.01)

def oversized():
    chunk = b"x" * 65536
    while time.time() < end:
        once("oversized Content-Length",
             b"POST /v1/users/1:predict HTTP/1.1\r\nHost: x\r\n"
             b"Content-Length: 100000000\r\n\r\n", [chunk], 0.5)
        once("oversized chunked body",
             b"POST /v1/users/1:predict HTTP/1.1\r\nHost: x\r\n"
             b"Transfer-Encoding: chunked\r\n\r\n",
             [b"10000\r\n" + chunk + b"\r\n"] * 20, 0.5)
        time.sleep(0.05)

def slowloris(held):
    s = connect()
    s.sendall(b"POST /v1/users/1:predict HTTP/1.1\r\nHost: x\r\n")
    try:
        while time.time() < end:
            s.sendall(b"X")
            time.sleep(0.5)
        held.append(1)
    except OSError:
        pass
    s.close()

held = []
threads = [threading.Thread(target=malformed)]
threads += [threading.Thread(target=oversized) for _ in range(2)]
threads += [threading.Thread(target=slowloris, args=(held,)) for _ in range(32)]
for t in threads:
    t.start()
for t in threads:
    t.join()
for k in sorted(counts):
    print("    %-32s %d" % (k + ":", counts[k]))
print("    slowloris connections still open at the end: %d of 32" % len(held))
EOF
echo
echo "(i) HTTP PredictRatings c=$conc while malformed, oversized and slow clients run:"
python3 "$tmp/abuse.py" "$http_port" "$((duration + 1))" >"$tmp/abuse.out" 2>&1 &
abuse_pid=$!
sleep 0.5
http_load "$tmp/during.json" "$duration"
wait "$abuse_pid" || true
i_p99=$(json "$tmp/during.json" 'd["p99_ms"]')
i_err=$(json "$tmp/during.json" 'd["errors"]')
echo "    load: QPS $(json "$tmp/during.json" 'd["qps"]'), p50 $(json "$tmp/during.json" 'd["p50_ms"]') ms, p99 $i_p99 ms, errors $i_err"
echo "    the misbehaving clients' answers (kind, HTTP status: count):"
cat "$tmp/abuse.out"
echo "    target p99 <= 5 ms:    $(verdict "$i_p99 <= 5")"
echo "    target 0 errors:       $(verdict "$i_err == 0")"
echo "uptime:$(uptime | sed 's/.*load average/ load average/')"
