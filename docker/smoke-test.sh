#!/usr/bin/env bash
# Builds docker/Dockerfile, runs the image and checks it from the host CLI. Both containers
# serve TLS with client tokens: throwaway certificates and an admin and a reader token from
# docker/make-certs.sh, mounted read-only at /etc/rbmrec.
#   1. container 1 (with ../shared/tools/container-smoke.sh: podman, host network, loopback;
#      TLS + tokens): health without a token, import of a generated ratings file (300 users x
#      80 items, planted taste groups), train (5 epochs, 16 hidden), predict, recommend, stats
#      with the admin token; a call without a token fails with UNAUTHENTICATED, the reader
#      token reads but cannot train or delete (PERMISSION_DENIED), a call without TLS fails;
#      the HTTP/JSON listener (RBMREC_HTTP_LISTEN, same TLS and tokens): curl GET /v1/stats
#      with the admin token over HTTPS (--cacert) gives the imported ratings, no token 401;
#      then the image's HEALTHCHECK once (over TLS) and SIGTERM -> exit code 0;
#   2. the image's defaults (0.0.0.0, no TLS, no tokens): the server refuses to start, exit 1,
#      with its "refusing to serve" line;
#   3. container 2, a new one on the same /data (a host directory owned by the image's uid),
#      requiring client certificates (mTLS): every rating (stats) and the stored/active model
#      versions unchanged, predict and recommend still work, a call without the client
#      certificate fails, HEALTHCHECK (with the client certificate); then a timed
#      `podman stop` while a training job runs: exit code 0 within STOP_MAX_SECONDS (default 2).
# Prints the image size, the wall time and the stop time.
#
# usage: docker/smoke-test.sh          (from anywhere; needs root to install podman)
# env:   RBMREC_SMOKE_PORT (default 50091; the HTTP listener on the next port),
#        RBMREC_SMOKE_IMAGE (default localhost/rbmrec:smoke),
#        RBMREC_SMOKE_TESTS (the image's RBMREC_TESTS build argument; default: the Dockerfile's),
#        RBMREC_SMOKE_PREBUILT (a directory with rbmrec-server and rbmrec built on this host: the
#        image's build stage copies them instead of compiling; .ci/run sets build-test/bin),
#        RBMREC_CLI (host rbmrec binary; default build-test/bin/rbmrec or build/bin/rbmrec,
#        built into build/ when neither exists), RBMREC_SERVER_BIN (host rbmrec-server, used
#        for `token new`; default beside RBMREC_CLI, built when missing), STOP_MAX_SECONDS
#        (default 2).
# Without ../shared/tools/container-smoke.sh (no podman sandbox tooling), or when podman
# cannot be installed, it prints the equivalent Docker commands and exits 0 with SKIP.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

