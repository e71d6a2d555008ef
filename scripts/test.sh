#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine and runs every test suite:
#   1. installs the Debian packages (scripts/install-deps.sh; needs root),
#   2. builds everything from scratch in Release with -Werror and runs ctest,
#   3. builds the core engine, the store and the transport-free service with
#      clang, AddressSanitizer + UndefinedBehaviorSanitizer and runs their
#      tests again (the gRPC, CLI and end-to-end suites only in step 2); the
#      same build makes the libFuzzer targets,
#   4. runs the long suites in their short CI modes: fault injection
#      (bench/faults.sh --ci), soak (bench/soak.sh --ci) and fuzzing
#      (bench/fuzz.sh --ci on step 3's targets, 30 s per libFuzzer target).
#      Their full modes are
#      run from bench/ (see docs/operations.md, "Robustness suites").
# Usage: scripts/test.sh            (from anywhere; build dirs under build-test*)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
jobs=$(nproc 2>/dev/null || echo 2)

# Each step prints its start time in seconds since the script began, so a
# CI log shows where the time goes.
phase() { echo "=== [${SECONDS}s] $*"; }

bash scripts/install-deps.sh python3-grpcio python3-grpc-tools

# The dashboard's headless-browser test (tests/server/http/
# dashboard_browser_test.py) needs chromium, chromium-driver and Selenium:
# about 175 packages, 200 MB, some 4 minutes of apt on 2 cores (mostly
# unpacking). They install in the background while the Release build
# compiles and are waited for before ctest; the test must run, not skip.
browser_log=$(mktemp)
bash scripts/install-deps.sh chromium chromium-driver python3-selenium \
  >"$browser_log" 2>&1 &
browser_pid=$!
export RBMREC_REQUIRE_BROWSER=1

phase "Release build (-Werror) and tests"
rm -rf build-test
cmake -S . -B build-test -DCMAKE_BUILD_TYPE=Release -DRBMREC_WERROR=ON >/dev/null
cmake --build build-test -j"$jobs"
phase "waiting for the browser packages"
wait "$browser_pid" || { cat "$browser_log"; echo "browser packages failed" >&2; exit 1; }
tail -n 1 "$browser_log"
ctest --test-dir build-test --output-on-failure -j"$jobs"

phase "sizes: no function over 120 lines, no file over 800 in core/ server/ store/ client/"
bash scripts/check_sizes.sh --strict

phase "ASan+UBSan build (clang) of the core, store and service suites and the fuzz targets"
# One instrumented build serves both the sanitizer suites and the libFuzzer
# targets (bench/fuzz.sh --ci below): clang, AddressSanitizer +
# UndefinedBehaviorSanitizer, the libraries also instrumented for libFuzzer's
# coverage (-fsanitize=fuzzer-no-link, inert outside a fuzz target), -O1 with
# line tables (-g1): ASan's reports keep their file:line frames. -Werror is
# the gcc Release build's job above. bench/fuzz.sh without --ci keeps its own
# build (build-fuzz/, RelWithDebInfo) for long runs.
mapfile -t fuzz_packages < <(grep -v '^\s*#' tests/fuzz/packages.txt | grep -v '^\s*$')
bash scripts/install-deps.sh "${fuzz_packages[@]}"
rm -rf build-test-asan
CC=clang CXX=clang++ cmake -S . -B build-test-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DRBMREC_SANITIZE=ON \
  -DRBMREC_FUZZ=ON >/dev/null
asan_targets=$(cmake --build build-test-asan --target help | sed -n -E \
  's/^\.\.\. ((core|store)_[a-z_]*_test|rbmrec_(service|implicit|model_registry|training_jobs|online_updater|read_caches|limits|erasure)_test|fuzz_(readers|model_file|requests|http))$/\1/p')
cmake --build build-test-asan -j"$jobs" --target $asan_targets
# Suites of targets not built here are listed by ctest as *_NOT_BUILT.
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-test-asan --output-on-failure -j"$jobs" \
  -E '_NOT_BUILT|e2e|python|node|dashboard_browser|startup_security|replicas'
phase "fault injection (short mode)"
BUILD="$root/build-test" bash bench/faults.sh --ci
phase "soak (short mode)"
BUILD="$root/build-test" bash bench/soak.sh --ci
phase "fuzzing (short mode, on the ASan build's fuzz targets)"
FUZZ_BUILD_DIR="$root/build-test-asan" bash bench/fuzz.sh --ci
phase "all tests passed"
