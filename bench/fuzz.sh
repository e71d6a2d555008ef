#!/usr/bin/env bash
# Builds and runs the libFuzzer targets (tests/fuzz/) with AddressSanitizer,
# LeakSanitizer and UndefinedBehaviorSanitizer (UBSan reports are fatal).
#
# Usage: bench/fuzz.sh [--ci] [--seconds N] [--runs N] [TARGET...]
#   (default)    full run: 1,000,000 executions per target
#   --ci         30 s per target
#   --seconds N  stop each target after N seconds
#   --runs N     stop each target after N executions
#   TARGET       fuzz_readers, fuzz_model_file, fuzz_requests, fuzz_http
#                (default: all)
#
# Each target runs (one process, one job) on a COPY of its committed corpus
# tests/fuzz/corpus/TARGET/ in a temporary directory, plus the regression
# inputs tests/fuzz/regressions/TARGET/ (read only). One line per target:
# executions, seconds, crashes, corpus size before -> after. Exit status 1
# when any target crashed, leaked, hit a UBSan report, timed out or ran out
# of memory; the input is kept under build-fuzz/fuzz-artifacts/TARGET/ (the
# path is printed, with the log). Builds build-fuzz/ with clang (ccache when
# present); installs tests/fuzz/packages.txt through scripts/install-deps.sh
# when missing. Environment: FUZZ_BUILD_JOBS (default 2), FUZZ_BUILD_DIR;
# RBMREC_FUZZ_TRAIN_EXTREMES=1 lets fuzz_requests send Train options
# >= 1,000,000 unchanged (see tests/fuzz/fuzz_requests.cc).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${FUZZ_BUILD_DIR:-$root/build-fuzz}
all_targets=(fuzz_readers fuzz_model_file fuzz_requests fuzz_http)

runs=""
seconds=""
targets=()
while [ $# -gt 0 ]; do
  case $1 in
    --ci) seconds=30 ;;
    --seconds) seconds=${2:?--seconds needs a value}; shift ;;
    --runs) runs=${2:?--runs needs a value}; shift ;;
    -h|--help) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) targets+=("$1") ;;
  esac
  shift
done
[ -n "$runs$seconds" ] || runs=1000000
[ ${#targets[@]} -gt 0 ] || targets=("${all_targets[@]}")
for t in "${targets[@]}"; do
  case " ${all_targets[*]} " in
    *" $t "*) ;;
    *) echo "fuzz.sh: unknown target $t (one of: ${all_targets[*]})" >&2; exit 2 ;;
  esac
done

# Packages: clang and its runtime (libFuzzer, sanitizers).
mapfile -t extra < <(grep -v '^\s*#' "$root/tests/fuzz/packages.txt" | grep -v '^\s*$')
missing=()
for p in "${extra[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  "$root/scripts/install-deps.sh" "${extra[@]}"
fi

# Build.
if [ ! -f "$build/CMakeCache.txt" ]; then
  launcher=()
  if command -v ccache >/dev/null; then
    launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  fi
  CC=clang CXX=clang++ cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DRBMREC_FUZZ=ON -DRBMREC_BUILD_TESTS=OFF "${launcher[@]}" >/dev/null
fi
cmake --build "$build" -j"${FUZZ_BUILD_JOBS:-2}" --target "${targets[@]}" >/dev/null

limits=()
[ -n "$runs" ] && limits+=(-runs="$runs")
[ -n "$seconds" ] && limits+=(-max_total_time="$seconds")
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}

count_files() { find "$1" -type f | wc -l; }
failed=0
for t in "${targets[@]}"; do
  artifacts=$build/fuzz-artifacts/$t
  rm -rf "$artifacts"
  mkdir -p "$artifacts"
  work=$(mktemp -d "${TMPDIR:-/tmp}/rbmrec-fuzz-$t.XXXXXX")
  mkdir -p "$work/corpus"
  cp -r "$root/tests/fuzz/corpus/$t/." "$work/corpus/"
  dirs=("$work/corpus")
  [ -d "$root/tests/fuzz/regressions/$t" ] && dirs+=("$root/tests/fuzz/regressions/$t")
  before=$(count_files "$work/corpus")
  log=$artifacts/log.txt
  start=$(date +%s%N)
  status=0
  "$build/bin/$t" "${limits[@]}" -detect_leaks=1 -timeout=60 -rss_limit_mb=4096 \
    -print_final_stats=1 -artifact_prefix="$artifacts/" "${dirs[@]}" \
    >"$log" 2>&1 || status=$?
  secs=$(( ($(date +%s%N) - start + 500000000) / 1000000000 ))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  after=$(count_files "$work/corpus")
  crashes=$(find "$artifacts" -type f \( -name 'crash-*' -o -name 'leak-*' \
    -o -name 'timeout-*' -o -name 'oom-*' \) | wc -l)
  [ "$status" -ne 0 ] && [ "$crashes" -eq 0 ] && crashes=1
  printf '%-16s executions %s  seconds %d  crashes %d  corpus %d -> %d files\n' \
    "$t" "${execs:-?}" "$secs" "$crashes" "$before" "$after"
  if [ "$status" -ne 0 ] || [ "$crashes" -ne 0 ]; then
    failed=1
    echo "  FAILED (exit $status): log $log"
    find "$artifacts" -type f ! -name log.txt -printf '  input %p\n'
  fi
  rm -rf "$work"
done
exit $failed