# ---------------------------------------------------------------- phase 1 (the check
# command container-smoke.sh runs against container 1; retried by it, 10 s per try)
if [ "${1:-}" = --phase1 ]; then
  : "${CLI:?}" "${ADDR:?}" "${HTTP_ADDR:?}" "${SMOKE_DIR:?}"
  sec=$SMOKE_DIR/secrets
  rbm() { "$CLI" --server "$ADDR" --tls-ca "$sec/ca.pem" --token-file "$sec/admin.token" "$@"; }
  # expect_fail CODE CLI-ARGS...: the call fails with CODE (the CLI's "error: CODE: ...").
  expect_fail() {
    local code=$1 out
    shift
    if out=$("$CLI" --server "$ADDR" --timeout 5 "$@" 2>&1); then
      echo "expected $code from: rbmrec $*; got success: $out" >&2
      return 1
    fi
    grep -q "^error: $code: " <<<"$out" || { echo "expected $code from: rbmrec $*; got: $out" >&2; return 1; }
    echo "ok: $code from rbmrec $* ($(grep '^hint: ' <<<"$out" | head -n1))"
  }
  "$CLI" --server "$ADDR" --tls-ca "$sec/ca.pem" --token-file '' health
  rows=$(wc -l <"$SMOKE_DIR/ratings.data")
  rbm --json import "$SMOKE_DIR/ratings.data" >"$SMOKE_DIR/import.json"
  grep -q "\"accepted\":$rows," "$SMOKE_DIR/import.json" ||
    { echo "import did not accept all $rows rows: $(cat "$SMOKE_DIR/import.json")" >&2; exit 1; }
  rbm train --epochs 5 --hidden 16
  rbm predict u1 i1 i2 i3
  rbm recommend u1 -n 5
  rbm --json stats >"$SMOKE_DIR/stats1.json"
  rbm --json models >"$SMOKE_DIR/models1.json"
  cat "$SMOKE_DIR/stats1.json"; echo
  # Tokens and roles, TLS.
  expect_fail UNAUTHENTICATED --tls-ca "$sec/ca.pem" --token-file '' stats
  echo rbmrec_not_a_known_token >"$SMOKE_DIR/unknown.token"
  expect_fail UNAUTHENTICATED --tls-ca "$sec/ca.pem" --token-file "$SMOKE_DIR/unknown.token" stats
  "$CLI" --server "$ADDR" --tls-ca "$sec/ca.pem" --token-file "$sec/reader.token" \
    recommend u1 -n 3 >/dev/null
  expect_fail PERMISSION_DENIED --tls-ca "$sec/ca.pem" --token-file "$sec/reader.token" \
    train --epochs 1
  expect_fail PERMISSION_DENIED --tls-ca "$sec/ca.pem" --token-file "$sec/reader.token" \
    delete-user u1
  expect_fail UNAVAILABLE --token-file "$sec/admin.token" health
  # The HTTP/JSON listener: the same certificate and tokens (the token in a header file,
  # not on the command line).
  printf 'Authorization: Bearer %s\n' "$(head -n1 "$sec/admin.token")" >"$SMOKE_DIR/http.auth"
  curl -sS --fail --max-time 10 --cacert "$sec/ca.pem" -H @"$SMOKE_DIR/http.auth" \
    "https://$HTTP_ADDR/v1/stats" >"$SMOKE_DIR/http-stats.json"
  grep -q "\"ratings\":\"$rows\"" "$SMOKE_DIR/http-stats.json" ||
    { echo "HTTP GET /v1/stats: $(cat "$SMOKE_DIR/http-stats.json")" >&2; exit 1; }
  echo "ok: HTTP GET /v1/stats with the admin token: $rows ratings"
  code=$(curl -sS -o /dev/null -w '%{http_code}' --max-time 10 --cacert "$sec/ca.pem" \
    "https://$HTTP_ADDR/v1/stats")
  [ "$code" = 401 ] || { echo "HTTP GET /v1/stats without a token: $code, want 401" >&2; exit 1; }
  echo "ok: HTTP GET /v1/stats without a token: 401"
  exit 0
fi

t_start=$SECONDS
SMOKE_TOOL=${CONTAINER_SMOKE:-$root/../shared/tools/container-smoke.sh}
IMAGE=${RBMREC_SMOKE_IMAGE:-localhost/rbmrec:smoke}
PORT=${RBMREC_SMOKE_PORT:-50091}
ADDR=127.0.0.1:$PORT
HTTP_ADDR=127.0.0.1:$((PORT + 1))
STOP_MAX_SECONDS=${STOP_MAX_SECONDS:-2}
IMAGE_UID=10001 # docker/Dockerfile ARG RBMREC_UID

