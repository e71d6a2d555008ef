#!/usr/bin/env bash
# Calibration and top-N plots: trains and evaluates the model once with
# `rbmrec-eval --json --topn N` (default flags) and draws the result as SVG
# with bench/svg_plots.py (python3 standard library only):
#   OUT_DIR/reliability.svg       per rating value, mean predicted probability
#                                 vs observed frequency in 10 bins, the model
#                                 beside the item histogram baseline, the
#                                 diagonal, and the rows per bin
#   OUT_DIR/precision_recall.svg  precision@N, recall@N and NDCG@N vs N = 1..N
#                                 for every ranking rbmrec-eval reports
#   OUT_DIR/eval.json             rbmrec-eval's JSON output
# Prints the headline figures and the paths written.
#
# Usage: bench/plots.sh [OPTIONS] [OUT_DIR] [-- RBMREC_EVAL_FLAGS...]
#   --train FILE --test FILE  the split (default: the ML-1M r90 split,
#                       ../shared/data/splits/ml1m.r90.{train,test} next to the
#                       repository root, or next to the main checkout for a
#                       git worktree)
#   --topn N            longest list (default 10)
#   --title NAME        data set name in the titles (default: the training
#                       file's name without .train)
#   --from-json FILE    draw an existing `rbmrec-eval --json` output instead of
#                       running rbmrec-eval (no training)
#   --eval BIN          the rbmrec-eval binary (default build/bin/rbmrec-eval;
#                       built in build/ if missing)
#   -h, --help
# OUT_DIR defaults to build/plots. Flags after `--` go to rbmrec-eval (e.g.
# `-- --epochs 5 --relevant 5`).
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "$0" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//'; }
die() { echo "plots.sh: $*" >&2; exit 1; }

root=$(cd "$(dirname "$0")/.." && pwd)
train="" test="" topn=10 title="" from_json="" eval_bin="" out=""
extra=()
need() { [ "$2" -ge 2 ] || die "$1 needs a value (see --help)"; }
while [ $# -gt 0 ]; do
  case $1 in
    --train) need "$1" $#; train=$2; shift 2 ;;
    --test) need "$1" $#; test=$2; shift 2 ;;
    --topn) need "$1" $#; topn=$2; shift 2 ;;
    --title) need "$1" $#; title=$2; shift 2 ;;
    --from-json) need "$1" $#; from_json=$2; shift 2 ;;
    --eval) need "$1" $#; eval_bin=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    --) shift; extra=("$@"); break ;;
    -*) die "unknown option '$1' (see --help)" ;;
    *) [ -z "$out" ] || die "only one OUT_DIR argument (got '$out' and '$1')"
       out=$1; shift ;;
  esac
done
case $topn in ''|*[!0-9]*|0) die "--topn must be a positive integer, got '$topn'" ;; esac
command -v python3 >/dev/null || die "python3 is required (bench/svg_plots.py)"
out=${out:-$root/build/plots}
mkdir -p "$out"

if [ -n "$from_json" ]; then
  [ -f "$from_json" ] || die "'$from_json' not found"
  [ -z "$train$test" ] || die "--from-json and --train/--test exclude each other"
  [ "$(cd "$(dirname "$from_json")" && pwd)/$(basename "$from_json")" = "$(cd "$out" && pwd)/eval.json" ] ||
    cp "$from_json" "$out/eval.json"
  title=${title:-$(basename "$from_json" .json)}
else
  if [ -z "$train$test" ]; then
    # ../shared next to the repository root; in a git worktree that lives
    # elsewhere, next to the main checkout.
    shared=$root/../shared
    if [ ! -d "$shared" ]; then
      common=$(git -C "$root" rev-parse --path-format=absolute --git-common-dir 2>/dev/null || true)
      if [ -n "$common" ] && [ -d "$common/../../shared" ]; then shared=$common/../../shared; fi
    fi
    [ -d "$shared" ] && shared=$(cd "$shared" && pwd)
    train=$shared/data/splits/ml1m.r90.train
    test=$shared/data/splits/ml1m.r90.test
  fi
  if [ -z "$train" ] || [ -z "$test" ]; then die "give both --train and --test"; fi
  [ -f "$train" ] || die "training file '$train' not found (see ../shared/data/README.md or pass --train)"
  [ -f "$test" ] || die "test file '$test' not found (pass --test)"
  title=${title:-$(basename "$train" .train)}
  eval_bin=${eval_bin:-$root/build/bin/rbmrec-eval}
  if [ ! -x "$eval_bin" ]; then
    [ "$eval_bin" = "$root/build/bin/rbmrec-eval" ] || die "'$eval_bin' is not executable"
    echo "plots.sh: building rbmrec-eval in build/" >&2
    cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$root/build" --target rbmrec-eval -j2 >/dev/null
  fi
  echo "plots.sh: $eval_bin --train $train --test $test --topn $topn --json --quiet ${extra[*]}" >&2
  "$eval_bin" --train "$train" --test "$test" --topn "$topn" --json --quiet \
    ${extra[@]+"${extra[@]}"} >"$out/eval.json.tmp"
  mv "$out/eval.json.tmp" "$out/eval.json"
fi

python3 - "$out/eval.json" "$title" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
print(f"{sys.argv[2]}: rmse {d['rmse']:.4f}  nll {d['nll']:.4f} (item histogram "
      f"{d['hist_nll']:.4f})  ece {d['ece']:.4f} (item histogram {d['hist_ece']:.4f})")
t = d.get("topn")
if t:
    for name, s in t.items():
        if isinstance(s, dict):
            print(f"  top {t['n']} ({t['users']} users) {name:<16} precision "
                  f"{s['precision']:.4f}  recall {s['recall']:.4f}  ndcg {s['ndcg']:.4f}")
EOF
python3 "$root/bench/svg_plots.py" --title "$title" "$out/eval.json" "$out"
echo "$out/eval.json"
