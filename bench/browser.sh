#!/usr/bin/env bash
# The dashboard in headless Chromium (tests/server/http/dashboard_browser_test.py)
# outside ctest. Short mode: what ctest runs (and scripts/test.sh, in CI).
# --full: three times the users, several user and item pages, pin and
# activate from the models page, and a run cancelled from the training page.
# Needs Debian's chromium, chromium-driver and python3-selenium.
# Screenshots and the browser console: $RBMREC_ARTIFACTS (default
# $BUILD/artifacts/dashboard-bench).
# Usage: bench/browser.sh [--full] [--readme-shot docs/img/dashboard-training.png]
#        BUILD=build-test bench/browser.sh   (default build dir: build)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$root/build}
[ -x "$BUILD/bin/rbmrec-server" ] ||
  { echo "bench/browser.sh: build rbmrec-server first ($BUILD/bin/rbmrec-server)" >&2; exit 1; }
export RBMREC_REQUIRE_BROWSER=1
exec /usr/bin/python3 "$root/tests/server/http/dashboard_browser_test.py" \
  --server-bin "$BUILD/bin/rbmrec-server" --source-dir "$root" \
  --artifacts "${RBMREC_ARTIFACTS:-$BUILD/artifacts/dashboard-bench}" "$@"