docker_steps() {
  cat <<EOF
The same steps with Docker (from the repository root):
  docker build -f docker/Dockerfile -t rbmrec:smoke .
  sudo docker/make-certs.sh /tmp/rbmrec-secrets --tokens docker run --rm rbmrec:smoke
  mkdir -p /tmp/rbmrec-data && sudo chown $IMAGE_UID:$IMAGE_UID /tmp/rbmrec-data
  docker run -d --name rbmrec-1 -p 127.0.0.1:$PORT:50051 -v /tmp/rbmrec-data:/data \\
    -v /tmp/rbmrec-secrets:/etc/rbmrec:ro -e RBMREC_TLS_CERT=/etc/rbmrec/server.pem \\
    -e RBMREC_TLS_KEY=/etc/rbmrec/server.key -e RBMREC_AUTH_TOKENS=/etc/rbmrec/tokens \
    -p 127.0.0.1:$((PORT + 1)):8080 -e RBMREC_HTTP_LISTEN=0.0.0.0:8080 rbmrec:smoke
  curl --cacert /tmp/rbmrec-secrets/ca.pem -H "Authorization: Bearer \$(head -n1 /tmp/rbmrec-secrets/admin.token)" \
    https://$HTTP_ADDR/v1/stats                          # HTTP/JSON; without the token: 401
  export RBMREC_TLS_CA=/tmp/rbmrec-secrets/ca.pem RBMREC_TOKEN_FILE=/tmp/rbmrec-secrets/admin.token
  build/bin/rbmrec --server $ADDR health
  build/bin/rbmrec --server $ADDR import ratings.data     # any u.data/CSV ratings file
  build/bin/rbmrec --server $ADDR train --epochs 5 --hidden 16
  build/bin/rbmrec --server $ADDR predict USER ITEM...; build/bin/rbmrec --server $ADDR recommend USER -n 5
  build/bin/rbmrec --server $ADDR --json stats            # note ratings, active_model_version
  build/bin/rbmrec --server $ADDR --token-file '' stats   # UNAUTHENTICATED
  build/bin/rbmrec --server $ADDR --token-file /tmp/rbmrec-secrets/reader.token train  # PERMISSION_DENIED
  time docker stop rbmrec-1; docker inspect -f '{{.State.ExitCode}}' rbmrec-1   # 0, < 2 s
  docker run --rm rbmrec:smoke                            # exits 1: refusing to serve
  docker run -d --name rbmrec-2 -p 127.0.0.1:$PORT:50051 -v /tmp/rbmrec-data:/data ... (as above)
  build/bin/rbmrec --server $ADDR --json stats            # same ratings and model version
  docker stop rbmrec-2; docker rm rbmrec-1 rbmrec-2
EOF
}
skip() {
  echo "SKIP docker/smoke-test.sh: $*"
  docker_steps
  exit 0
}

[ -f "$SMOKE_TOOL" ] || skip "$SMOKE_TOOL not found (it builds and runs images with podman here)"
if ! command -v podman >/dev/null || ! command -v mmdebstrap >/dev/null; then
  [ "$(id -u)" -eq 0 ] || skip "podman is not installed and this is not root"
  export DEBIAN_FRONTEND=noninteractive
  { apt-get update -qq && apt-get install -y -qq podman buildah mmdebstrap runc \
      fuse-overlayfs slirp4netns uidmap containernetworking-plugins >/dev/null; } ||
    skip "podman cannot be installed (apt-get failed)"
fi

# The host CLI: the one scripts/test.sh built, else build/, else build it.
if [ -z "${RBMREC_CLI:-}" ]; then
  for c in build-test/bin/rbmrec build/bin/rbmrec; do
    [ -x "$c" ] && { RBMREC_CLI=$root/$c; break; }
  done
fi
[ -n "${RBMREC_SERVER_BIN:-}" ] || [ -z "${RBMREC_CLI:-}" ] ||
  RBMREC_SERVER_BIN=$(dirname "$RBMREC_CLI")/rbmrec-server
if [ -z "${RBMREC_CLI:-}" ] || [ ! -x "$RBMREC_SERVER_BIN" ]; then
  echo "=== building the host CLI and server (build/bin/rbmrec, build/bin/rbmrec-server)"
  bash scripts/install-deps.sh
  [ -f build/CMakeCache.txt ] ||
    cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DRBMREC_BUILD_TESTS=OFF >/dev/null
  cmake --build build -j"$(nproc)" --target rbmrec rbmrec-server
  RBMREC_CLI=${RBMREC_CLI:-$root/build/bin/rbmrec}
  RBMREC_SERVER_BIN=$root/build/bin/rbmrec-server
fi
echo "=== host CLI: $RBMREC_CLI; token maker: $RBMREC_SERVER_BIN"

