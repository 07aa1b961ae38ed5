#!/usr/bin/env bash
# `eldrsim report` on a sweep over a numeric grid key without a column of its own: TPOT P50 and P99
# against it (a PNG the report names), a table with a row per value, and the sentence saying where P50
# stops improving and P99 regresses, checked on a sweep and on a hand-made combined.csv whose answers
# are known; a text key keeps today's table; bad input is one line, exit 2.
# Usage: report_numeric.sh PATH/TO/eldrsim   (run from the project root)
set -u
ELDRSIM=${1:?usage: report_numeric.sh PATH/TO/eldrsim}
[ -f configs/default.json ] || { echo "run from the project root"; exit 1; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/eldr-report-numeric.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
. "$(dirname "$0")/lib.sh"

# --- A real sweep: serving.max_decode_seqs has no standard column (it is an extra key of combined.csv).
cat >"$TMP/batch.json" <<JSON
{ "name": "batch", "base": "configs/default.json",
  "set": { "workload.measured_requests": 120, "workload.warmup_requests": 0, "workload.calibration_requests": 300,
           "workload.rate_rps": 20, "router": "jsq" },
  "grid": { "serving.max_decode_seqs": [4, 16, 64] } }
JSON
"$ELDRSIM" sweep "$TMP/batch.json" --out "$TMP/b" -q
"$ELDRSIM" report "$TMP/b" >/dev/null 2>"$TMP/err"
rc=$?
B="$TMP/b/report"
check "report exits 0" '[ $rc = 0 ] && [ ! -s "$TMP/err" ]'
check "the plot against the key is a PNG (and an SVG)" '[ "$(head -c 8 "$B/tpot_vs_serving.max_decode_seqs.png" | od -An -tx1 | tr -d " \n")" = 89504e470d0a1a0a ] && [ -s "$B/tpot_vs_serving.max_decode_seqs.svg" ]'
check "report.md and report.html name it" 'grep -qF "(tpot_vs_serving.max_decode_seqs.png)" "$B/report.md" && grep -qF "<img src=\"tpot_vs_serving.max_decode_seqs.png\"" "$B/report.html"'
check "its table: one row per value" 'grep -q "^| serving.max_decode_seqs | TPOT P50 (ms) | TPOT P99 (ms) |$" "$B/report.md" && [ $(grep -cE "^\| (4|16|64) \| [0-9.]+ \| [0-9.]+ \|$" "$B/report.md") = 3 ]'
check "the sentence and the rules behind it" 'grep -qE "^P50 stops improving at serving.max_decode_seqs = (4|16|64)" "$B/report.md" && grep -qF "within 1% of the line" "$B/report.md" && grep -qF "more than 5% above the lowest P99 at smaller values" "$B/report.md" && grep -qF "P50 stops improving at serving.max_decode_seqs = " "$B/report.html"'

# --- A hand-made combined.csv: two seeds per point, whose means (not either seed alone) put the knees
# at known values. Line eldr: P50 means 10 8 6 5.95 5.99 (best 5.95; 6 is within 1%: stops at 2);
# P99 means 30 31 24 26 27 (31 < 30 x 1.05; 26 > 24 x 1.05: regresses from 3). Seed 2 alone would say
# P50 stops at 3, seed 1 alone that P99 never regresses. Line jsq: P50 falls to x = 4, P99 flat.
K=composed.scorers.expert-locality-scorer.weight
mkdir -p "$TMP/h"
/usr/bin/python3 - "$TMP/h/combined.csv" "$K" <<'PYEOF'
import sys
path, key = sys.argv[1], sys.argv[2]
xs = ["0", "0.5", "2", "3", "4"]  # 0.5, not 1: a value that is not an integer
lines = {"eldr": ([(9.5, 10.5), (7.5, 8.5), (5, 7), (5.45, 6.45), (5.49, 6.49)],
                  [(29, 31), (30, 32), (23, 25), (24, 28), (24, 30)]),
         "jsq": ([(20, 20), (18, 18), (16, 16), (14, 14), (12, 12)],
                 [(40, 40), (40, 40), (40, 40), (40, 40), (40, 40)])}
with open(path, "w") as f:
    f.write(f"sweep,point,config,model,workload,router,rate_rps,prefill,decode,tau,kmeans,variant,seed,{key},"
            "requests,unfinished,tpot_p50_ms,tpot_p99_ms\n")
    for router, (p50, p99) in lines.items():
        for x, a, b in zip(xs, p50, p99):
            for seed in (1, 2):
                f.write(f"weights,{router}_{x}_{seed},configs/default.json,qwen3-30b-a3b,task,{router},60,8,16,,,,"
                        f"{seed},{x},100,0,{a[seed - 1]},{b[seed - 1]}\n")
PYEOF
"$ELDRSIM" report "$TMP/h" >/dev/null 2>"$TMP/err"
rc=$?
H="$TMP/h/report/report.md"
check "hand-made: report exits 0" '[ $rc = 0 ] && [ ! -s "$TMP/err" ]'
check "hand-made: P50 stops improving at 2, P99 regresses from 3 (means of the seeds)" 'grep -qF "router=eldr: P50 stops improving at $K = 2 and P99 regresses from $K = 3: stay below 3; 2 already has the best P50." "$H"'
check "hand-made: a line whose P99 never regresses" 'grep -qF "router=jsq: P50 stops improving at $K = 4 and P99 does not regress up to $K = 4, the largest value swept." "$H"'
check "hand-made: table rows per line and value, seed means" 'grep -qF "| router | $K | TPOT P50 (ms) | TPOT P99 (ms) |" "$H" && grep -qF "| eldr | 3 | 5.95 | 26.00 |" "$H" && grep -qF "| eldr | 0.5 | 8.00 | 31.00 |" "$H" && [ $(grep -cE "^\| (eldr|jsq) \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \|$" "$H") = 10 ]'
check "hand-made: the figure says it plots means of 2 seeds" 'grep -qF "*TPOT P50 and P99 (ms) against $K. Mean of 2 seeds.*" "$H" && [ -s "$TMP/h/report/tpot_vs_$K.png" ]'

# P99 regressing before P50 stops improving (20 30 31 against 10 8 7), and a line without TPOT values.
mkdir -p "$TMP/e"
{
  echo "sweep,point,config,model,workload,router,rate_rps,prefill,decode,tau,kmeans,variant,seed,w,requests,tpot_p50_ms,tpot_p99_ms"
  for p in 1,10,20 2,8,30 3,7,31; do echo "s,eldr${p%%,*},c,m,task,eldr,60,8,16,,,,1,${p%%,*},100,${p#*,}"; done
  for x in 1 2 3; do echo "s,jsq$x,c,m,task,jsq,60,8,16,,,,1,$x,100,,"; done
} >"$TMP/e/combined.csv"
"$ELDRSIM" report "$TMP/e" >/dev/null 2>&1
rc=$?
check "P99 regresses first: the sentence says so" '[ $rc = 0 ] && grep -qF "router=eldr: P50 stops improving at w = 3 but P99 regresses from w = 2, before that" "$TMP/e/report/report.md"'
check "a line without TPOT values says so" 'grep -qF "router=jsq: no TPOT values in combined.csv." "$TMP/e/report/report.md"'

# --- A key that is not a number everywhere keeps today's table and gets no plot: text, JSON true, an
# empty cell, "inf".
for bad in auto true "" inf; do
  rm -rf "$TMP/t" && mkdir -p "$TMP/t"
  awk -v bad="$bad" -F, 'BEGIN { OFS = "," } NR == 2 { $14 = bad } { print }' "$TMP/h/combined.csv" >"$TMP/t/combined.csv"
  "$ELDRSIM" report "$TMP/t" >/dev/null 2>&1
  rc=$?
  check "a key with the value '$bad' in one row: today's table, no plot" '[ $rc = 0 ] && ! grep -q "TPOT against" "$TMP/t/report/report.md" && ! ls "$TMP/t/report" | grep -q tpot_vs_ && grep -q "^| point | router | $K | seed |" "$TMP/t/report/report.md"'
done

# --- Bad input: one line, exit 2, no report.
mkdir -p "$TMP/d"
awk -F, 'BEGIN { OFS = "," } NR == 2 || NR == 3 { print; $2 = $2 "_again"; $14 = "0.0" } { print }' "$TMP/h/combined.csv" >"$TMP/d/combined.csv"
expect_error "two points at one value of the key (0 and 0.0): exit 2, one line" "$K: 0 and 0.0 are the same number: give each value once in the sweep's grid" -- report "$TMP/d"
awk -F, 'BEGIN { OFS = "," } NR == 2 { print; $2 = $2 "_again" } { print }' "$TMP/h/combined.csv" >"$TMP/d/combined.csv"
expect_error "two points that differ in no key: exit 2, one line" "differ in no key (router, $K, seed)" -- report "$TMP/d"
check "no report directory for it" '[ ! -e "$TMP/d/report" ] && ! ls -a "$TMP/d" | grep -q tmp'
sed '2s/,[0-9.]*,[0-9.]*$/,fast,30/' "$TMP/h/combined.csv" >"$TMP/d/combined.csv"
expect_error "a TPOT that is not a number: exit 2, one line" "combined.csv: line 2: tpot_p50_ms: not a number" -- report "$TMP/d"

finish
