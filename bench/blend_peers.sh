#!/usr/bin/env bash
# How much a linear blend of rbmrec's predicted ratings with a matrix
# factorisation's (LIBMF, ../shared/tools/peer-libmf.sh's peer) would gain:
# the seed paper combined its RBMs with SVD models the same way. The blend
# weights (intercept, rbmrec, LIBMF) are fitted by least squares on a
# held-out part of the TRAINING file (bench/dev_split.py, 10%, seed 7), both
# systems trained on the rest; then both are trained on the whole training
# file and the same weights are applied to their TEST predictions. The test
# file chooses nothing. Prints one JSON object: the test RMSE of rbmrec,
# LIBMF and the blend, the correlation of the two systems' test errors,
# the weights and the held-out RMSEs.
#
# Usage: bench/blend_peers.sh TRAIN TEST [--libmf "FLAGS"] [--work DIR]
#                             [-- rbmrec-eval flags]
#   TRAIN, TEST  whitespace-separated "user item rating [...]" lines without
#            a header, as the benchmark's splits and u1.base / u1.test are
#   --libmf  LIBMF's flags (default: the benchmark protocol's ML-1M setting
#            -k 64 -t 60 -l2 0.05 -s 2)
#   --work   scratch directory (default: a new temporary one, removed)
# Needs build/bin/rbmrec-eval, python3 with numpy, g++ with OpenMP (LIBMF).
# Example: bench/blend_peers.sh ../shared/data/splits/ml1m.r90.train \
#            ../shared/data/splits/ml1m.r90.test -- --threads 2
set -euo pipefail

die() { echo "blend_peers.sh: $*" >&2; exit 1; }
root=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 2 ] || die "usage: bench/blend_peers.sh TRAIN TEST [--libmf FLAGS] [--work DIR] [-- rbmrec-eval flags]"
train=$1 test=$2; shift 2
libmf_flags="-k 64 -t 60 -l2 0.05 -s 2" work=""
while [ $# -gt 0 ]; do
  case $1 in
    --libmf) libmf_flags=${2:?}; shift 2 ;;
    --work) work=${2:?}; shift 2 ;;
    --) shift; break ;;
    *) die "unknown option '$1' (flags for rbmrec-eval go after --)" ;;
  esac
done
[ -f "$train" ] && [ -f "$test" ] || die "no such file: $train or $test"
eval_bin=$root/build/bin/rbmrec-eval
[ -x "$eval_bin" ] || die "build rbmrec-eval first (cmake --build build)"
py=""
for c in python3 /usr/bin/python3; do
  if "$c" -c "import numpy" 2>/dev/null; then py=$c; break; fi
done
[ -n "$py" ] || die "needs python3 with numpy (apt-get install python3-numpy)"
peers=$(cd "$root/.." && pwd)/shared/peers/libmf
[ -d "$peers" ] || die "no LIBMF sources at $peers"
if [ -z "$work" ]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi
mkdir -p "$work/libmf"
if [ ! -x "$work/libmf/mf-train" ]; then
  cp "$peers"/* "$work/libmf/"
  make -C "$work/libmf" -s >/dev/null 2>&1 || die "LIBMF build failed (needs g++ with OpenMP)"
fi

# libmf TRAIN TEST OUT: LIBMF's prediction for each line of TEST, in order.
libmf() {
  awk '{print $1" "$2" "$3}' "$1" > "$work/mf.tr"
  awk '{print $1" "$2" "$3}' "$2" > "$work/mf.te"
  # shellcheck disable=SC2086
  "$work/libmf/mf-train" $libmf_flags "$work/mf.tr" "$work/mf.model" >/dev/null
  "$work/libmf/mf-predict" -e 0 "$work/mf.te" "$work/mf.model" "$3" >/dev/null
}

"$py" "$root/bench/dev_split.py" "$train" "$work/dev" >/dev/null
for part in dev full; do
  if [ $part = dev ]; then tr=$work/dev.train te=$work/dev.test; else tr=$train te=$test; fi
  "$eval_bin" --train "$tr" --test "$te" --quiet --predictions "$work/$part.rbm" "$@" >/dev/null
  libmf "$tr" "$te" "$work/$part.mf"
  awk '{print $3}' "$te" > "$work/$part.truth"
done

"$py" - "$work" "$libmf_flags" <<'PY'
import json, sys
import numpy as np
work, flags = sys.argv[1], sys.argv[2]
def load(part):
    return [np.loadtxt(f"{work}/{part}.{x}", ndmin=1) for x in ("rbm", "mf", "truth")]
def rmse(p, y):
    return float(np.sqrt(np.mean((p - y) ** 2)))
dr, dm, dy = load("dev")
tr, tm, ty = load("full")
for part, arrays in (("held-out", (dr, dm, dy)), ("test", (tr, tm, ty))):
    if len({a.size for a in arrays}) != 1:
        sys.exit(f"blend_peers.sh: the {part} part's predictions and ratings "
                 f"differ in count ({', '.join(str(a.size) for a in arrays)})")
for a in (dr, dm, dy, tr, tm, ty):
    if not np.all(np.isfinite(a)):
        sys.exit("blend_peers.sh: a prediction file holds a non-finite value")
lo, hi = dy.min(), dy.max()  # the scale's ends, from the training file
w = np.linalg.lstsq(np.c_[np.ones_like(dr), dr, dm], dy, rcond=None)[0]
blend = lambda r, m: np.clip(w[0] + w[1] * r + w[2] * m, lo, hi)
print(json.dumps({
    "test_rmse": {"rbmrec": round(rmse(tr, ty), 4),
                  "libmf": round(rmse(np.clip(tm, lo, hi), ty), 4),
                  "blend": round(rmse(blend(tr, tm), ty), 4)},
    "heldout_rmse": {"rbmrec": round(rmse(dr, dy), 4),
                     "libmf": round(rmse(np.clip(dm, lo, hi), dy), 4),
                     "blend": round(rmse(blend(dr, dm), dy), 4)},
    "test_error_correlation": round(float(np.corrcoef(tr - ty, tm - ty)[0, 1]), 4),
    "weights": {"intercept": round(float(w[0]), 4), "rbmrec": round(float(w[1]), 4),
                "libmf": round(float(w[2]), 4)},
    "libmf_flags": flags, "heldout_ratings": int(dy.size), "test_ratings": int(ty.size)}))
PY
