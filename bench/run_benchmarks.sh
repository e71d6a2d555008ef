#!/usr/bin/env bash
# Side-by-side accuracy/speed benchmark: rbmrec-eval (default flags,
# --threads 2) against LIBMF (../shared/tools/peer-libmf.sh) on every
# benchmark split, in one run, on the same ratings. Prints one row per split
# (a Markdown table: RMSEs, their difference, median training seconds, the
# time ratio, rbmrec's peak RSS and epochs) and optionally writes every raw
# result as JSON. Data is read from ../shared/data (never committed; see its
# README); the protocol is ../shared/docs/benchmarks.md.
#
# Usage: bench/run_benchmarks.sh [OPTIONS] [DATA_DIR]
#   --repeats N        runs per system and split (default 3); the table shows
#                      the median training time, the RMSE of the median-time
#                      run and LIBMF's min-max RMSE over the runs
#   --quick            1 repeat, skip ML-1M (for development)
#   --only NAME[,NAME] only these splits: ml100k-u1 ml100k-r90 mlsmall-r90
#                      ml1m-r90 filmtrust-r90
#   --json FILE        write all raw results (every run) and the table as JSON
#   --ablations        also run the rbmrec-only ablation rows (U-RBM only,
#                      mean-field, first defaults, threads 1/2, whole-run wall)
#   --libmf SCRIPT     the LIBMF runner (default ../shared/tools/peer-libmf.sh)
#   --markdown FILE    after the run, also write the set-up (date, cores, data
#                      sets, repeats, LIBMF settings) and the table as Markdown
#                      into FILE, between the lines
#                        <!-- run_benchmarks:begin -->
#                        <!-- run_benchmarks:end -->
#                      replacing what was between them and keeping the rest of
#                      FILE (docs/benchmarks.md has them); a FILE without the
#                      markers gets them appended, a missing FILE is created
#   -h, --help
# DATA_DIR defaults to ../shared/data next to the repository root (for a git
# worktree elsewhere: next to the main checkout). Builds build/ (Release,
# rbmrec-eval only) if build/bin/rbmrec-eval is missing.
#
# LIBMF settings are the tuned ones from benchmarks.md: ML-1M
# "-k 64 -t 60 -l2 0.05 -s 2", ML-100k and ml-latest-small
# "-k 64 -t 100 -l2 0.1 -s 2". FilmTrust has no published tuned setting: the
# script runs LIBMF once with each of a small grid (LIBMF default "-s 2", the
# two settings above, k 16/32/64 x l2 0.05/0.1 at -t 100) and keeps the one
# with the best TEST RMSE, i.e. tuned on the test set like the benchmarks.md
# anchor (flagged in the table). rbmrec is never tuned here: default flags.
#
# Each repeat also runs rbmrec-eval --topn 10, which trains the ranking model
# (the rated RBM behind Recommend) beside the rating model, as the service's
# Train does: the table shows that model's seconds and the ratio with it.
#
# Timing: rbmrec's train_seconds is its training only (rbmrec-eval's own
# clock, after reading); LIBMF's is the wall time of mf-train, which includes
# reading its text file and writing the model (a small advantage to rbmrec on
# the smallest sets). The two systems' runs alternate so that load from other
# processes falls on both.
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "$0" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//'; }
die() { echo "run_benchmarks.sh: $*" >&2; exit 1; }

root=$(cd "$(dirname "$0")/.." && pwd)
repeats=3 quick=0 only="" json_out="" markdown_out="" ablations=0 libmf="" data=""
while [ $# -gt 0 ]; do
  case $1 in
    --repeats) [ $# -ge 2 ] || die "--repeats needs a number"; repeats=$2; shift 2 ;;
    --repeats=*) repeats=${1#*=}; shift ;;
    --quick) quick=1; shift ;;
    --only) [ $# -ge 2 ] || die "--only needs NAME[,NAME]"; only=$2; shift 2 ;;
    --only=*) only=${1#*=}; shift ;;
    --json) [ $# -ge 2 ] || die "--json needs a FILE"; json_out=$2; shift 2 ;;
    --json=*) json_out=${1#*=}; shift ;;
    --markdown) [ $# -ge 2 ] || die "--markdown needs a FILE"; markdown_out=$2; shift 2 ;;
    --markdown=*) markdown_out=${1#*=}; shift ;;
    --ablations) ablations=1; shift ;;
    --libmf) [ $# -ge 2 ] || die "--libmf needs a SCRIPT"; libmf=$2; shift 2 ;;
    --libmf=*) libmf=${1#*=}; shift ;;
    -h|--help) usage; exit 0 ;;
    -*) die "unknown option '$1' (see --help)" ;;
    *) [ -z "$data" ] || die "only one DATA_DIR argument (got '$data' and '$1')"
       data=$1; shift ;;
  esac
