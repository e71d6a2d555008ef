#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine and runs the rbmrec server:
# installs the Debian packages (needs root), builds Release binaries into
# build/bin/ (rbmrec-server, rbmrec, rbmrec-eval), then starts the server on
# 127.0.0.1:50051 with the embedded SQLite database ./rbmrec.db (created on
# first start). Extra arguments go to rbmrec-server (see --help).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/install-deps.sh"
cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=Release -DRBMREC_BUILD_TESTS=OFF >/dev/null
cmake --build "$root/build" -j"$(nproc)" --target rbmrec-server rbmrec rbmrec-eval
exec "$root/build/bin/rbmrec-server" "$@"
