#!/usr/bin/env bash
# --metrics-listen of the real rbmrec-server binary: off by default, the
# listen policy (a non-loopback address needs --insecure), a bad address
# fails the start, and a loopback listener answers /metrics in the
# Prometheus text format (fetched with bash's /dev/tcp: no HTTP client
# needed).
# Usage: metrics_startup_test.sh RBMREC_SERVER
set -uo pipefail
server=${1:?usage: metrics_startup_test.sh RBMREC_SERVER}
work=$(mktemp -d)
pid=
cleanup() {
  [[ -n $pid ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }
db=$work/rbmrec.db

# Starts the server in the background (log: $work/log); waits for
# server_started or its exit.
start() {
  : >"$work/log"
  "$server" --db "$db" --listen 127.0.0.1:0 "$@" 2>"$work/log" &
  pid=$!
  for _ in $(seq 200); do
    grep -q "event=server_started" "$work/log" && return 0
    kill -0 "$pid" 2>/dev/null || { wait "$pid"; rc=$?; pid=; return 1; }
    sleep 0.05
  done
  return 1
}
stop() {
  kill -TERM "$pid"
  wait "$pid"
  local rc=$?
  pid=
  return $rc
}
# GET /metrics from 127.0.0.1:$1 into $work/body (headers in $work/head).
fetch() {
  exec 3<>"/dev/tcp/127.0.0.1/$1" || return 1
  printf 'GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n' >&3
  cat <&3 >"$work/response"
  exec 3<&-
  sed -n '1,/^\r$/p' "$work/response" >"$work/head"
  sed '1,/^\r$/d' "$work/response" >"$work/body"
}

# Off by default.
if start; then
  if grep -q "event=metrics_started" "$work/log"; then
    fail "metrics started without --metrics-listen"
  else
    pass "no metrics listener by default"
  fi
  stop || fail "clean stop"
else
  fail "server did not start: $(cat "$work/log")"
fi

# The listen policy: plain HTTP without tokens is loopback only.
for listen in 0.0.0.0:0 "[::]:0"; do
  if start --metrics-listen "$listen"; then
    fail "--metrics-listen $listen started without --insecure"
    stop
  elif [[ $rc -eq 1 ]] && grep -qF "refusing to serve metrics on $listen" "$work/log" \
      && grep -q -- "--insecure" "$work/log"; then
    pass "--metrics-listen $listen refused without --insecure"
  else
    fail "--metrics-listen $listen: rc=$rc log: $(cat "$work/log")"
  fi
done
if start --metrics-listen 0.0.0.0:0 --insecure; then
  grep -q "event=metrics_started" "$work/log" \
    && pass "--metrics-listen 0.0.0.0:0 --insecure serves" \
    || fail "no metrics_started with --insecure: $(cat "$work/log")"
  stop || fail "clean stop"
else
  fail "--insecure: $(cat "$work/log")"
fi

# A bad address fails the start with exit 1.
if start --metrics-listen 127.0.0.1:notaport; then
  fail "started with a bad --metrics-listen"
  stop
elif [[ $rc -eq 1 ]] && grep -q "bad port" "$work/log"; then
  pass "bad --metrics-listen refused"
else
  fail "bad --metrics-listen: rc=$rc log: $(cat "$work/log")"
fi

# Loopback: /metrics answers the text format, and a health call moves it.
if start --metrics-listen 127.0.0.1:0; then
  port=$(grep "event=metrics_started" "$work/log" | sed -E 's/.* port=([0-9]+).*/\1/')
  before=$failures
  if [[ -n $port ]] && fetch "$port"; then
    grep -q "^HTTP/1.1 200" "$work/head" || fail "status: $(head -1 "$work/head")"
    grep -qi "^Content-Type: text/plain; version=0.0.4" "$work/head" \
      || fail "content type: $(cat "$work/head")"
    grep -q '^# TYPE rbmrec_rpc_requests_total counter$' "$work/body" \
      || fail "no rbmrec_rpc_requests_total TYPE line"
    grep -q '^rbmrec_build_info{version="[^"]*"} 1$' "$work/body" \
      || fail "no build info"
    grep -q '^rbmrec_leader 1$' "$work/body" || fail "no leader gauge"
    grep -q '^rbmrec_ratings_stored 0$' "$work/body" || fail "no ratings gauge"
    # Every sample line: name{labels} value.
    bad=$(grep -v '^#' "$work/body" \
      | grep -v -E '^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*",?)*\})? (-?[0-9.e+-]+|\+Inf|-Inf|NaN)$' \
      | head -3)
    [[ -z $bad ]] || fail "lines not in the text format: $bad"
    [[ $failures -eq $before ]] && pass "/metrics on 127.0.0.1:$port"
  else
    fail "cannot fetch /metrics (port '$port')"
  fi
  stop || fail "clean stop with metrics"
else
  fail "server with --metrics-listen 127.0.0.1:0 did not start: $(cat "$work/log")"
fi

if [[ $failures -gt 0 ]]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "all metrics start-up checks passed"
