#!/usr/bin/env bash
# Brings docker/compose.scale.yaml up with podman and checks it from the host CLI through the
# nginx entry point (127.0.0.1:50060): PostgreSQL, three rbmrec replicas, nginx (grpc_pass).
#   1. images: the local debian:bookworm-slim base (mmdebstrap, as
#      ../shared/tools/container-smoke.sh builds it), docker/postgres.Dockerfile,
#      docker/nginx.Dockerfile, and the rbmrec image (docker/Dockerfile; reused when
#      RBMREC_SCALE_IMAGE exists, e.g. localhost/rbmrec:smoke just built by
#      docker/smoke-test.sh in .ci/run);
#   2. `docker-compose up -d` (Debian's docker-compose 1.29 on podman's API socket): PostgreSQL
#      first (pg_isready), then the replicas and nginx; each replica's HEALTHCHECK run once by
#      hand (podman schedules none without systemd);
#   3. through nginx: health, `rbmrec import` of a ratings file (ML-100k u1.base when
#      ../shared/data is there, else a generated one), `rbmrec train --epochs 5 --hidden 16`,
#      then every replica serves the new model version (each asked directly) and `predict`
#      answers through nginx (6 calls, so every replica answers some);
#   4. SIGKILL of the leader's server process (the replica whose metrics gauge rbmrec_leader
#      is 1): `rbmrec train --activate always` through nginx is retried until it succeeds
#      (within 60 s); exactly one replica reports rbmrec_leader 1 (another one, or the
#      killed one if its restart took the lock first), every replica serves the new version
#      and predict still answers through nginx;
#   5. `docker-compose down -v` (containers and the database volume).
# Prints the time of every phase and the total.
#
# usage: docker/scale-smoke.sh          (from anywhere; needs root to install podman)
# env:   RBMREC_SCALE_IMAGE (rbmrec image to use; default localhost/rbmrec:smoke, built from
#        docker/Dockerfile with RBMREC_TESTS=none when missing or when SCALE_REBUILD=1),
#        RBMREC_CLI (host rbmrec; default build-test/bin/rbmrec or build/bin/rbmrec, built
#        when neither exists), SCALE_DATA (a ratings file to import), KEEP_UP=1 (leave the
#        containers running; tear down later with the printed command).
# Without ../shared/tools/container-smoke.sh (the podman sandbox tooling), or when podman
# or docker-compose cannot be installed, it prints SKIP and exits 0.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
t_start=$SECONDS
t_phase=$SECONDS
phases=()
phase() {
  if [ -n "${cur_phase:-}" ]; then phases+=("$(printf '%-44s %4d s' "$cur_phase" $((SECONDS - t_phase)))"); fi
  cur_phase=$1 t_phase=$SECONDS
  [ "$1" = end ] || echo "=== [$((SECONDS - t_start))s] $1"
}
skip() {
  echo "SKIP docker/scale-smoke.sh: $*"
  echo "With Docker: export RBMREC_DB_PASSWORD=...; docker compose -f docker/compose.scale.yaml up -d --build"
  exit 0
}

SMOKE_TOOL=${CONTAINER_SMOKE:-$root/../shared/tools/container-smoke.sh}
IMAGE=${RBMREC_SCALE_IMAGE:-localhost/rbmrec:smoke}
PG_IMAGE=localhost/rbmrec-postgres:scale
NGINX_IMAGE=localhost/rbmrec-nginx:scale
PROXY=127.0.0.1:50060
REPLICAS=(127.0.0.1:50061 127.0.0.1:50062 127.0.0.1:50063)
PROJECT=rbmrec-scale
COMPOSE_FILE=$root/docker/compose.scale.yaml

[ -f "$SMOKE_TOOL" ] || skip "$SMOKE_TOOL not found (it builds and runs images with podman here)"
phase "install podman and docker-compose"
if ! command -v podman >/dev/null || ! command -v mmdebstrap >/dev/null ||
  ! command -v docker-compose >/dev/null; then
  [ "$(id -u)" -eq 0 ] || skip "podman/docker-compose are not installed and this is not root"
  export DEBIAN_FRONTEND=noninteractive
  { apt-get update -qq && apt-get install -y -qq podman buildah mmdebstrap runc \
      fuse-overlayfs slirp4netns uidmap containernetworking-plugins docker-compose >/dev/null; } ||
    skip "podman or docker-compose cannot be installed (apt-get failed)"