SMOKE_DIR=$(mktemp -d /tmp/rbmrec-smoke.XXXXXX)
chmod 0755 "$SMOKE_DIR"
DATA=$SMOKE_DIR/data
mkdir -p "$DATA"
chown "$IMAGE_UID:$IMAGE_UID" "$DATA"
# Certificates and tokens; run as root, make-certs.sh gives the files the container reads
# (server.key, client.key, tokens) to the image's uid.
SECRETS=$SMOKE_DIR/secrets
RBMREC_UID=$IMAGE_UID bash docker/make-certs.sh "$SECRETS" --tokens "$RBMREC_SERVER_BIN"
TLS_RUN=(-v "$SECRETS:/etc/rbmrec:ro" -e RBMREC_TLS_CERT=/etc/rbmrec/server.pem
  -e RBMREC_TLS_KEY=/etc/rbmrec/server.key -e RBMREC_AUTH_TOKENS=/etc/rbmrec/tokens)
export WORK=${WORK:-/tmp/podman-smoke}
cid2=""
cleanup() {
  [ -n "$cid2" ] && CONTAINERS_CONF=$WORK/containers.conf podman rm -f "$cid2" >/dev/null 2>&1
  rm -rf "$SMOKE_DIR"
  rm -f "$root/docker/.Dockerfile.smoke"
}
trap cleanup EXIT
fail() {
  echo "FAIL docker/smoke-test.sh: $*" >&2
  [ -n "$cid2" ] && podman logs "$cid2" 2>&1 | tail -n 20 >&2
  exit 1
}

# 300 users x 80 items, ~35% rated; three taste groups of users and of items: a user rates
# the items of its group 4-5 and the others 1-2 (u.data: user \t item \t rating \t time).
awk -v seed=7 'BEGIN {
  srand(seed)
  for (u = 1; u <= 300; u++)
    for (i = 1; i <= 80; i++) {
      if (rand() > 0.35) continue
      r = (u % 3 == i % 3) ? 4 + int(rand() * 2) : 1 + int(rand() * 2)
      printf "u%d\ti%d\t%d\t%d\n", u, i, r, 880000000 + u * 100 + i
    }
}' >"$SMOKE_DIR/ratings.data"
rows=$(wc -l <"$SMOKE_DIR/ratings.data")
echo "=== $rows synthetic ratings in $SMOKE_DIR/ratings.data"

# ------------------------------------------------------------------------- container 1
echo "=== container 1: build, run, check, HEALTHCHECK, SIGTERM ($SMOKE_TOOL)"
export CLI=$RBMREC_CLI ADDR HTTP_ADDR SMOKE_DIR
# RBMREC_SMOKE_TESTS: the image's RBMREC_TESTS build argument (the tool takes no build
# arguments, so a copy of the Dockerfile with that default is built). .ci/run sets none:
# scripts/test.sh has just run every suite on the host.
dockerfile=docker/Dockerfile
if [ -n "${RBMREC_SMOKE_TESTS:-}" ]; then
  dockerfile=docker/.Dockerfile.smoke
  sed "s/^ARG RBMREC_TESTS=.*/ARG RBMREC_TESTS=$RBMREC_SMOKE_TESTS/" docker/Dockerfile >"$dockerfile"
  grep -q "^ARG RBMREC_TESTS=$RBMREC_SMOKE_TESTS\$" "$dockerfile" ||
    fail "docker/Dockerfile has no ARG RBMREC_TESTS line to set"
