#!/usr/bin/env bash
# Builds docker/Dockerfile, runs the image and checks it from the host CLI:
#   1. container 1 (with ../shared/tools/container-smoke.sh: podman, host network, loopback):
#      health, import of a generated ratings file (300 users x 80 items, planted taste
#      groups), train (5 epochs, 16 hidden), predict, recommend, stats; then the image's
#      HEALTHCHECK once and SIGTERM -> exit code 0;
#   2. container 2, a new one on the same /data (a host directory owned by the image's uid):
#      every rating (stats) and the stored/active model versions unchanged, predict and
#      recommend still work, HEALTHCHECK; then a timed `podman stop` while a training job
#      runs: exit code 0 within STOP_MAX_SECONDS (default 2).
# Prints the image size, the wall time and the stop time.
#
# usage: docker/smoke-test.sh          (from anywhere; needs root to install podman)
# env:   RBMREC_SMOKE_PORT (default 50091), RBMREC_SMOKE_IMAGE (default localhost/rbmrec:smoke),
#        RBMREC_CLI (host rbmrec binary; default build-test/bin/rbmrec or build/bin/rbmrec,
#        built into build/ when neither exists), STOP_MAX_SECONDS (default 2).
# Without ../shared/tools/container-smoke.sh (no podman sandbox tooling), or when podman
# cannot be installed, it prints the equivalent Docker commands and exits 0 with SKIP.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

# ---------------------------------------------------------------- phase 1 (the check
# command container-smoke.sh runs against container 1; retried by it, 10 s per try)
if [ "${1:-}" = --phase1 ]; then
  : "${CLI:?}" "${ADDR:?}" "${SMOKE_DIR:?}"
  rbm() { "$CLI" --server "$ADDR" "$@"; }
  rbm health
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
  exit 0
fi

t_start=$SECONDS
SMOKE_TOOL=${CONTAINER_SMOKE:-$root/../shared/tools/container-smoke.sh}
IMAGE=${RBMREC_SMOKE_IMAGE:-localhost/rbmrec:smoke}
PORT=${RBMREC_SMOKE_PORT:-50091}
ADDR=127.0.0.1:$PORT
STOP_MAX_SECONDS=${STOP_MAX_SECONDS:-2}
IMAGE_UID=10001 # docker/Dockerfile ARG RBMREC_UID

docker_steps() {
  cat <<EOF
The same steps with Docker (from the repository root):
  docker build -f docker/Dockerfile -t rbmrec:smoke .
  mkdir -p /tmp/rbmrec-data && sudo chown $IMAGE_UID:$IMAGE_UID /tmp/rbmrec-data
  docker run -d --name rbmrec-1 -p 127.0.0.1:$PORT:50051 -v /tmp/rbmrec-data:/data rbmrec:smoke
  build/bin/rbmrec --server $ADDR health
  build/bin/rbmrec --server $ADDR import ratings.data     # any u.data/CSV ratings file
  build/bin/rbmrec --server $ADDR train --epochs 5 --hidden 16
  build/bin/rbmrec --server $ADDR predict USER ITEM...; build/bin/rbmrec --server $ADDR recommend USER -n 5
  build/bin/rbmrec --server $ADDR --json stats            # note ratings, active_model_version
  time docker stop rbmrec-1; docker inspect -f '{{.State.ExitCode}}' rbmrec-1   # 0, < 2 s
  docker run -d --name rbmrec-2 -p 127.0.0.1:$PORT:50051 -v /tmp/rbmrec-data:/data rbmrec:smoke
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
if [ -z "${RBMREC_CLI:-}" ]; then
  echo "=== building the host CLI (build/bin/rbmrec)"
  bash scripts/install-deps.sh
  [ -f build/CMakeCache.txt ] ||
    cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DRBMREC_BUILD_TESTS=OFF >/dev/null
  cmake --build build -j"$(nproc)" --target rbmrec
  RBMREC_CLI=$root/build/bin/rbmrec
fi
echo "=== host CLI: $RBMREC_CLI"

SMOKE_DIR=$(mktemp -d /tmp/rbmrec-smoke.XXXXXX)
DATA=$SMOKE_DIR/data
mkdir -p "$DATA"
chown "$IMAGE_UID:$IMAGE_UID" "$DATA"
export WORK=${WORK:-/tmp/podman-smoke}
cid2=""
cleanup() {
  [ -n "$cid2" ] && CONTAINERS_CONF=$WORK/containers.conf podman rm -f "$cid2" >/dev/null 2>&1
  rm -rf "$SMOKE_DIR"
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
export CLI=$RBMREC_CLI ADDR SMOKE_DIR
bash "$SMOKE_TOOL" . docker/Dockerfile "$IMAGE" -- \
  -e RBMREC_LISTEN="$ADDR" -v "$DATA:/data" "$IMAGE" \
  --- bash "$root/docker/smoke-test.sh" --phase1 2>&1 | tee "$SMOKE_DIR/smoke1.log"
[ -f "$SMOKE_DIR/stats1.json" ] || fail "container 1 checks did not complete"
stop1=$(awk '/^=== \[[0-9]+s\] stop/{a=$2} /^=== \[[0-9]+s\] done/{b=$2}
  END{gsub(/[^0-9]/,"",a); gsub(/[^0-9]/,"",b); if (a != "" && b != "") print b - a}' \
  "$SMOKE_DIR/smoke1.log")

field() { sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p" "$2" | head -n1; }
ratings1=$(field ratings "$SMOKE_DIR/stats1.json")
version1=$(field active_model_version "$SMOKE_DIR/stats1.json")
[ "$ratings1" = "$rows" ] || fail "container 1: stats ratings $ratings1, expected $rows"
[ -n "$version1" ] && [ "$version1" != 0 ] || fail "container 1: no active model"

# ------------------------------------------------------------------------- container 2
export CONTAINERS_CONF=$WORK/containers.conf
echo "=== container 2: a new container on the same /data"
cid2=$(podman run -d --network=host -e RBMREC_LISTEN="$ADDR" -v "$DATA:/data" "$IMAGE")
rbm() { "$RBMREC_CLI" --server "$ADDR" "$@"; }
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
podman healthcheck run "$cid2" || fail "HEALTHCHECK on container 2"
echo "=== container 2: $ratings2 ratings, active model $version2 (unchanged)"

# Stop while a training job runs (the server cancels it, drains and exits 0).
echo "=== container 2: timed stop (SIGTERM) during a training job"
rbm train --epochs 100000 --hidden 64 --validation-fraction 0 >"$SMOKE_DIR/train2.log" 2>&1 &
train_pid=$!
training=no
for _ in $(seq 1 50); do
  if rbm --json stats 2>/dev/null | grep -q '"running":true'; then training=yes; break; fi
  sleep 0.1
done
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
echo "    stop (container 1, loaded): exit 0, ~${stop1:-?} s incl. log dump (1 s resolution)"
echo "    stop (container 2, training running: $training): exit $rc in ${stop_ms} ms"
echo "    wall time:        $((SECONDS - t_start)) s"