fi

# The host CLI: the one scripts/test.sh built, else build/, else build it.
if [ -z "${RBMREC_CLI:-}" ]; then
  for c in build-test/bin/rbmrec build/bin/rbmrec; do
    [ -x "$c" ] && { RBMREC_CLI=$root/$c; break; }
  done
fi
if [ -z "${RBMREC_CLI:-}" ]; then
  bash scripts/install-deps.sh
  [ -f build/CMakeCache.txt ] ||
    cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DRBMREC_BUILD_TESTS=OFF >/dev/null
  cmake --build build -j"$(nproc)" --target rbmrec
  RBMREC_CLI=$root/build/bin/rbmrec
fi
cli() { "$RBMREC_CLI" --timeout 10 "$@"; }

# Every port of the compose file must be free (host network; SO_REUSEADDR: connections of an
# earlier run in TIME_WAIT do not count).
for p in 55432 50060 50061 50062 50063 9161 9162 9163; do
  if python3 -c 'import socket,sys; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("127.0.0.1",int(sys.argv[1])))' "$p" 2>/dev/null; then
    continue
  fi
  echo "FAIL docker/scale-smoke.sh: port 127.0.0.1:$p is in use (docker/compose.scale.yaml needs it)" >&2
  exit 1
done

phase "podman configuration and base image"
# The same containers.conf as container-smoke.sh (runc, cgroupfs, capped ulimits).
WORK=${WORK:-/tmp/podman-smoke}
mkdir -p "$WORK"
hn=$(ulimit -Hn)
{ [ "$hn" = unlimited ] || [ "$hn" -gt 16384 ]; } && hn=16384
cat >"$WORK/containers.conf" <<CONF
[containers]
default_ulimits = ["nofile=$hn:$hn", "nproc=16384:16384"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
CONF
export CONTAINERS_CONF=$WORK/containers.conf
if ! podman image exists docker.io/library/debian:bookworm-slim; then
  # container-smoke.sh builds the base image (mmdebstrap) before its own build; with a
  # Dockerfile of one FROM line and nothing to run it stops there cheaply.
  printf 'FROM debian:bookworm-slim\n' >"$WORK/base.Dockerfile"
  bash "$SMOKE_TOOL" "$WORK" "$WORK/base.Dockerfile" localhost/rbmrec-base-probe:scale -- \
    localhost/rbmrec-base-probe:scale true >/dev/null 2>&1 || true
  podman image exists docker.io/library/debian:bookworm-slim ||
    { echo "FAIL docker/scale-smoke.sh: no debian:bookworm-slim base image" >&2; exit 1; }
fi

phase "build postgres and nginx images"
podman build -q --pull=never --format docker -t "$PG_IMAGE" -f docker/postgres.Dockerfile . >/dev/null
podman build -q --pull=never --format docker -t "$NGINX_IMAGE" -f docker/nginx.Dockerfile . >/dev/null
phase "rbmrec image"
if [ "${SCALE_REBUILD:-0}" = 1 ] || ! podman image exists "$IMAGE"; then
  podman build --pull=never --format docker --build-arg RBMREC_TESTS=none -t "$IMAGE" \
    -f docker/Dockerfile . | tail -n 3
else
  echo "reusing $IMAGE, built $(podman image inspect -f '{{.Created}}' "$IMAGE" | cut -d. -f1)" \
    "(SCALE_REBUILD=1 rebuilds it)"
fi

phase "compose up: postgres"
sock=$WORK/scale-podman.sock
podman system service --time=0 "unix://$sock" >"$WORK/scale-podman-service.log" 2>&1 &
service_pid=$!
export DOCKER_HOST=unix://$sock
RBMREC_DB_PASSWORD=$(head -c 18 /dev/urandom | base64 | tr -d '/+=')
export RBMREC_DB_PASSWORD RBMREC_IMAGE=$IMAGE RBMREC_POSTGRES_IMAGE=$PG_IMAGE \
  RBMREC_NGINX_IMAGE=$NGINX_IMAGE
compose() { docker-compose -p "$PROJECT" -f "$COMPOSE_FILE" "$@"; }
tmp=$(mktemp -d /tmp/rbmrec-scale-smoke.XXXXXX)
down_cmd="DOCKER_HOST=$DOCKER_HOST CONTAINERS_CONF=$CONTAINERS_CONF RBMREC_IMAGE=$IMAGE docker-compose -p $PROJECT -f $COMPOSE_FILE down -v"
cleanup() {
  local rc=$?
  if [ "${KEEP_UP:-0}" = 1 ]; then
    echo "KEEP_UP=1: left running; tear down with: $down_cmd; kill $service_pid"
  else
    if [ $rc -ne 0 ]; then
      compose logs --no-color --tail 20 >&2 2>/dev/null || true
    fi
    compose down -v -t 15 >/dev/null 2>&1 || true
    kill "$service_pid" 2>/dev/null || true
    wait "$service_pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
for _ in $(seq 50); do [ -S "$sock" ] && break; sleep 0.1; done
compose up -d --no-build postgres
cid_pg=$(compose ps -q postgres)
ok=0
for _ in $(seq 120); do
  if podman healthcheck run "$cid_pg" >/dev/null 2>&1; then ok=1; break; fi
  sleep 0.5
done
[ $ok = 1 ] || { echo "FAIL docker/scale-smoke.sh: PostgreSQL not ready" >&2; exit 1; }

phase "compose up: 3 replicas + nginx, HEALTHCHECKs"
compose up -d --no-build
for i in 1 2 3; do
  cid=$(compose ps -q "rbmrec-$i")
  ok=0
  for _ in $(seq 120); do
    if podman healthcheck run "$cid" >/dev/null 2>&1; then ok=1; break; fi
    sleep 0.5
  done
  [ $ok = 1 ] || { echo "FAIL docker/scale-smoke.sh: rbmrec-$i HEALTHCHECK fails" >&2; exit 1; }
  echo "rbmrec-$i healthy (HEALTHCHECK)"
done
ok=0
for _ in $(seq 60); do
  if cli --server "$PROXY" health >/dev/null 2>&1; then ok=1; break; fi
  sleep 0.5
done
[ $ok = 1 ] || { echo "FAIL docker/scale-smoke.sh: no health answer through nginx $PROXY" >&2; exit 1; }
compose ps

phase "import through nginx"
data=${SCALE_DATA:-$root/../shared/data/movielens/ml-100k/u1.base}
if [ ! -r "$data" ]; then
  data=$tmp/ratings.data
  # 300 users x 80 items, three taste groups (as docker/smoke-test.sh).
  awk 'BEGIN { srand(7); for (u = 1; u <= 300; u++) for (i = 1; i <= 80; i++) {
      if (rand() > 0.35) continue
      r = (u % 3 == i % 3) ? 4 + int(rand() * 2) : 1 + int(rand() * 2)
      printf "u%d\ti%d\t%d\t%d\n", u, i, r, 880000000 + u * 100 + i } }' >"$data"
