#!/usr/bin/env bash
# Prints every function longer than 120 lines and every source file longer
# than 800 lines in core/ server/ store/ client/ (C++ sources and headers).
# Function extents come from universal-ctags (--fields=+ne: start and end
# lines; the package universal-ctags, in scripts/debian-packages.txt).
# Usage: scripts/check_sizes.sh [--strict]
#   default   print the offenders and exit 0;
#   --strict  exit 1 when there is at least one offender.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

max_function_lines=120
max_file_lines=800
dirs=(core server store client)

strict=0
for arg in "$@"; do
  case "$arg" in
    --strict) strict=1 ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) echo "check_sizes.sh: unknown argument '$arg' (usage: [--strict])" >&2; exit 2 ;;
  esac
done

if ! ctags --version 2>/dev/null | grep -q 'Universal Ctags'; then
  echo "check_sizes.sh: universal-ctags is needed (apt-get install -y universal-ctags)" >&2
  exit 2
fi

mapfile -t files < <(git ls-files -- "${dirs[@]}" 2>/dev/null |
  grep -E '\.(cc|h|cpp|hpp)$' || true)
if [ "${#files[@]}" -eq 0 ]; then
  mapfile -t files < <(find "${dirs[@]}" -type f \
    \( -name '*.cc' -o -name '*.h' -o -name '*.cpp' -o -name '*.hpp' \) | sort)
fi

offenders=0

echo "== functions longer than $max_function_lines lines"
functions=$(ctags --languages=C++ --language-force=C++ --kinds-C++=f \
  --fields=+ne --sort=no -o - "${files[@]}" |
  awk -F'\t' -v max="$max_function_lines" '
    {
      start = 0; end = 0; scope = ""
      for (i = 4; i <= NF; i++) {
        if ($i ~ /^line:/) start = substr($i, 6) + 0
        else if ($i ~ /^end:/) end = substr($i, 5) + 0
        else if ($i ~ /^(class|struct|namespace):/) scope = substr($i, index($i, ":") + 1)
      }
      if (start > 0 && end >= start && end - start + 1 > max) {
        name = (scope ~ /^[A-Za-z_][A-Za-z_0-9:]*$/ && scope !~ /__anon/) ? scope "::" $1 : $1
        printf "%6d lines  %s:%d  %s\n", end - start + 1, $2, start, name
      }
    }' | sort -rn)
if [ -n "$functions" ]; then
  echo "$functions"
  offenders=$((offenders + $(printf '%s\n' "$functions" | wc -l)))
else
  echo "(none)"
fi

echo "== files longer than $max_file_lines lines"
long_files=$(wc -l "${files[@]}" | awk -v max="$max_file_lines" \
  '$2 != "total" && $1 > max { printf "%6d lines  %s\n", $1, $2 }' | sort -rn)
if [ -n "$long_files" ]; then
  echo "$long_files"
  offenders=$((offenders + $(printf '%s\n' "$long_files" | wc -l)))
else
  echo "(none)"
fi

echo "== $offenders offender(s)"
if [ "$strict" -eq 1 ] && [ "$offenders" -gt 0 ]; then
  exit 1
fi
exit 0