fi
# RBMREC_SMOKE_PREBUILT=DIR: the build stage copies DIR's rbmrec-server and rbmrec instead
# of compiling them (the runtime stage is the Dockerfile's, unchanged). For CI only, where
# scripts/test.sh has just built these binaries from the same sources with the same Debian 12
# compiler (and -Werror); a released image is always built by the Dockerfile itself.
ctx=.
if [ -n "${RBMREC_SMOKE_PREBUILT:-}" ]; then
  ctx=$SMOKE_DIR/context
  mkdir -p "$ctx/docker" "$ctx/prebuilt"
  for b in rbmrec-server rbmrec; do
    [ -x "$RBMREC_SMOKE_PREBUILT/$b" ] || fail "RBMREC_SMOKE_PREBUILT: no $RBMREC_SMOKE_PREBUILT/$b"
    strip -o "$ctx/prebuilt/$b" "$RBMREC_SMOKE_PREBUILT/$b"
  done
  cp docker/healthcheck.sh "$ctx/docker/"
  awk '/^FROM debian:bookworm-slim AS build$/ {
         print; print "COPY prebuilt/rbmrec-server prebuilt/rbmrec /src/build/bin/"; skip = 1; next }
       skip && /^# -+ runtime stage/ { skip = 0 }
       !skip { print }' docker/Dockerfile >"$ctx/Dockerfile"
  grep -q '^COPY prebuilt/' "$ctx/Dockerfile" && grep -q '^COPY --from=build ' "$ctx/Dockerfile" ||
    fail "docker/Dockerfile: no build stage / runtime stage to split for RBMREC_SMOKE_PREBUILT"
  dockerfile=$ctx/Dockerfile
  echo "=== image from prebuilt binaries ($RBMREC_SMOKE_PREBUILT): the Dockerfile's runtime stage"
fi
bash "$SMOKE_TOOL" "$ctx" "$dockerfile" "$IMAGE" -- \
  -e RBMREC_LISTEN="$ADDR" -e RBMREC_HTTP_LISTEN="$HTTP_ADDR" -v "$DATA:/data" \
  "${TLS_RUN[@]}" "$IMAGE" --- bash "$root/docker/smoke-test.sh" --phase1 2>&1 | tee "$SMOKE_DIR/smoke1.log"