fi
rows=$(wc -l <"$data")
"$RBMREC_CLI" --server "$PROXY" --json import "$data" >"$tmp/import.json"
grep -q "\"accepted\":$rows," "$tmp/import.json" ||
  { echo "FAIL: import did not accept all $rows rows: $(cat "$tmp/import.json")" >&2; exit 1; }
echo "imported $rows ratings from $data"

phase "train through nginx (5 epochs, 16 hidden)"
"$RBMREC_CLI" --server "$PROXY" train --epochs 5 --hidden 16 >"$tmp/train.out"
tail -n 2 "$tmp/train.out"
version=$(sed -n 's/^published model v\([0-9]*\) .*now active.*/\1/p' "$tmp/train.out")
[ -n "$version" ] || { echo "FAIL: no new active model version in the train output" >&2; exit 1; }

phase "every replica serves the new model; predict"
for r in "${REPLICAS[@]}"; do
  v=""
  for _ in $(seq 50); do
    v=$(cli --server "$r" --json stats 2>/dev/null |
      python3 -c 'import json,sys; print(json.load(sys.stdin).get("active_model_version", 0))' 2>/dev/null) || v=""
    [ "$v" = "$version" ] && break
    sleep 0.1
  done
  [ "$v" = "$version" ] ||
    { echo "FAIL: replica $r serves model version ${v:-none}, not the new $version (after 5 s)" >&2; exit 1; }
done
echo "model version $version on ${REPLICAS[*]}"
user=$(head -n1 "$data" | cut -f1)
items=$(head -n 3 "$data" | cut -f2 | tr '\n' ' ')
for _ in 1 2 3 4 5 6; do
  # shellcheck disable=SC2086 # a list of item ids
  cli --server "$PROXY" --json predict "$user" $items >"$tmp/predict.json"
