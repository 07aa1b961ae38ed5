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
check "the report directory follows the umask like every output (not mkdtemp's 0700)" \
  '[ "$(stat -c %a "$TMP/r/report")" = "$(printf "%o" $((0777 & ~0$(umask))))" ]'
: >"$TMP/home-is-a-file"  # no directory can be made under it, whoever runs the test
HOME="$TMP/home-is-a-file" XDG_CONFIG_HOME= MPLCONFIGDIR= "$ELDRSIM" report "$TMP/r" --out "$TMP/r-rohome" >"$TMP/rohome.out" 2>&1
rc=$?
check "with HOME unwritable: no matplotlib cache warning, the report written" \
  '[ $rc = 0 ] && ! grep -qi "matplotlib" "$TMP/rohome.out" && [ -s "$TMP/r-rohome/report.md" ]'
(trap '' XFSZ; ulimit -f 8; exec "$ELDRSIM" report "$TMP/r" --out "$TMP/r-full") >/dev/null 2>"$TMP/full.err"
rc=$?
check "a report that cannot be written (a file-size limit, as a full disk) names the report, in one line" \
  '[ $rc = 2 ] && [ "$(wc -l <"$TMP/full.err")" = 1 ] &&
   grep -q "^eldrsim: error: $TMP/r-full: cannot write the report: File too large" "$TMP/full.err" && [ ! -e "$TMP/r-full" ]'
check "figures: CDF, TPOT against rate, tau, scaling (PNG and SVG)" 'for f in tpot_cdf_60 tpot_vs_rate tau scaling; do [ -s "$TMP/r/report/$f.png" ] && [ -s "$TMP/r/report/$f.svg" ] || exit 1; done'
check "every image the report names exists" 'for f in $(grep -o "([a-z_0-9]*\.png)" "$TMP/r/report/report.md" | tr -d "()"); do [ -f "$TMP/r/report/$f" ] || exit 1; done'
check "main-study table: routers as columns" 'grep -q "^| model | workload | rate_rps | round_robin | eldr |$" "$TMP/r/report/report.md"'
check "html has the tables and images" '[ $(grep -o "<table>" "$TMP/r/report/report.html" | wc -l) -ge 5 ] && grep -q "<img src=\"tpot_vs_rate.png\"" "$TMP/r/report/report.html"'

"$ELDRSIM" sweep "$TMP/main.json" --out "$TMP/s" --seeds 2 -q
"$ELDRSIM" report "$TMP/s" --out "$TMP/s-report" >/dev/null 2>&1
rc=$?
check "with seeds: mean and 95% interval in the tables" '[ $rc = 0 ] && grep -q "| [0-9.]* \[[0-9.]*, [0-9.]*\] |" "$TMP/s-report/report.md"'
check "the report counts its sweeps in agreement (1 sweep)" \
  'grep -q "in 1 sweep (main)" "$TMP/s-report/report.md"'

mkdir -p "$TMP/empty"
"$ELDRSIM" report "$TMP/empty" >/dev/null 2>"$TMP/err"
rc=$?
check "no combined.csv: exit 2, one line" '[ $rc = 2 ] && [ $(wc -l <"$TMP/err") = 1 ] && grep -q "combined.csv: missing" "$TMP/err"'
printf 'sweep,point\nx,y\n' >"$TMP/empty/combined.csv"
/usr/bin/python3 analysis/report.py "$TMP/empty" >/dev/null 2>"$TMP/err"
rc=$?
check "a combined.csv without the columns: exit 2, one line" '[ $rc = 2 ] && [ $(wc -l <"$TMP/err") = 1 ] && grep -q "columns missing" "$TMP/err"'

# --- combined.csv read as `table` and `compare` read it: a cut file is one line, exit 2, never a
# report that silently lacks the cut point.
cp -r "$TMP/r" "$TMP/cut" && rm -rf "$TMP/cut/report"
head -c -25 "$TMP/r/combined.csv" >"$TMP/cut/combined.csv"
"$ELDRSIM" report "$TMP/cut" >/dev/null 2>"$TMP/err"
rc=$?
check "combined.csv cut mid-row: exit 2, one line" '[ $rc = 2 ] && [ $(wc -l <"$TMP/err") = 1 ] && grep -q "combined.csv: line [0-9]*: [0-9]* cells, the header has" "$TMP/err"'
head -c -2 "$TMP/r/combined.csv" >"$TMP/cut/combined.csv"
"$ELDRSIM" report "$TMP/cut" >/dev/null 2>"$TMP/err"
rc=$?
check "combined.csv cut in its last number: exit 2, one line" '[ $rc = 2 ] && [ $(wc -l <"$TMP/err") = 1 ] && grep -q "the last line has no end of line" "$TMP/err"'
head -n -1 "$TMP/r/combined.csv" >"$TMP/cut/combined.csv"
"$ELDRSIM" report "$TMP/cut" >/dev/null 2>"$TMP/err"
rc=$?
check "combined.csv without its last row: the point directories tell, exit 2" '[ $rc = 2 ] && [ $(wc -l <"$TMP/err") = 1 ] && grep -q "1 point with results missing from it" "$TMP/err"'
sed '2s/,[0-9.e+-]*,\([0-9.e+-]*\)$/,fast,\1/' "$TMP/r/combined.csv" >"$TMP/cut/combined.csv"
"$ELDRSIM" report "$TMP/cut" >/dev/null 2>"$TMP/err"
rc=$?
check "a metric that is not a number: exit 2, one line" '[ $rc = 2 ] && [ $(wc -l <"$TMP/err") = 1 ] && grep -q "combined.csv: line 2: distinct_experts_mean: not a number: .fast." "$TMP/err"'
check "no report directory was made for a bad combined.csv" '[ ! -e "$TMP/cut/report" ] && ! ls -a "$TMP/cut" | grep -q tmp'

