#!/usr/bin/env bash
# The CI gate on TPOT distributions: runs tests/regression/sweep.json with this build and compares it
# with the committed baseline (tests/regression/baseline/) by `eldrsim compare --require-all`: exit 1
# when any router's TPOT P50/P95/P99 or distribution got worse beyond the default tolerances.
# A change that moves TPOT on purpose refreshes the baseline: `make regression-baseline` (refresh.sh),
# then commit tests/regression/baseline/ with the change.
# Usage: check.sh PATH/TO/eldrsim   (run from the project root)
set -u
ELDRSIM=${1:?usage: check.sh PATH/TO/eldrsim}
HERE=$(cd "$(dirname "$0")" && pwd)
TMP=$(mktemp -d "${TMPDIR:-/tmp}/eldr-regression.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
"$ELDRSIM" sweep "$HERE/sweep.json" --out "$TMP/current" -q || { echo "FAIL: the regression sweep did not run"; exit 1; }
"$ELDRSIM" compare "$HERE/baseline" "$TMP/current" --require-all
rc=$?
if [ $rc != 0 ]; then
  echo "TPOT regressed against tests/regression/baseline. If the change is meant to move TPOT, refresh the"
  echo "baseline on purpose with 'make regression-baseline' and commit tests/regression/baseline/."
fi
exit $rc