done
case $repeats in ''|*[!0-9]*|0) die "--repeats must be a positive integer, got '$repeats'" ;; esac
[ "$quick" = 1 ] && repeats=1
command -v python3 >/dev/null || die "python3 is required (for the JSON results and the table)"

# --markdown FILE: the generated section sits between these two lines.
md_begin='<!-- run_benchmarks:begin -->'
md_end='<!-- run_benchmarks:end -->'
# Succeeds when FILE is missing, or has neither marker, or has each marker
# once on a line of its own with begin before end; else says what is wrong.
check_markers() {
  local f=$1 b e nb ne
  [ -e "$f" ] || return 0
  if [ ! -f "$f" ] || [ ! -r "$f" ]; then echo "'$f' is not a readable file"; return 1; fi
  nb=$(grep -c -x -F -e "$md_begin" "$f" || true)
  ne=$(grep -c -x -F -e "$md_end" "$f" || true)
  if [ "$nb" = 0 ] && [ "$ne" = 0 ]; then return 0; fi
  if [ "$nb" != 1 ] || [ "$ne" != 1 ]; then
    echo "'$f' must hold each marker line once ($md_begin: $nb, $md_end: $ne)"
    return 1
  fi
  b=$(grep -n -x -F -e "$md_begin" "$f" | cut -d: -f1)
  e=$(grep -n -x -F -e "$md_end" "$f" | cut -d: -f1)
  [ "$b" -lt "$e" ] || { echo "'$f': $md_end comes before $md_begin"; return 1; }
}
if [ -n "$markdown_out" ]; then
  # Checked now, not after the run: a bad FILE should not cost a benchmark.
  [ -d "$(dirname "$markdown_out")" ] || die "--markdown: directory of '$markdown_out' not found"
  why=$(check_markers "$markdown_out") || die "--markdown: $why"
fi

# ../shared next to the repository root; in a git worktree that lives
# elsewhere, next to the main checkout.
shared=$root/../shared
if [ ! -d "$shared" ]; then
  common=$(git -C "$root" rev-parse --path-format=absolute --git-common-dir 2>/dev/null || true)
  if [ -n "$common" ] && [ -d "$common/../../shared" ]; then shared=$common/../../shared; fi
fi
data=${data:-$shared/data}
[ -d "$data" ] || die "data directory '$data' not found: pass DATA_DIR (the folder with movielens/, filmtrust/ and splits/, see ../shared/data/README.md)"
data=$(cd "$data" && pwd)
libmf=${libmf:-$shared/tools/peer-libmf.sh}
[ -f "$libmf" ] || die "LIBMF runner '$libmf' not found: pass --libmf SCRIPT (../shared/tools/peer-libmf.sh)"

# Splits: name, train file, test file, LIBMF flags ("grid" = tune on test).
all_splits=(ml100k-u1 ml100k-r90 mlsmall-r90 ml1m-r90 filmtrust-r90)
split_files() {
  case $1 in
    ml100k-u1) echo "$data/movielens/ml-100k/u1.base $data/movielens/ml-100k/u1.test" ;;
    ml100k-r90) echo "$data/splits/ml100k.r90.train $data/splits/ml100k.r90.test" ;;
    mlsmall-r90) echo "$data/splits/mlsmall.r90.train $data/splits/mlsmall.r90.test" ;;
    ml1m-r90) echo "$data/splits/ml1m.r90.train $data/splits/ml1m.r90.test" ;;
    filmtrust-r90) echo "$data/splits/filmtrust.r90.train $data/splits/filmtrust.r90.test" ;;
  esac
}
libmf_flags() {
  case $1 in
    ml1m-r90) echo "-k 64 -t 60 -l2 0.05 -s 2" ;;
    filmtrust-r90) echo grid ;;
    *) echo "-k 64 -t 100 -l2 0.1 -s 2" ;;
  esac
}
filmtrust_grid=(
  "-s 2"
  "-k 64 -t 100 -l2 0.1 -s 2"
  "-k 64 -t 60 -l2 0.05 -s 2"
  "-k 16 -t 100 -l2 0.05 -s 2" "-k 16 -t 100 -l2 0.1 -s 2"
  "-k 32 -t 100 -l2 0.05 -s 2" "-k 32 -t 100 -l2 0.1 -s 2"
  "-k 64 -t 100 -l2 0.05 -s 2"
)

