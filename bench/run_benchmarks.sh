#!/usr/bin/env bash
# Reproduces every accuracy/speed row of README.md's results table with the
# project's own rbmrec-eval (default flags unless the row says otherwise).
# Data is read from ../shared/data (never committed; see its README).
# Usage: bench/run_benchmarks.sh [DATA_DIR]   (builds build/ if needed)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
data=${1:-$root/../shared/data}
eval_bin=$root/build/bin/rbmrec-eval
if [ ! -x "$eval_bin" ]; then
  cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$root/build" -j"$(nproc)" --target rbmrec-eval
fi
ml=$data/movielens/ml-100k
sp=$data/splits
field() { python3 -c "import json,sys; d=json.load(sys.stdin); print(' '.join(str(d[k]) for k in sys.argv[1:]))" "$@"; }
run() {  # name, then rbmrec-eval arguments
  local name=$1; shift
  local out
  out=$("$eval_bin" --json --quiet "$@")
  printf '%-34s %s\n' "$name" "$(echo "$out" | field rmse mae n_test n_fallback epochs_run train_seconds train_ratings_per_second peak_rss_mb)"
}
echo "row                                rmse mae n_test n_fallback epochs_run train_seconds ratings/s peak_rss_mb"
run "ml100k u1 (defaults)"            --train "$ml/u1.base" --test "$ml/u1.test"
run "ml100k r90 (defaults)"           --train "$sp/ml100k.r90.train" --test "$sp/ml100k.r90.test"
run "mlsmall r90 (defaults)"          --train "$sp/mlsmall.r90.train" --test "$sp/mlsmall.r90.test"
run "ml100k u1 U-RBM only"            --train "$ml/u1.base" --test "$ml/u1.test" --item-based=false
run "ml100k r90 U-RBM only"           --train "$sp/ml100k.r90.train" --test "$sp/ml100k.r90.test" --item-based=false
run "mlsmall r90 U-RBM only"          --train "$sp/mlsmall.r90.train" --test "$sp/mlsmall.r90.test" --item-based=false
run "ml100k r90 mean-field"           --train "$sp/ml100k.r90.train" --test "$sp/ml100k.r90.test" --predict meanfield
run "ml100k r90 U-RBM first defaults" --train "$sp/ml100k.r90.train" --test "$sp/ml100k.r90.test" --item-based=false --per-item-normalize --weight-decay 0.001 --cd-steps auto
run "ml100k r90 threads=1"            --train "$sp/ml100k.r90.train" --test "$sp/ml100k.r90.test" --threads 1
run "ml100k r90 threads=2"            --train "$sp/ml100k.r90.train" --test "$sp/ml100k.r90.test" --threads 2
# Wall time of the whole default run (read, train, evaluate) on r90.
start=$(date +%s%N)
"$eval_bin" --quiet --train "$sp/ml100k.r90.train" --test "$sp/ml100k.r90.test" >/dev/null
end=$(date +%s%N)
printf '%-34s %d ms\n' "ml100k r90 whole run wall" $(( (end - start) / 1000000 ))
