#!/usr/bin/env bash
# Training cost as the data grows (docs/scaling.md): synthetic rating data
# from rbmrec-synth at several sizes (default 1 M, 10 M and 50 M ratings, with
# user and item counts shaped like MovieLens 1M, a 10x larger catalogue and
# Netflix's items), then `rbmrec-eval --epochs 2` on each, printing per size:
# the seconds of one epoch of the user-based RBM and of the item-based RBM
# (the median of the epochs run; they train side by side, one thread each,
# so the wall time of an epoch of both is about the larger), the rated RBM's
# seconds per epoch (dense: users x items x hidden; skipped above
# RATED_MAX_RATINGS, default 10 M, where it is extrapolated in
# docs/scaling.md), peak RSS, and the growth of each figure against the
# previous size. Data goes to a temporary directory that is removed.
#
# Usage: bench/scale_epochs.sh [SIZES...]    e.g. 1000000:6040:3706
#        (SIZE = RATINGS:USERS:ITEMS)
# Env:   THREADS=2, EPOCHS=2, RATED_MAX_RATINGS=10000000, EVAL_FLAGS (more
#        rbmrec-eval flags, e.g. "--factors 0" for unfactored training)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/build/bin
threads=${THREADS:-2}
epochs=${EPOCHS:-2}
rated_max=${RATED_MAX_RATINGS:-10000000}
read -r -a eval_flags <<<"${EVAL_FLAGS:-}"
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(1000000:6040:3706 10000000:60000:10000
  50000000:300000:17770)
for t in rbmrec-synth rbmrec-eval; do
  [ -x "$bin/$t" ] || cmake --build "$root/build" -j2 --target "$t" >&2
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rbmrec-scale.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

median() { sort -g | awk '{a[NR]=$1} END {if (NR==0) print "nan"; else if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

printf '%-10s %8s %7s  %10s %10s %12s %8s\n' ratings users items \
  "user s/ep" "item s/ep" "rated s/ep" "RSS MB"
prev=""
for size in "${sizes[@]}"; do
  IFS=: read -r n users items <<<"$size"
  "$bin/rbmrec-synth" --users "$users" --items "$items" --ratings "$n" \
    --test-fraction 0.01 --out "$tmp/train" --test-out "$tmp/test" 2>/dev/null
  rated=(--rated-hidden -1 --rated-epochs 1)
  [ "$n" -le "$rated_max" ] || rated=(--rated-hidden 0)
  "$bin/rbmrec-eval" --train "$tmp/train" --test "$tmp/test" \
    --threads "$threads" --epochs "$epochs" --patience 100 "${rated[@]}" \
    ${eval_flags[@]+"${eval_flags[@]}"} \
    >"$tmp/out" 2>"$tmp/err"
  u=$(awk '$1=="member" && $2==0 {sub("s","",$NF); print $NF}' "$tmp/err" | median)
  i=$(awk '$1=="member" && $2==1 {sub("s","",$NF); print $NF}' "$tmp/err" | median)
  r=$(sed -n -E 's/.*rated RBM: .*epochs_run ([0-9]+).* seconds ([0-9.]+).*/\2 \1/p' \
    "$tmp/out" | awk '{ if ($2 > 0) printf "%.2f", $1 / $2 }')
  rss=$(sed -n -E 's/.*peak_rss_mb ([0-9.]+).*/\1/p' "$tmp/out")
  printf '%-10s %8s %7s  %10s %10s %12s %8s\n' "$n" "$users" "$items" "$u" \
    "$i" "${r:--}" "$rss"
  if [ -n "$prev" ]; then
    read -r pn pu pi pr prss <<<"$prev"
    awk -v n="$n" -v pn="$pn" -v u="$u" -v pu="$pu" -v i="$i" -v pi="$pi" \
      -v r="${r:-0}" -v pr="$pr" -v rss="$rss" -v prss="$prss" 'BEGIN {
      printf "  growth vs previous: ratings x%.1f  user epoch x%.2f  item epoch x%.2f",
        n / pn, u / pu, i / pi
      if (r > 0 && pr > 0) printf "  rated epoch x%.2f", r / pr
      printf "  RSS x%.2f\n", rss / prss }'
  fi
  prev="$n $u $i ${r:-0} $rss"
done