done
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("predict %s: %s" % (sys.argv[2], json.dumps(d)[:200]))' \
  "$tmp/predict.json" "$user"

phase "SIGKILL the leader's server; train and predict through nginx"
# leader_gauge I: rbmrec_leader of replica I (metrics on 127.0.0.1:916I), empty if none.
leader_gauge() {
  python3 -c 'import sys, urllib.request
for line in urllib.request.urlopen(sys.argv[1], timeout=2).read().decode().splitlines():
    if line.split(" ")[0] == "rbmrec_leader": print(line.split(" ")[1])' \
    "http://127.0.0.1:916$1/metrics" 2>/dev/null || true
}
# The leader: the one replica whose gauge is 1.
leader=""
for i in 1 2 3; do
  if [ "$(leader_gauge "$i")" = 1 ]; then
    [ -z "$leader" ] || { echo "FAIL: more than one replica reports rbmrec_leader 1" >&2; exit 1; }
    leader=$i
  fi
done
[ -n "$leader" ] || { echo "FAIL: no replica reports rbmrec_leader 1" >&2; exit 1; }
# SIGKILL the server process itself (a crash; the restart policy may bring the container back).
kill -KILL "$(podman inspect -f '{{.State.Pid}}' "$(compose ps -q "rbmrec-$leader")")"
t_kill=$(date +%s%N)
echo "killed rbmrec-$leader (the leader)"
ok=0 attempts=0
while [ $(($(date +%s%N) - t_kill)) -lt 60000000000 ]; do
  attempts=$((attempts + 1))
  if "$RBMREC_CLI" --server "$PROXY" train --epochs 2 --hidden 16 --activate always \
    >"$tmp/train2.out" 2>&1; then
    ok=1
    break
  fi
  sleep 0.2
done
t_train=$(date +%s%N)
[ $ok = 1 ] || { echo "FAIL: no Train succeeded through nginx within 60 s of the kill:" \
  "$(tail -n 2 "$tmp/train2.out")" >&2; exit 1; }
version2=$(sed -n 's/^published model v\([0-9]*\) .*now active.*/\1/p' "$tmp/train2.out")
[ -n "$version2" ] || { echo "FAIL: the Train after the kill activated no model" >&2; exit 1; }
# The leader now: another replica, or the killed one when its restart (restart policy) won the
# lock first; exactly one either way.
leaders=()
for i in 1 2 3; do [ "$(leader_gauge "$i")" != 1 ] || leaders+=("$i"); done
[ ${#leaders[@]} = 1 ] ||
  { echo "FAIL: ${#leaders[@]} replicas report rbmrec_leader 1 after the kill" >&2; exit 1; }
new_leader=${leaders[0]}
echo "train through nginx (attempt $attempts) finished $(((t_train - t_kill) / 1000000)) ms after" \
  "the kill; leader now rbmrec-$new_leader$([ "$new_leader" != "$leader" ] ||
    echo ' (the killed one, restarted)'): $(tail -n 1 "$tmp/train2.out")"
for i in 1 2 3; do
  v=""
  for _ in $(seq 50); do
    v=$(cli --server "127.0.0.1:5006$i" --json stats 2>/dev/null |
      python3 -c 'import json,sys; print(json.load(sys.stdin).get("active_model_version", 0))' 2>/dev/null) || v=""
    [ "$v" = "$version2" ] && break
    sleep 0.1
  done
  [ "$v" = "$version2" ] ||
    { echo "FAIL: rbmrec-$i serves model version ${v:-none}, not the new $version2 (after 5 s)" >&2; exit 1; }
done
echo "model version $version2 on every replica"
for _ in 1 2 3 4 5 6; do
  # shellcheck disable=SC2086 # a list of item ids
  cli --server "$PROXY" predict "$user" $items >/dev/null
done
echo "predict through nginx: 6 of 6 answered"

phase "compose down -v"
if [ "${KEEP_UP:-0}" != 1 ]; then
  compose down -v -t 15 2>&1 | grep -v 'systemd' || true
fi
phase end
echo "=== docker/scale-smoke.sh passed: PostgreSQL + 3 replicas + nginx (compose, podman)"
printf '    %s\n' "${phases[@]}"
echo "    total: $((SECONDS - t_start)) s"
