# Sourced by bench/faults.sh and bench/soak.sh (bash, set -euo pipefail):
#   suite_paths NAME ML_DIR TOOL...
# Sets `data` (ML_DIR/u.data; ML_DIR defaults to ../shared/data/movielens/
# ml-100k beside the repository root), `build` (BUILD, default build,
# relative to the root) and `bin`; exits 1 naming what is missing.
suite_paths() {
  local name=$1 ml=$2 t
  shift 2
  [ -n "$ml" ] || ml=$root/../shared/data/movielens/ml-100k
  data=$ml/u.data
  [ -r "$data" ] || { echo "$name: missing $data" >&2; exit 1; }
  build=${BUILD:-build}
  case $build in /*) ;; *) build=$root/$build ;; esac
  bin=$build/bin
  for t in "$@"; do
    [ -x "$bin/$t" ] || { echo "$name: missing $bin/$t (cmake --build $build --target $t)" >&2; exit 1; }
  done
}
