#!/usr/bin/env bash
# `eldrsim report`: a small sweep laid out as configs/paper/ (sweeps main, tau, scaling) gives
# report.md and report.html whose figures all exist; seeds add intervals; bad input exits 2.
# Usage: report.sh PATH/TO/eldrsim   (run from the project root)
set -u
ELDRSIM=${1:?usage: report.sh PATH/TO/eldrsim}
[ -f configs/default.json ] || { echo "run from the project root"; exit 1; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/eldr-report.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
. "$(dirname "$0")/lib.sh"

SMALL='"workload.measured_requests": 120, "workload.warmup_requests": 0, "workload.calibration_requests": 300, "eldr.mask_pairs": 3000'
cat >"$TMP/main.json" <<JSON
{ "name": "main", "base": "configs/default.json", "set": { $SMALL },
  "grid": { "router": ["round_robin", "eldr"], "workload.rate_rps": [20, 60] } }
JSON
cat >"$TMP/tau.json" <<JSON
{ "name": "tau", "base": "configs/default.json", "set": { $SMALL, "router": "eldr" }, "grid": { "eldr.tau": [0, 0.2] } }
JSON
cat >"$TMP/scaling.json" <<JSON
{ "name": "scaling", "base": "configs/default.json", "set": { $SMALL },
  "grid": { "topology.decode": [{ "instances": 8, "nodes": [1] }, { "instances": 16, "nodes": [1, 2] }], "router": ["jsq"] } }
JSON
echo '{ "include": ["main.json", "tau.json", "scaling.json"] }' >"$TMP/all.json"
"$ELDRSIM" sweep "$TMP/all.json" --out "$TMP/r" -q
"$ELDRSIM" report "$TMP/r" >"$TMP/report.out" 2>&1
rc=$?
check "report exits 0" '[ $rc = 0 ] && grep -q "report.md and report.html" "$TMP/report.out"'
check "report.md and report.html written" '[ -s "$TMP/r/report/report.md" ] && [ -s "$TMP/r/report/report.html" ]'
check "figures: CDF, TPOT against rate, tau, scaling (PNG and SVG)" 'for f in tpot_cdf_60 tpot_vs_rate tau scaling; do [ -s "$TMP/r/report/$f.png" ] && [ -s "$TMP/r/report/$f.svg" ] || exit 1; done'
check "every image the report names exists" 'for f in $(grep -o "([a-z_0-9]*\.png)" "$TMP/r/report/report.md" | tr -d "()"); do [ -f "$TMP/r/report/$f" ] || exit 1; done'
check "main-study table: routers as columns" 'grep -q "^| model | workload | rate_rps | round_robin | eldr |$" "$TMP/r/report/report.md"'
check "html has the tables and images" '[ $(grep -o "<table>" "$TMP/r/report/report.html" | wc -l) -ge 5 ] && grep -q "<img src=\"tpot_vs_rate.png\"" "$TMP/r/report/report.html"'

"$ELDRSIM" sweep "$TMP/main.json" --out "$TMP/s" --seeds 2 -q
"$ELDRSIM" report "$TMP/s" --out "$TMP/s-report" >/dev/null 2>&1
rc=$?
check "with seeds: mean and 95% interval in the tables" '[ $rc = 0 ] && grep -q "| [0-9.]* \[[0-9.]*, [0-9.]*\] |" "$TMP/s-report/report.md"'

mkdir -p "$TMP/empty"
"$ELDRSIM" report "$TMP/empty" >/dev/null 2>"$TMP/err"
rc=$?
check "no combined.csv: exit 2, one line" '[ $rc = 2 ] && [ $(wc -l <"$TMP/err") = 1 ] && grep -q "combined.csv: missing" "$TMP/err"'
printf 'sweep,point\nx,y\n' >"$TMP/empty/combined.csv"
/usr/bin/python3 analysis/report.py "$TMP/empty" >/dev/null 2>"$TMP/err"
rc=$?
check "a combined.csv without the columns: exit 2, one line" '[ $rc = 2 ] && [ $(wc -l <"$TMP/err") = 1 ] && grep -q "columns missing" "$TMP/err"'

finish
