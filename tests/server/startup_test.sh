#!/usr/bin/env bash
# Start-up security checks of the real rbmrec-server binary: the refusal to
# serve a non-loopback address without TLS and tokens, --insecure, file
# checks before binding, `token new` / `token hash`, and SIGHUP reloads.
# Usage: startup_test.sh RBMREC_SERVER MAKE_TEST_CERTS_SH
set -uo pipefail
server=${1:?usage: startup_test.sh RBMREC_SERVER MAKE_TEST_CERTS_SH}
make_certs=${2:?usage: startup_test.sh RBMREC_SERVER MAKE_TEST_CERTS_SH}
umask 022  # the token files below are 0644 unless a check says otherwise
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

# Runs the server expecting it to exit at once; sets rc, out, err.
run_exit() {
  out=$("$server" "$@" 2>"$work/err" </dev/null)
  rc=$?
  err=$(cat "$work/err")
}

# Starts the server in the background (log: $work/log); waits for
# server_started or its exit.
start() {
  : >"$work/log"
  "$server" "$@" 2>"$work/log" &
  pid=$!
  for _ in $(seq 100); do
    grep -q "event=server_started" "$work/log" && return 0
    kill -0 "$pid" 2>/dev/null || return 1
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
wait_log() {  # PATTERN: up to 5 s
  for _ in $(seq 100); do
    grep -q -- "$1" "$work/log" && return 0
    sleep 0.05
  done
  return 1
}

bash "$make_certs" "$work/certs" || { echo "FAIL: cannot make certificates"; exit 1; }
c=$work/certs
db=$work/rbmrec.db

# --- refusal
for listen in 0.0.0.0:0 "[::]:0" 10.255.255.1:0; do
  run_exit --listen "$listen" --db "$db"
  lines=$(printf '%s\n' "$err" | grep -c .)
  if [[ $rc == 1 && $lines == 1 && $err == "rbmrec-server: refusing to serve"* &&
        $err == *--insecure* && $err == *--auth-tokens* && $err == *--tls-cert* ]]; then
    pass "refuses $listen without TLS and tokens"
  else
    fail "$listen: rc=$rc stderr=[$err]"
  fi
done
[[ ! -e $db ]] && pass "nothing opened before the refusal" || fail "the database was created"
RBMREC_LISTEN=0.0.0.0:0 run_exit --db "$db"
[[ $rc == 1 && $err == "rbmrec-server: refusing to serve"* ]] &&
  pass "refuses RBMREC_LISTEN=0.0.0.0" || fail "env listen: rc=$rc [$err]"

# --- the HTTP listener: the same policy, checked on its own address
run_exit --listen 127.0.0.1:0 --http-listen 0.0.0.0:0 --db "$db"
[[ $rc == 1 && $err == "rbmrec-server: refusing to serve on 0.0.0.0:0"* &&
   $err == *"(--http-listen)" ]] &&
  pass "refuses --http-listen 0.0.0.0 without TLS and tokens" ||
  fail "http listen: rc=$rc [$err]"
run_exit --listen 127.0.0.1:0 --http-listen 127.0.0.1:0 --db "$db" \
  --tls-cert "$c/server.pem" --tls-key "$c/server.key" --tls-client-ca "$c/ca.pem"
[[ $rc == 2 && $err == *"--http-listen does not check client certificates"* ]] &&
  pass "refuses --http-listen with --tls-client-ca" ||
  fail "http listen with mTLS: rc=$rc [$err]"
[[ ! -e $db ]] && pass "nothing opened before the HTTP refusals" ||
  fail "the database was created"

# --- token new / token hash / token file
run_exit token new alice admin
token=$(printf '%s\n' "$out" | sed -n 1p)
line=$(printf '%s\n' "$out" | sed -n 2p)
nlines=$(printf '%s\n' "$out" | grep -c .)
if [[ $rc == 0 && $nlines == 2 && $token =~ ^rbmrec_[A-Za-z0-9_-]{43}$ &&
      $line =~ ^alice\ admin\ sha256:[0-9a-f]{64}$ && -n $err ]]; then
  pass "token new prints the token and its line"
else
  fail "token new: rc=$rc out=[$out]"
fi
hash=$(printf '%s\n' "$token" | "$server" token hash)
[[ "alice admin $hash" == "$line" ]] && pass "token hash matches token new" ||
  fail "token hash [$hash] vs [$line]"
expected=$(printf '%s' "$token" | sha256sum | cut -d' ' -f1)
[[ $hash == "sha256:$expected" ]] && pass "the hash is SHA-256 of the token" ||
  fail "hash $hash != sha256:$expected"
out=$(printf 'has space:colon\n' | "$server" token hash 2>&1) && rc=0 || rc=$?
[[ $rc == 1 && $out == *"not a token a client can send"* ]] &&
  pass "token hash refuses a token no client can send" ||
  fail "token hash of a bad token: rc=$rc out=[$out]"
run_exit token new "bad name" read
[[ $rc == 1 ]] && pass "token new rejects a bad name" || fail "bad name rc=$rc"
run_exit token new bob root
[[ $rc == 1 ]] && pass "token new rejects a bad role" || fail "bad role rc=$rc"

printf '# clients\n%s\n' "$line" >"$work/tokens"
printf 'alice admin %s\n' "$token" >"$work/bad-tokens"  # the token, not a hash
run_exit --listen 127.0.0.1:0 --db "$db" --auth-tokens "$work/bad-tokens"
[[ $rc == 1 && $err == *"$work/bad-tokens:1:"* && $err != *"$token"* ]] &&
  pass "a bad token file fails naming FILE:LINE, never echoing the token" ||
  fail "bad token file: rc=$rc [$err]"

# A token file others or its group may write is refused (as ssh refuses key
# files), naming the file, its mode and the fix; so is one without clients.
cp "$work/tokens" "$work/open-tokens"
chmod 0666 "$work/open-tokens"
run_exit --listen 127.0.0.1:0 --db "$db" --auth-tokens "$work/open-tokens"
[[ $rc == 1 && $err == *"token file $work/open-tokens has mode 0666"* &&
  $err == *"chmod 600 $work/open-tokens"* ]] &&
  pass "a token file writable by others fails naming the file, mode and fix" ||
  fail "0666 token file: rc=$rc [$err]"
printf '# nobody yet\n' >"$work/no-clients"
run_exit --listen 127.0.0.1:0 --db "$db" --auth-tokens "$work/no-clients"
[[ $rc == 1 && $err == *"token file $work/no-clients has no clients: every call would be refused"* ]] &&
  pass "a token file without clients fails" || fail "empty token file: rc=$rc [$err]"

# --- TLS file checks before binding
run_exit --listen 127.0.0.1:0 --db "$db" --tls-cert "$c/server.pem"
[[ $rc == 1 && $err == *--tls-key* ]] && pass "--tls-cert needs --tls-key" ||
  fail "cert without key: rc=$rc [$err]"
run_exit --listen 127.0.0.1:0 --db "$db" --tls-cert "$c/server.pem" --tls-key "$c/client.key"
[[ $rc == 1 && $err == *"--tls-key $c/client.key"*"does not match"* ]] &&
  pass "a key that does not match fails naming the file" ||
  fail "mismatched key: rc=$rc [$err]"
run_exit --listen 127.0.0.1:0 --db "$db" --tls-cert "$c/missing.pem" --tls-key "$c/server.key"
[[ $rc == 1 && $err == *"--tls-cert $c/missing.pem"* ]] &&
  pass "a missing certificate fails naming the file" || fail "missing cert: rc=$rc [$err]"

# --- --insecure starts and warns
if start --listen 0.0.0.0:0 --db "$db" --insecure; then
  n=$(grep -c INSECURE "$work/log")
  [[ $n == 1 ]] && pass "--insecure starts with one INSECURE warning" ||
    fail "INSECURE lines: $n"
  grep -q "reflection=false" "$work/log" && pass "reflection auto is off on 0.0.0.0" ||
    fail "reflection not off: $(grep server_started "$work/log")"
  stop && pass "stops on SIGTERM" || fail "exit code after SIGTERM"
else
  fail "--insecure did not start: $(cat "$work/log")"
fi

# --- TLS + tokens on 0.0.0.0: no warning; SIGHUP reloads
cp "$c/server.pem" "$work/cert.pem"
cp "$c/server.key" "$work/key.pem"
if start --listen 0.0.0.0:0 --db "$db" --tls-cert "$work/cert.pem" \
    --tls-key "$work/key.pem" --tls-client-ca "$c/ca.pem" --auth-tokens "$work/tokens"; then
  ! grep -q INSECURE "$work/log" && pass "TLS + tokens on 0.0.0.0 start without a warning" ||
    fail "unexpected INSECURE warning"
  grep -q "tls=mtls" "$work/log" && grep -q "tokens=on" "$work/log" &&
    pass "the start line says mtls and tokens" || fail "start line: $(grep server_started "$work/log")"
  echo "broken" >>"$work/tokens"
  echo "not a certificate" >"$work/cert.pem"
  kill -HUP "$pid"
  wait_log "event=auth_tokens_reload_failed" && wait_log "event=tls_reload_failed" &&
    pass "bad files at SIGHUP are logged and kept" || fail "no reload failure logged"
  grep "reload_failed" "$work/log" | grep -q "$work/tokens:3:" &&
    pass "the token reload error names FILE:LINE" || fail "no FILE:LINE in the reload error"
  printf '# emptied\n' >"$work/tokens"
  kill -HUP "$pid"
  wait_log "event=auth_tokens_reload_failed .*has no clients" &&
    pass "a token file emptied at SIGHUP is refused and logged" ||
    fail "no reload failure for the emptied token file"
  printf '%s\nbob read %s\n' "$line" "$(echo other | "$server" token hash)" >"$work/tokens"
  chmod 0666 "$work/tokens"
  kill -HUP "$pid"
  wait_log "event=auth_tokens_reload_failed .*mode 0666" &&
    pass "a token file made writable by others at SIGHUP is refused and logged" ||
    fail "no reload failure for the 0666 token file"
  chmod 0600 "$work/tokens"
  cp "$c/server2.pem" "$work/cert.pem"
  cp "$c/server2.key" "$work/key.pem"
  kill -HUP "$pid"
  wait_log "event=auth_tokens_reloaded .*clients=2" && pass "SIGHUP reloads the token file" ||
    fail "no auth_tokens_reloaded clients=2"
  wait_log "event=tls_reloaded .*serial=03EA" && pass "SIGHUP reloads the certificate" ||
    fail "no tls_reloaded with the new serial"
  kill -0 "$pid" 2>/dev/null && pass "still serving after SIGHUP" || fail "died on SIGHUP"
  stop || fail "exit code after SIGTERM"
else
  fail "TLS + tokens did not start: $(cat "$work/log")"
fi

if ((failures > 0)); then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all start-up checks passed"