# --- Special files and outputs.
mkdir -p "$TMP/fifo" && mkfifo "$TMP/fifo/combined.csv"
"$ELDRSIM" report "$TMP/fifo" >/dev/null 2>"$TMP/err"
rc=$?
check "combined.csv a FIFO: exit 2, not 'missing'" '[ $rc = 2 ] && [ $(wc -l <"$TMP/err") = 1 ] && grep -q "is not a regular file (a device, FIFO or socket)" "$TMP/err"'
timeout 20 /usr/bin/python3 analysis/report.py "$TMP/fifo" >/dev/null 2>"$TMP/err"
rc=$?
check "report.py on a FIFO: exit 2, no hang" '[ $rc = 2 ] && [ $(wc -l <"$TMP/err") = 1 ] && grep -q "is not a regular file" "$TMP/err"'
touch "$TMP/plainfile"
"$ELDRSIM" report "$TMP/r" --out "$TMP/plainfile" >/dev/null 2>"$TMP/err"
rc=$?
check "--out an existing file: exit 2, one line" '[ $rc = 2 ] && [ $(wc -l <"$TMP/err") = 1 ] && grep -q "plainfile: --out: exists and is not a directory" "$TMP/err"'
"$ELDRSIM" report "$TMP/r" --out "$TMP/plainfile/rep" >/dev/null 2>"$TMP/err"
rc=$?
check "--out under a file: exit 2, one line" '[ $rc = 2 ] && [ $(wc -l <"$TMP/err") = 1 ] && grep -q "plainfile/rep: cannot write the report here (.*plainfile is not a directory)" "$TMP/err"'

# --- Points are never merged: a grid key the section does not plot against gets its own rows (here
# tau in the main study, and a key without a standard column in the tau sweep); with seeds the text
# above each table says the cells are means.
cat >"$TMP/xmain.json" <<JSON
{ "name": "main", "base": "configs/default.json", "set": { $SMALL },
  "grid": { "router": ["round_robin", "eldr"], "workload.rate_rps": [20, 60], "eldr.tau": [0, 0.2] } }
JSON
cat >"$TMP/xtau.json" <<JSON
{ "name": "tau", "base": "configs/default.json", "set": { $SMALL, "router": "eldr" },
  "grid": { "eldr.tau": [0, 0.2], "eldr.mask_pairs": [2000, 3000] } }
JSON
echo '{ "include": ["xmain.json", "xtau.json"] }' >"$TMP/xall.json"
"$ELDRSIM" sweep "$TMP/xall.json" --out "$TMP/x" -q
"$ELDRSIM" report "$TMP/x" >/dev/null 2>"$TMP/err"
rc=$?
X="$TMP/x/report/report.md"
check "main study: tau has a column, each tau its rows" '[ $rc = 0 ] && grep -q "^| model | workload | rate_rps | tau | round_robin | eldr |$" "$X" && [ $(grep -c "^| qwen3-30b-a3b | task | 20.00 | 0.2 | " "$X") -ge 2 ]'
check "main study at one rate: tau has a column" 'grep -q "^| model | workload | tau | round_robin | eldr |$" "$X"'
check "tau sweep: the extra grid key eldr.mask_pairs has a column" 'grep -q "^| model | workload | eldr.mask_pairs | tau |" "$X" || grep -q "^| model | workload | eldr.mask_pairs |" "$X"'
check "the report says which keys got rows of their own" 'grep -q "Points also differ in tau" "$X" && grep -q "Points also differ in eldr.mask_pairs" "$X"'
"$ELDRSIM" sweep "$TMP/xmain.json" --out "$TMP/xs" --seeds 2 -q
"$ELDRSIM" report "$TMP/xs" >/dev/null 2>"$TMP/err"
rc=$?
check "with seeds: every table of the main study says it gives means" '[ $rc = 0 ] && [ $(grep -c "^\*.*Mean of 2 seeds" "$TMP/xs/report/report.md") = 4 ] && [ $(grep -c "^\*" "$TMP/xs/report/report.md") = 4 ]'

# --- Quoted fields (a label with a comma, a quote, a newline) read as CSV, and shown on one line.
/usr/bin/python3 - "$TMP/r/combined.csv" "$TMP/q" <<'PYEOF'
import csv, os, sys
rows = list(csv.reader(open(sys.argv[1], newline="")))
h = rows[0]
os.makedirs(sys.argv[2])
with open(os.path.join(sys.argv[2], "combined.csv"), "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(h)
    for i, r in enumerate(r for r in rows[1:] if r[0] == "scaling"):
        r[0] = "odd, \"sweep\"\nname"
        w.writerow(r)
PYEOF
"$ELDRSIM" report "$TMP/q" >/dev/null 2>"$TMP/err"
rc=$?
check "a quoted sweep name with a comma, a quote and a newline" '[ $rc = 0 ] && grep -q "^## Sweep odd, \"sweep\" name" "$TMP/q/report/report.md"'

finish