[ -f "$SMOKE_DIR/stats1.json" ] || fail "container 1 checks did not complete"
stop1=$(awk '/^=== \[[0-9]+s\] stop/{a=$2} /^=== \[[0-9]+s\] done/{b=$2}
  END{gsub(/[^0-9]/,"",a); gsub(/[^0-9]/,"",b); if (a != "" && b != "") print b - a}' \
  "$SMOKE_DIR/smoke1.log")

field() { sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p" "$2" | head -n1; }
ratings1=$(field ratings "$SMOKE_DIR/stats1.json")
version1=$(field active_model_version "$SMOKE_DIR/stats1.json")
[ "$ratings1" = "$rows" ] || fail "container 1: stats ratings $ratings1, expected $rows"
[ -n "$version1" ] && [ "$version1" != 0 ] || fail "container 1: no active model"

# ------------------------------------------------------------ the image's insecure default
export CONTAINERS_CONF=$WORK/containers.conf
echo "=== the image's defaults (0.0.0.0, no TLS, no tokens): the server must refuse to start"
set +e
refusal=$(timeout 60 podman run --rm --network=host "$IMAGE" 2>&1)
refusal_rc=$?
set -e
echo "$refusal" | tail -n 3
[ "$refusal_rc" = 1 ] || fail "the image's defaults: exit $refusal_rc, want 1 (refusal)"
grep -q "refusing to serve" <<<"$refusal" || fail "the image's defaults: no 'refusing to serve' line"

# ------------------------------------------------------------------------- container 2
echo "=== container 2: a new container on the same /data, requiring client certificates (mTLS)"
cid2=$(podman run -d --network=host -e RBMREC_LISTEN="$ADDR" -v "$DATA:/data" "${TLS_RUN[@]}" \
  -e RBMREC_TLS_CLIENT_CA=/etc/rbmrec/ca.pem "$IMAGE")
rbm() {
  "$RBMREC_CLI" --server "$ADDR" --tls-ca "$SECRETS/ca.pem" --tls-cert "$SECRETS/client.pem" \
    --tls-key "$SECRETS/client.key" --token-file "$SECRETS/admin.token" "$@"
}
up=0
for _ in $(seq 1 100); do
  if rbm health >/dev/null 2>&1; then up=1; break; fi
  [ "$(podman inspect -f '{{.State.Running}}' "$cid2")" = true ] || break
  sleep 0.2
done
[ $up = 1 ] || fail "container 2 did not become healthy on $ADDR"
rbm --json stats >"$SMOKE_DIR/stats2.json" || fail "stats on container 2"
rbm --json models >"$SMOKE_DIR/models2.json" || fail "models on container 2"
cat "$SMOKE_DIR/stats2.json"; echo
ratings2=$(field ratings "$SMOKE_DIR/stats2.json")
version2=$(field active_model_version "$SMOKE_DIR/stats2.json")
[ "$ratings2" = "$ratings1" ] || fail "ratings $ratings1 -> $ratings2 after container replacement"
[ "$version2" = "$version1" ] || fail "active model $version1 -> $version2 after container replacement"
cmp -s "$SMOKE_DIR/models1.json" "$SMOKE_DIR/models2.json" ||
  fail "stored models changed: $(cat "$SMOKE_DIR/models1.json") -> $(cat "$SMOKE_DIR/models2.json")"
rbm predict u1 i1 i2 i3 >/dev/null || fail "predict on container 2"
rbm recommend u2 -n 5 >/dev/null || fail "recommend on container 2"
if "$RBMREC_CLI" --server "$ADDR" --timeout 5 --tls-ca "$SECRETS/ca.pem" \
  --token-file "$SECRETS/admin.token" stats >"$SMOKE_DIR/nocert.log" 2>&1; then
  fail "container 2 answered a client without a certificate"
fi
grep -q "client certificate" "$SMOKE_DIR/nocert.log" ||
  fail "no client-certificate hint: $(cat "$SMOKE_DIR/nocert.log")"
podman healthcheck run "$cid2" || fail "HEALTHCHECK (mTLS) on container 2"
echo "=== container 2: $ratings2 ratings, active model $version2 (unchanged)"

# Stop while a training job runs (the server cancels it, drains and exits 0).
echo "=== container 2: timed stop (SIGTERM) during a training job"
# Without validation the trainer stops once the training RMSE levels off;
# 200 Gibbs steps per update keep it running for seconds, past the stop
# (an epoch still ends within ~0.1 s, so the stop stays prompt).
rbm train --epochs 100000 --hidden 64 --validation-fraction 0 --cd-steps 200 \
  >"$SMOKE_DIR/train2.log" 2>&1 &
train_pid=$!
training=no
for _ in $(seq 1 50); do
  if rbm --json stats 2>/dev/null | grep -q '"running":true'; then training=yes; break; fi
  sleep 0.1
done
[ "$training" = yes ] || fail "no training job ran on container 2: $(cat "$SMOKE_DIR/train2.log")"
t0=$(date +%s%N)
podman stop -t 10 "$cid2" >/dev/null
t1=$(date +%s%N)
wait "$train_pid" || true
rc=$(podman inspect -f '{{.State.ExitCode}}' "$cid2")
stop_ms=$(((t1 - t0) / 1000000))
podman logs "$cid2" 2>&1 | tail -n 5
[ "$rc" = 0 ] || fail "container 2 exited $rc after SIGTERM (want 0)"
[ "$stop_ms" -le $((STOP_MAX_SECONDS * 1000)) ] ||
  fail "container 2 took ${stop_ms} ms to stop (want <= ${STOP_MAX_SECONDS} s)"

size=$(podman image ls --format '{{.Size}}' "$IMAGE" | head -n1)
echo "=== docker/smoke-test.sh passed"
echo "    image:            $IMAGE, $size (podman image ls)"
echo "    ratings/model:    $ratings2 ratings, active model $version2, unchanged across containers"
echo "    security:         TLS + tokens (container 1), mTLS + tokens (container 2); no token ->"
echo "                      UNAUTHENTICATED, reader -> PERMISSION_DENIED on train/delete-user;"
echo "                      image defaults (0.0.0.0, no TLS) -> refused, exit 1"
echo "    HTTP/JSON:        GET /v1/stats over TLS with the admin token (container 1); no token -> 401"
echo "    stop (container 1, loaded): exit 0, ~${stop1:-?} s incl. log dump (1 s resolution)"
echo "    stop (container 2, training running: $training): exit $rc in ${stop_ms} ms"
echo "    wall time:        $((SECONDS - t_start)) s"
