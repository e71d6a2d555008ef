#!/usr/bin/env bash
# ctest's wrapper of client_test.js: installs the pinned packages
# (package-lock.json, `npm ci`) into CACHE_DIR in the build tree, once per
# lock file, then runs the test. Exit 77 (ctest: skipped) with a message
# when node (>= 18) or npm is missing or the npm registry cannot be reached.
# usage: run_node_test.sh SERVER_BIN REPOSITORY_ROOT CACHE_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
server_bin=${1:?usage: run_node_test.sh SERVER_BIN REPOSITORY_ROOT CACHE_DIR}
repo=${2:?} cache=${3:?}
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "SKIP: the Node.js interop test needs node (>= 18) and npm (Debian: nodejs npm)"
  exit 77
fi
major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$major" -lt 18 ]; then
  echo "SKIP: the Node.js interop test needs node >= 18, found $(node --version)"
  exit 77
fi
mkdir -p "$cache"
if ! cmp -s "$here/package-lock.json" "$cache/package-lock.json" ||
  [ ! -d "$cache/node_modules/@grpc/grpc-js" ]; then
  cp "$here/package.json" "$here/package-lock.json" "$cache/"
  if ! (cd "$cache" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error); then
    rm -f "$cache/package-lock.json" # retried next time
    echo "SKIP: npm ci failed (no access to the npm registry?)"
    exit 77
  fi
fi
NODE_PATH=$cache/node_modules exec node "$here/client_test.js" \
  --server-bin "$server_bin" --proto-dir "$repo"
