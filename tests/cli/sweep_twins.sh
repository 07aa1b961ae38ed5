#!/usr/bin/env bash
# `eldrsim sweep` runs each distinct simulation once: points of the same resolved config and inputs
# (two spellings of one value, the same point in two sub-sweeps) are one run, whose result files the
# others take, byte for byte, with a point.json of their own naming the point that ran; a point that
# differs by one key runs on its own. A point whose twin is done (an earlier sweep, another array
# task) takes its results without running; a twin that fails fails both.
# Usage: sweep_twins.sh PATH/TO/eldrsim   (run from the project root)
set -u
ELDRSIM=${1:?usage: sweep_twins.sh PATH/TO/eldrsim}
[ -f configs/default.json ] || { echo "run from the project root"; exit 1; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/eldr-twins.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
. "$(dirname "$0")/lib.sh"

SMALL='"workload.measured_requests": 150, "workload.warmup_requests": 0, "workload.calibration_requests": 300, "eldr.mask_pairs": 3000'
# rate 20 and 20.0: one run spelled twice; 40: another run. A sub-sweep repeats rate 20 as its `set`.
cat >"$TMP/one.json" <<JSON
{ "name": "one", "base": "configs/default.json", "set": { $SMALL, "router": "eldr" },
  "grid": { "workload.rate_rps": [20, 20.0, 40] } }
JSON
cat >"$TMP/two.json" <<JSON
{ "name": "two", "base": "configs/default.json", "set": { $SMALL, "router": "eldr", "workload.rate_rps": 20 } }
JSON
cat >"$TMP/twins.json" <<JSON
{ "include": ["one.json", "two.json"] }
JSON
A="$TMP/a/one/rate_rps=20" B="$TMP/a/one/rate_rps=20.0" C="$TMP/a/one/rate_rps=40" D="$TMP/a/two/base"
same_results() { for f in summary.json requests.csv windows.csv run.log; do cmp -s "$1/$f" "$2/$f" || return 1; done; }

"$ELDRSIM" sweep "$TMP/twins.json" --out "$TMP/a" -j 2 2>"$TMP/a.err"
rc=$?
check "the sweep finishes: 4 points (exit 0)" '[ $rc = 0 ] && [ $(wc -l <"$TMP/a/combined.csv") = 5 ]'
check "it says 2 of the 4 points are the same run as another, and runs 2" \
  'grep -q "2 of 4 points are the same run as another" "$TMP/a.err" && grep -q "sweep: ran 2 points in" "$TMP/a.err"'
check "the twins (two spellings, another sub-sweep) have byte-identical result files" 'same_results "$A" "$B" && same_results "$A" "$D"'
check "the point of another rate has other results" '! cmp -s "$A/summary.json" "$C/summary.json"'
check "each twin's point.json is its own and names the point that ran" \
  'grep -q "\"same_run_as\": \"one/rate_rps=20\"" "$B/point.json" "$D/point.json" && grep -q "\"point\": \"rate_rps=20.0\"" "$B/point.json" && ! grep -q same_run_as "$A/point.json" "$C/point.json"'
check "their combined.csv rows are the same but for the sweep and point names" \
  '[ $(cut -d, -f3- "$TMP/a/combined.csv" | sort -u | wc -l) = 3 ]'
check "no temporaries left" '[ -z "$(find "$TMP/a" -name ".tmp.*")" ]'

# The same results as each point run on its own (--point runs one point; 1: rate_rps=20.0).
"$ELDRSIM" sweep "$TMP/one.json" --out "$TMP/p" --point 1 -q
# (summary.json names the fit file, under its OUT.)
check "the twin's results equal its own run's (--point, alone)" \
  'cmp -s "$B/requests.csv" "$TMP/p/one/rate_rps=20.0/requests.csv" && cmp -s "$B/windows.csv" "$TMP/p/one/rate_rps=20.0/windows.csv" && cmp -s "$B/summary.json" <(sed "s#$TMP/p/#$TMP/a/#" "$TMP/p/one/rate_rps=20.0/summary.json")'
# A Slurm array: task 0 runs rate_rps=20; task 1 (its twin) then takes its results, running nothing.
"$ELDRSIM" sweep "$TMP/one.json" --out "$TMP/q" --point 0 -q
"$ELDRSIM" sweep "$TMP/one.json" --out "$TMP/q" --point 1 2>"$TMP/q.err"
check "an array task whose twin is done takes its results without running" \
  'grep -q "rate_rps=20.0 (the same run as one/rate_rps=20)" "$TMP/q.err" && ! grep -q "sweep: ran" "$TMP/q.err" && same_results "$TMP/q/one/rate_rps=20" "$TMP/q/one/rate_rps=20.0"'

# Resume: a sweep stopped after one twin ran (its other twin's directory not there) fills it, runs nothing again.
rm -rf "$B" "$D"
stamp=$(stat -c %i:%Y "$A/summary.json")
"$ELDRSIM" sweep "$TMP/twins.json" --out "$TMP/a" -j 2 2>"$TMP/r.err"
rc=$?
check "the resumed sweep fills both twins from the done point (exit 0), running nothing" \
  '[ $rc = 0 ] && grep -q "2 of 4 points already done" "$TMP/r.err" && ! grep -q "sweep: ran" "$TMP/r.err" && [ "$(stat -c %i:%Y "$A/summary.json")" = "$stamp" ]'
check "the filled twins are byte-identical to the point that ran" 'same_results "$A" "$B" && same_results "$A" "$D"'
"$ELDRSIM" sweep "$TMP/twins.json" --out "$TMP/fresh" -j 2 -q
check "the resumed results equal an uninterrupted sweep's" 'cmp -s "$TMP/a/combined.csv" "$TMP/fresh/combined.csv"'

# --no-fit: the twins still run once (each run fits on its own).
"$ELDRSIM" sweep "$TMP/twins.json" --out "$TMP/n" -j 2 --no-fit 2>"$TMP/n.err"
check "--no-fit: 2 runs, the twins byte-identical" \
  'grep -q "sweep: ran 2 points in" "$TMP/n.err" && same_results "$TMP/n/one/rate_rps=20" "$TMP/n/one/rate_rps=20.0"'

# --seeds: each seed its own run; the twins share one per seed.
"$ELDRSIM" sweep "$TMP/one.json" --out "$TMP/s" --seeds 2 -j 2 2>"$TMP/s.err"
check "--seeds 2: 6 points, 4 runs, twins per seed identical, seeds differ" \
  'grep -q "sweep: ran 4 points in" "$TMP/s.err" && same_results "$TMP/s/one/rate_rps=20__seed=2" "$TMP/s/one/rate_rps=20.0__seed=2" && ! cmp -s "$TMP/s/one/rate_rps=20__seed=1/summary.json" "$TMP/s/one/rate_rps=20__seed=2/summary.json"'

# Keys that are no input of ELDR's fit: a two-point grid of KEY fits once, and its results are those
# of fitting in each run (the points differ: not twins). one_fit NAME KEY EXTRA_SET
one_fit() {
  local N=$1
  cat >"$TMP/$1.json" <<JSON
{ "name": "$1", "base": "configs/default.json", "set": { $SMALL, "router": "eldr"$3 },
  "grid": { "$2": [false, true] } }
JSON
  "$ELDRSIM" sweep "$TMP/$1.json" --out "$TMP/$1" -j 2 2>"$TMP/$1.err"
  "$ELDRSIM" sweep "$TMP/$1.json" --out "$TMP/${1}0" -j 2 -q --no-fit
  check "$2 does not split ELDR's fit: 1 fit, the results of fitting in each run" \
    'grep -q "fitting ELDR 1 time for 2 points" "$TMP/$N.err" && grep -q "sweep: ran 2 points" "$TMP/$N.err" && cmp -s "$TMP/$N/combined.csv" "$TMP/${N}0/combined.csv" && [ "$(ls -d "$TMP/${N}0/$N"/*/ | wc -l)" = 2 ] && (for d in "$TMP/${N}0/$N"/*/; do cmp -s "$d/requests.csv" "$TMP/$N/$N/$(basename "$d")/requests.csv" || exit 1; done)'
}
# The serving side's prefix caches; ELDR's signature cache (only the online profiles of cached blocks).
one_fit pc serving.prefix_cache ""
one_fit sc eldr.signature_cache ', "serving.prefix_cache": true'

# A failing twin fails both: a lengths file that the run rejects.
printf 'not,a,lengths,file\n' >"$TMP/bad.csv"
cat >"$TMP/fail.json" <<JSON
{ "name": "fail", "base": "configs/default.json", "set": { $SMALL, "workload.lengths_file": "$TMP/bad.csv" },
  "grid": { "workload.rate_rps": [20, 20.0] } }
JSON
"$ELDRSIM" sweep "$TMP/fail.json" --out "$TMP/f" -j 2 -q 2>"$TMP/f.err"
rc=$?
check "a twin whose run fails fails too (exit 1), its log naming the run that failed" \
  '[ $rc = 1 ] && grep -q "rate_rps=20 FAILED (exit 2)" "$TMP/f.err" && grep -q "rate_rps=20.0 FAILED: the same run as fail/rate_rps=20, which failed" "$TMP/f.err" && grep -q "^not run: the same run as fail/rate_rps=20" "$TMP/f/fail/rate_rps=20.0.failed.log" && [ -z "$(find "$TMP/f/fail" -mindepth 1 -type d)" ]'

echo "$pass passed, $failures failed"
[ "$failures" = 0 ]
