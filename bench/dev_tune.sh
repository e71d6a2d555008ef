#!/usr/bin/env bash
# Compares training settings on held-out parts of the TRAINING files, never
# on the benchmark's test files: the way this project's defaults are chosen
# (docs/benchmarks.md). For each split it holds out 10% of the training file
# (bench/dev_split.py, seed 7, into a scratch directory), trains rbmrec-eval
# on the rest with the given flags for each seed, and prints the RMSE on
# the held-out part, then the mean over the splits for each seed.
#
# Usage: bench/dev_tune.sh [--sets u1,r90,mlsmall,filmtrust] [--seeds 1,2]
#                          [--data DIR] [--work DIR] [-- rbmrec-eval flags]
#   --sets    any of u1 r90 mlsmall filmtrust ml1m (default: the four small)
#   --seeds   rbmrec-eval --seed values (default 1,2)
#   --data    default ../shared/data next to the repository root
#   --work    where the held-out splits go (default /tmp/rbmrec-dev)
# Example: bench/dev_tune.sh -- --weight-decay 0.01
set -euo pipefail

die() { echo "dev_tune.sh: $*" >&2; exit 1; }
root=$(cd "$(dirname "$0")/.." && pwd)
sets=u1,r90,mlsmall,filmtrust seeds=1,2 data="" work=/tmp/rbmrec-dev
while [ $# -gt 0 ]; do
  case $1 in
    --sets) sets=${2:?}; shift 2 ;;
    --seeds) seeds=${2:?}; shift 2 ;;
    --data) data=${2:?}; shift 2 ;;
    --work) work=${2:?}; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (flags for rbmrec-eval go after --)" ;;
  esac
done
[ -n "$data" ] || data=$(cd "$root/.." && pwd)/shared/data
[ -d "$data" ] || die "no data directory $data (see ../shared/data/README)"
eval_bin=$root/build/bin/rbmrec-eval
[ -x "$eval_bin" ] || die "build rbmrec-eval first (cmake --build build)"
mkdir -p "$work"

train_file() {
  case $1 in
    u1) echo "$data/movielens/ml-100k/u1.base" ;;
    r90) echo "$data/splits/ml100k.r90.train" ;;
    mlsmall) echo "$data/splits/mlsmall.r90.train" ;;
    filmtrust) echo "$data/splits/filmtrust.r90.train" ;;
    ml1m) echo "$data/splits/ml1m.r90.train" ;;
    *) die "unknown set '$1'" ;;
  esac
}

echo "flags: ${*:-(defaults)}"
for seed in ${seeds//,/ }; do
  sum=0 n=0
  for set in ${sets//,/ }; do
    src=$(train_file "$set")
    [ -f "$work/$set.test" ] || python3 "$root/bench/dev_split.py" "$src" "$work/$set" >/dev/null
    rmse=$("$eval_bin" --train "$work/$set.train" --test "$work/$set.test" \
      --threads 2 --seed "$seed" --rated-hidden 0 --quiet --json "$@" |
      python3 -c 'import json,sys; print("%.5f" % json.load(sys.stdin)["rmse"])')
    echo "seed $seed  $set  dev RMSE $rmse"
    sum=$(python3 -c "print($sum + $rmse)") n=$((n + 1))
  done
  python3 -c "print('seed $seed  mean over $n sets  %.5f' % ($sum / $n))"
done