splits=()
if [ -n "$only" ]; then
  IFS=, read -r -a wanted <<<"$only"
  for w in "${wanted[@]}"; do
    case " ${all_splits[*]} " in
      *" $w "*) splits+=("$w") ;;
      *) die "--only: unknown split '$w' (known: ${all_splits[*]})" ;;
    esac
  done
else
  for s in "${all_splits[@]}"; do
    if [ "$quick" = 1 ] && [ "$s" = ml1m-r90 ]; then continue; fi
    splits+=("$s")
  done
fi
[ ${#splits[@]} -gt 0 ] || die "no split selected"
for s in "${splits[@]}"; do
  read -r tr te <<<"$(split_files "$s")"
  [ -f "$tr" ] || die "$s: training file '$tr' not found (data dir '$data')"
  [ -f "$te" ] || die "$s: test file '$te' not found (data dir '$data')"
done

eval_bin=$root/build/bin/rbmrec-eval
if [ ! -x "$eval_bin" ]; then
  echo "building rbmrec-eval in $root/build (Release) ..." >&2
  if [ ! -f "$root/build/CMakeCache.txt" ]; then
    launcher=()
    if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
    cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" \
      -DRBMREC_BUILD_SERVICE=OFF -DRBMREC_BUILD_TESTS=OFF >/dev/null
  fi
  cmake --build "$root/build" -j"$(nproc)" --target rbmrec-eval >&2
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/rbmrec-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
raw=$work/raw.jsonl   # one line per run: {"split", "system", "kind", ..., "result"}
: >"$raw"

# LIBMF's runner reads whitespace-separated "user item rating" columns
# (awk $1 $2 $3) and LIBMF wants non-negative integer ids. Prints the path of
# a file with exactly the ratings rbmrec-eval reads from FILE: FILE itself
# when it already is whitespace-separated with no header (every split here),
# else a converted copy under $work ("::" ML-1M .dat, CSV with an optional
# header, a TSV header line).
libmf_input() {
  local f=$1 out first
  first=$(awk 'NF { print; exit }' "$f")
  out=$(mktemp "$work/libmf.XXXXXX")
  if [[ $first == *::* ]]; then
    awk -F'::' 'NF { print $1" "$2" "$3 }' "$f" >"$out"
  elif [[ $first == *,* ]]; then
    awk -F, 'NF { gsub(/"/, ""); if (FNR == 1 && $3 !~ /^[ ]*[-+0-9.]/) next; print $1" "$2" "$3 }' "$f" >"$out"
  elif ! awk 'NF { exit !($3 ~ /^[-+0-9.]/) }' "$f"; then   # header line
    awk 'NF && !h++ { next } NF { print $1" "$2" "$3 }' "$f" >"$out"
  else
    out=$f
  fi
  awk 'NF && ($1 !~ /^[0-9]+$/ || $2 !~ /^[0-9]+$/) { printf "%s:%d: LIBMF needs non-negative integer user/item ids, got \"%s %s\"\n", FILENAME, FNR, $1, $2; bad = 1; exit }
       END { exit bad }' "$out" >&2 || die "$f: cannot be given to LIBMF as is"
  echo "$out"
}

# Appends one run to $raw. Arguments: split system kind repeat flags result-json.
record() {
  python3 - "$@" >>"$raw" <<'EOF' || die "$1 $2: the runner did not print one JSON object: $6"
import json, sys
split, system, kind, rep, flags, out = sys.argv[1:7]
print(json.dumps({"split": split, "system": system, "kind": kind, "repeat": int(rep),
                  "flags": flags, "result": json.loads(out)}))
EOF
}
get() { python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$2" "$1"; }

run_rbmrec() {  # train test extra-flags...
  local tr=$1 te=$2; shift 2
  "$eval_bin" --json --quiet --train "$tr" --test "$te" "$@" \
    || die "rbmrec-eval failed on $tr / $te"
}
run_libmf() {  # train test flags
  local out
  # shellcheck disable=SC2086  # the flags are words
  out=$(bash "$libmf" "$1" "$2" $3) || die "LIBMF failed on $1 / $2 ($3)"
  echo "$out"
}

# A path as the docs show it: relative to the repository's parent when it
# lies under it (../shared/...), else as given.
show_path() {
  local p=$1 parent
  parent=$(cd "$root/.." && pwd)
  if [ -e "$p" ]; then p=$(cd "$(dirname "$p")" && pwd)/$(basename "$p"); fi
  case $p in "$parent"/*) echo "../${p#"$parent"/}" ;; *) echo "$p" ;; esac
}

# write_markdown FILE REPORT: the set-up of this run and REPORT (what
# side_by_side.py printed: from its first table line on, without its title
# line) between the markers in FILE (see --markdown). Reads the globals
# splits, data, libmf, repeats, ablations, cpu.
write_markdown() {
  local f=$1 report=$2 section s tr te flags list="" libmf_list=""
  section=$(mktemp "$work/section.XXXXXX")
  for s in "${splits[@]}"; do
    read -r tr te <<<"$(split_files "$s")"
    list+="${list:+, }$s (\`${tr#"$data"/}\`, \`${te#"$data"/}\`)"
    flags=$(libmf_flags "$s")
    if [ "$flags" = grid ]; then
      libmf_list+="${libmf_list:+, }$s: the best of ${#filmtrust_grid[@]} settings on the TEST set (\`*\` in the table)"
    else
      libmf_list+="${libmf_list:+, }$s \`$flags\`"
    fi
  done
  {
    echo "$md_begin"
    echo "<!-- Written by bench/run_benchmarks.sh --markdown; a rerun replaces everything between these markers. -->"
    echo "Set-up of this run:"
    echo
    echo "- Date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "- Machine: $(nproc) cores (${cpu:-unknown CPU})"
    echo "- rbmrec: \`rbmrec-eval\` with default flags and \`--threads 2\`; each repeat also \`--threads 2 --topn 10\` (the ranking model)"
    echo "- LIBMF: \`$(show_path "$libmf")\`; flags: $libmf_list"
    echo "- Data sets (under \`$(show_path "$data")\`): $list"
    echo "- Repeats: $repeats per system and split; the table shows the median-time run"
    if [ "$ablations" = 1 ]; then
      echo "- Ablations: one \`rbmrec-eval\` run each (\`--ablations\`)"
    fi
    echo
    awk 'found || /^[|]/ { found = 1; print }' "$report"
    echo "$md_end"
  } >"$section"
  if [ ! -e "$f" ]; then
    cat "$section" >"$f"
  elif ! grep -q -x -F -e "$md_begin" "$f"; then
    { echo; cat "$section"; } >>"$f"
  else
    local merged
    merged=$(mktemp "$work/merged.XXXXXX")
    awk -v b="$md_begin" -v e="$md_end" -v sec="$section" '
      $0 == b { while ((getline line < sec) > 0) print line; skip = 1; next }
      $0 == e { skip = 0; next }
      !skip { print }' "$f" >"$merged"
    cat "$merged" >"$f"   # in place: keeps FILE's permissions
  fi
  echo "Markdown written to $f" >&2
}

cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null || true)
commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
echo "rbmrec $commit vs LIBMF, $(nproc) cores (${cpu:-unknown CPU}), $repeats repeat(s), data $data" >&2

for s in "${splits[@]}"; do
  read -r tr te <<<"$(split_files "$s")"
  ltr=$(libmf_input "$tr")
  lte=$(libmf_input "$te")
  flags=$(libmf_flags "$s")
  if [ "$flags" = grid ]; then
    best="" best_rmse=""
    for g in "${filmtrust_grid[@]}"; do
      out=$(run_libmf "$ltr" "$lte" "$g")
      record "$s" libmf grid 0 "$g" "$out"
      r=$(get rmse "$out")
      echo "[$s] LIBMF grid '$g': rmse $r" >&2
      if [ -z "$best" ] || awk -v a="$r" -v b="$best_rmse" 'BEGIN { exit !(a < b) }'; then
        best=$g best_rmse=$r
      fi
    done
    flags=$best
    echo "[$s] LIBMF best on the TEST set: '$flags' ($best_rmse)" >&2
  fi
  for ((i = 1; i <= repeats; i++)); do
    rout=$(run_rbmrec "$tr" "$te" --threads 2)
    record "$s" rbmrec main "$i" "--threads 2" "$rout"
    echo "[$s] rbmrec run $i/$repeats: rmse $(get rmse "$rout")  train $(get train_seconds "$rout") s" >&2
    out=$(run_libmf "$ltr" "$lte" "$flags")
    record "$s" libmf main "$i" "$flags" "$out"
    echo "[$s] LIBMF  run $i/$repeats: rmse $(get rmse "$out")  train $(get train_seconds "$out") s" >&2
    # The service's training: the rating model and the ranking model (the
    # rated RBM, which default flags do not train: the RMSE does not use it).
    kout=$(run_rbmrec "$tr" "$te" --threads 2 --topn 10)
    record "$s" rbmrec ranking "$i" "--threads 2 --topn 10" "$kout"
    echo "[$s] rbmrec run $i/$repeats with the ranking model (--topn 10): train $(get train_seconds "$kout") s" >&2
  done
  # LIBMF must have been scored on the test ratings rbmrec-eval counted.
  n_libmf=$(awk 'NF' "$lte" | wc -l)
  n_rbm=$(get n_test "$rout")
  [ "$n_rbm" = "$n_libmf" ] || die "$s: rbmrec-eval evaluated $n_rbm test ratings, LIBMF's test file has $n_libmf"
done

if [ "$ablations" = 1 ]; then
  # The rbmrec-only rows of the earlier results table (one run each).
  ablation() {  # split name rbmrec-eval-flags...
    local split=$1 name=$2; shift 2
    case " ${splits[*]} " in *" $split "*) ;; *) return 0 ;; esac
    read -r tr te <<<"$(split_files "$split")"
    local out
    out=$(run_rbmrec "$tr" "$te" "$@")
    record "$split" rbmrec "ablation:$name" 1 "$*" "$out"
    echo "[$split] ablation '$name': rmse $(get rmse "$out")" >&2
  }
  ablation ml100k-u1 "U-RBM only" --item-based=false --threads 2
  ablation ml100k-r90 "U-RBM only" --item-based=false --threads 2
  ablation mlsmall-r90 "U-RBM only" --item-based=false --threads 2
  ablation ml100k-r90 "mean-field" --predict meanfield --threads 2
  ablation ml100k-r90 "U-RBM first defaults" --item-based=false --per-item-normalize \
    --weight-decay 0.001 --cd-steps auto --threads 2
  ablation ml100k-r90 "threads=1" --threads 1
  ablation ml100k-r90 "threads=2" --threads 2
  case " ${splits[*]} " in
    *" ml100k-r90 "*)
      # Wall time of the whole default run (read, train, evaluate).
      read -r tr te <<<"$(split_files ml100k-r90)"
      start=$(date +%s%N)
      "$eval_bin" --quiet --threads 2 --train "$tr" --test "$te" >/dev/null
      end=$(date +%s%N)
      record ml100k-r90 rbmrec "ablation:whole run wall" 1 "--threads 2" \
        "{\"wall_seconds\": $(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')}"
      ;;
  esac
fi

report() {
  python3 "$root/bench/suites/side_by_side.py" --raw "$raw" --repeats "$repeats" \
    --commit "$commit" --cpu "${cpu:-unknown}" --cores "$(nproc)" --data "$data" \
    ${json_out:+--json "$json_out"}
}
if [ -n "$markdown_out" ]; then
  report | tee "$work/report.txt"
  write_markdown "$markdown_out" "$work/report.txt"
else
  report
fi
