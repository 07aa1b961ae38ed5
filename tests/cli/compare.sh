#!/usr/bin/env bash
# `eldrsim compare BASELINE CURRENT`: passes (exit 0) on identical results and on an improvement,
# fails (exit 1) on a deliberate regression (the same runs under more load, compared with
# --allow-different), honours settable tolerances, and exits 2 with one line on bad input and on runs
# of different configurations.
# Usage: compare.sh PATH/TO/eldrsim   (run from the project root)
set -u
ELDRSIM=${1:?usage: compare.sh PATH/TO/eldrsim}
[ -f configs/default.json ] || { echo "run from the project root"; exit 1; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/eldr-compare.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
. "$(dirname "$0")/lib.sh"

cat >"$TMP/s.json" <<'JSON'
{ "name": "cmp", "base": "configs/default.json",
  "set": { "workload.measured_requests": 150, "workload.warmup_requests": 0, "workload.calibration_requests": 300,
           "eldr.mask_pairs": 3000 },
  "grid": { "router": ["round_robin", "eldr"] } }
JSON
"$ELDRSIM" sweep "$TMP/s.json" --out "$TMP/base" -q --set workload.rate_rps=20
"$ELDRSIM" sweep "$TMP/s.json" --out "$TMP/same" -q --set workload.rate_rps=20
# The deliberate regression: every run under three times the load.
"$ELDRSIM" sweep "$TMP/s.json" --out "$TMP/slow" -q --set workload.rate_rps=60

"$ELDRSIM" compare "$TMP/base" "$TMP/same" >"$TMP/same.out" 2>&1
rc=$?
check "no change: exit 0, PASS" '[ $rc = 0 ] && grep -q "^PASS: 0 of 2 runs regressed" "$TMP/same.out"'
check "the table lists both routers with KS D 0" '[ $(grep -c "^cmp/router=.* 0.000 " "$TMP/same.out") = 2 ]'

"$ELDRSIM" compare "$TMP/base" "$TMP/slow" >/dev/null 2>"$TMP/diff.err"
rc=$?
check "runs at another rate are not comparable: exit 2, one line naming the difference" \
  '[ $rc = 2 ] && [ $(wc -l <"$TMP/diff.err") = 1 ] && grep -q "rate_rps 20 vs 60 (and 1 more runs differ).*--allow-different" "$TMP/diff.err"'
"$ELDRSIM" compare "$TMP/base" "$TMP/slow" --allow-different >"$TMP/slow.out" 2>&1
rc=$?
check "a regression: exit 1, FAIL" '[ $rc = 1 ] && grep -q "^FAIL: 2 of 2 runs regressed" "$TMP/slow.out"'
check "the verdict says why" 'grep -q "REGRESSION: P50 +[0-9.]*% > 2%" "$TMP/slow.out" && grep -q "distribution shifted up" "$TMP/slow.out"'

"$ELDRSIM" compare "$TMP/slow" "$TMP/base" --allow-different >"$TMP/better.out" 2>&1
rc=$?
# Both runs faster: PASS, each row a lower P50 (baseline>current, a negative change) and no verdict.
check "an improvement passes, each run's P50 lower" \
  '[ $rc = 0 ] && grep -q "^PASS: 0 of 2 runs regressed" "$TMP/better.out" && \
   [ $(grep -cE "^cmp/router=[a-z_]+ +[0-9.]+>[0-9.]+ +-[0-9.]+%" "$TMP/better.out") = 2 ] && ! grep -q REGRESSION "$TMP/better.out"'

"$ELDRSIM" compare "$TMP/base" "$TMP/slow" --allow-different --tol-p50 1000 --tol-p95 1000 --tol-p99 1000 --ks-d 1 >"$TMP/tol.out" 2>&1
rc=$?
check "tolerances are settable" '[ $rc = 0 ] && grep -q "P50 1000%" "$TMP/tol.out"'

# One run against one run (directories holding summary.json directly).
"$ELDRSIM" compare "$TMP/base/cmp/router=eldr" "$TMP/slow/cmp/router=eldr" --allow-different >"$TMP/one.out" 2>&1
rc=$?
check "single run directories compare" '[ $rc = 1 ] && grep -q "^eldr " "$TMP/one.out"'

# Runs only on one side are listed; --require-all turns a missing one into a failure.
mkdir -p "$TMP/part/cmp" && cp -r "$TMP/same/cmp/router=eldr" "$TMP/part/cmp/"
"$ELDRSIM" compare "$TMP/base" "$TMP/part" >"$TMP/part.out" 2>&1
rc=$?
check "a run missing from the current results is listed" '[ $rc = 0 ] && grep -q "cmp/router=round_robin: only in the baseline" "$TMP/part.out"'
"$ELDRSIM" compare "$TMP/base" "$TMP/part" --require-all >"$TMP/req.out" 2>&1
rc=$?
check "--require-all fails on it" '[ $rc = 1 ] && grep -qE "^FAIL: 1 baseline runs? missing from the current results" "$TMP/req.out"'

one_line_error() {  # NAME PATTERN ARGS...
  local name=$1 pattern=$2
  shift 2
  "$ELDRSIM" compare "$@" >/dev/null 2>"$TMP/err"
  local rc=$?
  check "$name: exit 2, one line" '[ $rc = 2 ] && [ $(wc -l <"$TMP/err") = 1 ] && grep -qF -- "$pattern" "$TMP/err"'
}
one_line_error "missing directory" "$TMP/nowhere: not a directory of results" "$TMP/base" "$TMP/nowhere"
mkdir -p "$TMP/empty"
one_line_error "no runs" "$TMP/empty: no runs" "$TMP/base" "$TMP/empty"
mkdir -p "$TMP/broken/cmp/router=eldr" && cp "$TMP/base/cmp/router=eldr/summary.json" "$TMP/broken/cmp/router=eldr/"
printf 'id,measured\n1,1\n' >"$TMP/broken/cmp/router=eldr/requests.csv"
one_line_error "a requests.csv that is not the run's" "requests.csv: does not match summary.json" "$TMP/base" "$TMP/broken"
# A summary without the checksums (written before them): the file's own checks still apply.
/usr/bin/python3 -c 'import json, sys; s = json.load(open(sys.argv[1])); del s["files"]; json.dump(s, open(sys.argv[1], "w"))' \
  "$TMP/broken/cmp/router=eldr/summary.json"
one_line_error "a requests.csv without tpot_ms" "requests.csv: tpot_ms: column missing" "$TMP/base" "$TMP/broken"

finish
