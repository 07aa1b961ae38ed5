#!/usr/bin/env bash
# `eldrsim sweep`: a small grid run in parallel and serially gives byte-identical combined CSVs; a rerun
# redoes nothing; a sweep killed with kill -9 mid-way resumes without redoing finished points and
# without reading half-written ones; seeds give mean and 95% intervals; --point/--merge (what a Slurm
# array runs); --emit-slurm scripts; bad sweep files exit 2 with one line naming file and field.
# Usage: sweep.sh PATH/TO/eldrsim   (run from the project root)
set -u
ELDRSIM=${1:?usage: sweep.sh PATH/TO/eldrsim}
[ -f configs/default.json ] || { echo "run from the project root"; exit 1; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/eldr-sweep.XXXXXX")
SWEEP_PID=
cleanup() { [ -n "$SWEEP_PID" ] && kill -9 "$SWEEP_PID" 2>/dev/null; rm -rf "$TMP"; }
trap cleanup EXIT
. "$(dirname "$0")/lib.sh"

# Small points: 150 measured requests, no warm-up, a small ELDR fit.
SMALL='"workload.measured_requests": 150, "workload.warmup_requests": 0, "workload.calibration_requests": 300, "eldr.mask_pairs": 3000'
cat >"$TMP/small.json" <<JSON
{ "name": "small", "base": "configs/default.json", "set": { $SMALL },
  "grid": { "router": ["round_robin", "eldr"], "workload.rate_rps": [20, 40] } }
JSON

"$ELDRSIM" sweep "$TMP/small.json" --out "$TMP/a" -j 2 2>"$TMP/a.err"
rc=$?
check "sweep runs 4 points (exit 0)" '[ $rc = 0 ] && [ $(ls -d "$TMP"/a/small/*=* | wc -l) = 4 ]'
check "combined.csv: a header and one row per point" '[ $(wc -l <"$TMP/a/combined.csv") = 5 ] && head -1 "$TMP/a/combined.csv" | grep -q "^sweep,point,config,model,workload,router,rate_rps,.*tpot_p50_ms,tpot_p95_ms,tpot_p99_ms,.*ttft_p50_ms,.*throughput_tok_s,distinct_experts_mean"'
check "point directory names from the parameters" '[ -f "$TMP/a/small/router=eldr__rate_rps=40/summary.json" ] && [ -f "$TMP/a/small/router=eldr__rate_rps=40/point.json" ]'
check "progress lines (done / total, ETA)" 'grep -q "sweep: 4/4 done.*ETA" "$TMP/a.err"'
check "ELDR fitted once for both eldr points" 'grep -q "fitting ELDR 1 time for 4 points" "$TMP/a.err" && [ $(ls "$TMP"/a/.eldr-fits/*.json | wc -l) = 1 ]'
check "no temporaries left" '[ -z "$(find "$TMP/a" -name ".tmp.*")" ]'

"$ELDRSIM" sweep "$TMP/small.json" --out "$TMP/b" -j 1 -q
check "-j 1 gives a byte-identical combined.csv" 'cmp -s "$TMP/a/combined.csv" "$TMP/b/combined.csv"'
"$ELDRSIM" sweep "$TMP/small.json" --out "$TMP/c" -j 2 -q --no-fit
check "shared ELDR fits give the same results as fits on the fly" 'cmp -s "$TMP/a/combined.csv" "$TMP/c/combined.csv" && cmp -s "$TMP/a/small/router=eldr__rate_rps=20/requests.csv" "$TMP/c/small/router=eldr__rate_rps=20/requests.csv"'
# A composition with the expert-locality scorer shares the fit too (its composed section is the run's,
# not the fit's): once for a weight grid, with the results of fits on the fly.
cat >"$TMP/cw.json" <<JSON
{ "name": "cw", "base": "configs/default.json",
  "set": { $SMALL, "router": "composed", "composed.scheduler": "configs/scheduler/llm-d-decode-expert-locality.yaml" },
  "grid": { "composed.scorers.expert-locality-scorer.weight": [0, 1, 2] } }
JSON
"$ELDRSIM" sweep "$TMP/cw.json" --out "$TMP/cw" -j 2 2>"$TMP/cw.err"
"$ELDRSIM" sweep "$TMP/cw.json" --out "$TMP/cw-nofit" -j 2 -q --no-fit
check "a composition with the expert-locality scorer: one shared fit for its weight grid, same results" \
  'grep -q "fitting ELDR 1 time for 3 points" "$TMP/cw.err" && [ $(ls "$TMP"/cw/.eldr-fits/*.json | wc -l) = 1 ] && \
   cmp -s "$TMP/cw/combined.csv" "$TMP/cw-nofit/combined.csv" && \
   cmp -s "$TMP/cw/cw/weight=1/requests.csv" \
     "$TMP/cw-nofit/cw/weight=1/requests.csv"'

# The gate variants' values, drawn once per palette by the fits and points that share a routing
# source (kept beside it in OUT/.routing-cache@...): each point equals the same point run alone.
cat >"$TMP/gates.json" <<JSON
{ "name": "gates", "base": "configs/default.json", "set": { $SMALL, "router": "eldr" },
  "grid": { "eldr.variant": ["gate_prob", "gate_score"], "workload.rate_rps": [20, 40] } }
JSON
"$ELDRSIM" sweep "$TMP/gates.json" --out "$TMP/gates" -j 2 -q
same=1
for v in gate_prob gate_score; do
  "$ELDRSIM" run configs/default.json --set "eldr.variant=$v" --set router=eldr --set workload.rate_rps=40 \
    --requests 150 --set workload.warmup_requests=0 --set workload.calibration_requests=300 \
    --set eldr.mask_pairs=3000 -q --out "$TMP/gates-alone-$v" 2>/dev/null
  cmp -s "$TMP/gates-alone-$v/requests.csv" "$TMP/gates/gates/variant=${v}__rate_rps=40/requests.csv" || same=0
done
check "gate variants: a point in a sweep (shared fits and gate values) equals the point run alone" \
  '[ $same = 1 ] && [ $(ls -d "$TMP"/gates/gates/*=* | wc -l) = 4 ] && [ -z "$(ls -A "$TMP/gates" | grep routing-cache)" ]'

# Rerun: everything is done, nothing is run again.
stamp() { stat -c %i:%Y "$TMP/a/small/$1/summary.json"; }
before=$(stamp "router=eldr__rate_rps=20")
"$ELDRSIM" sweep "$TMP/small.json" --out "$TMP/a" -j 2 2>"$TMP/rerun.err"
rc=$?
check "a rerun skips every finished point" '[ $rc = 0 ] && grep -q "4 of 4 points already done" "$TMP/rerun.err" && ! grep -q "fitting ELDR" "$TMP/rerun.err" && [ "$(stamp "router=eldr__rate_rps=20")" = "$before" ]'
check "a rerun writes the same combined.csv" 'cmp -s "$TMP/a/combined.csv" "$TMP/b/combined.csv"'

# A shared fit damaged with its JSON intact (one centroid value changed) fails its checksum: the
# sweep fits again, with a note, and the redone point's results are those of the intact fit.
cp -r "$TMP/a" "$TMP/f"
/usr/bin/python3 - "$TMP"/f/.eldr-fits/*.json <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
j["centroids"][0][0] += 0.5
open(sys.argv[1], "w").write(json.dumps(j, separators=(",", ":")) + "\n")
PY
cp "$TMP"/f/.eldr-fits/*.json "$TMP/damaged.json"
rm "$TMP/f/small/router=eldr__rate_rps=20/summary.json"
"$ELDRSIM" sweep "$TMP/small.json" --out "$TMP/f" -j 2 -q 2>"$TMP/f.err"
rc=$?
check "a damaged shared fit is fitted again, with a note (even under -q)" \
  '[ $rc = 0 ] && grep -q "sweep: fitting ELDR again: .*fnv1a64: does not match" "$TMP/f.err"'
check "... and the point's results are the intact fit's" \
  'cmp -s "$TMP/a/small/router=eldr__rate_rps=20/requests.csv" "$TMP/f/small/router=eldr__rate_rps=20/requests.csv"'
expect_error "a damaged model file given to run is one line" "fnv1a64" "fit again" -- \
  run configs/default.json --router eldr --requests 20 --set workload.warmup_requests=0 -q --out "$TMP/fx" \
  --set eldr.model_file="$TMP/damaged.json"

# A changed point (another --set) is not taken for the old one: its directory is redone.
"$ELDRSIM" sweep "$TMP/small.json" --out "$TMP/b" -j 2 -q --set workload.output_tokens=256
check "changed parameters redo the points" '! cmp -s "$TMP/a/combined.csv" "$TMP/b/combined.csv" && grep -q "workload.output_tokens" "$TMP/b/small/router=eldr__rate_rps=20/point.json"'

# kill -9 mid-way: 8 points, one at a time; kill once two are in place.
cat >"$TMP/kill.json" <<JSON
{ "name": "kill", "base": "configs/default.json", "set": { $SMALL },
  "grid": { "router": ["round_robin", "jsq", "p2c", "random"], "workload.rate_rps": [20, 40] } }
JSON
"$ELDRSIM" sweep "$TMP/kill.json" --out "$TMP/k" -j 1 -q &
SWEEP_PID=$!
for _ in $(seq 1 600); do   # at most 60 s: a progress condition, not a timing
  n=$(ls -d "$TMP"/k/kill/*=* 2>/dev/null | wc -l)
  [ "$n" -ge 2 ] && break
  kill -0 "$SWEEP_PID" 2>/dev/null || break
  sleep 0.1
done
kill -9 "$SWEEP_PID" 2>/dev/null
wait "$SWEEP_PID" 2>/dev/null
SWEEP_PID=
done_before=$(ls -d "$TMP"/k/kill/*=* 2>/dev/null | wc -l)
check "the kill came mid-way ($done_before of 8 points done)" '[ "$done_before" -ge 2 ] && [ "$done_before" -lt 8 ]'
check "every point directory is complete (summary, requests, point.json)" 'for d in "$TMP"/k/kill/*=*; do [ -f "$d/summary.json" ] && [ -f "$d/requests.csv" ] && [ -f "$d/point.json" ] || exit 1; done'
# A half-written result in a leftover temporary directory must not be read: plant a bogus one.
first=$(ls -d "$TMP"/k/kill/*=* | head -1)
bogus="$TMP/k/kill/.tmp.$(basename "$first")@$(uname -n)@999999"
mkdir -p "$bogus"
echo '{"bogus": true' >"$bogus/summary.json"
declare -A stamps
for d in "$TMP"/k/kill/*=*; do stamps[$d]=$(stat -c %i:%Y "$d/summary.json"); done
"$ELDRSIM" sweep "$TMP/kill.json" --out "$TMP/k" -j 2 2>"$TMP/resume.err"
rc=$?
check "the resumed sweep finishes (exit 0)" '[ $rc = 0 ] && [ $(ls -d "$TMP"/k/kill/*=* | wc -l) = 8 ]'
check "it reports the points already done" 'grep -q "$done_before of 8 points already done" "$TMP/resume.err"'
same=1
for d in "${!stamps[@]}"; do [ "$(stat -c %i:%Y "$d/summary.json")" = "${stamps[$d]}" ] || same=0; done
check "finished points were not redone" '[ $same = 1 ]'
check "leftover temporaries are gone" '[ -z "$(find "$TMP/k" -name ".tmp.*")" ]'
"$ELDRSIM" sweep "$TMP/kill.json" --out "$TMP/k2" -j 2 -q
check "the resumed results equal an uninterrupted sweep's" 'cmp -s "$TMP/k/combined.csv" "$TMP/k2/combined.csv"'

# Seeds: each point with seeds 1..3, mean and 95% interval per metric.
"$ELDRSIM" sweep "$TMP/small.json" --out "$TMP/s" --seeds 3 -j 2 -q
check "--seeds 3: 12 runs, 4 groups with mean and interval" '[ $(wc -l <"$TMP/s/combined.csv") = 13 ] && [ $(wc -l <"$TMP/s/combined_seeds.csv") = 5 ] && head -1 "$TMP/s/combined_seeds.csv" | grep -q "seeds,.*tpot_p50_ms_mean,tpot_p50_ms_ci95_lo,tpot_p50_ms_ci95_hi"'
check "seed directories" '[ -f "$TMP/s/small/router=eldr__rate_rps=40__seed=3/summary.json" ]'
/usr/bin/python3 - "$TMP/s" >"$TMP/ci.out" 2>&1 <<'PY'
import sys, pandas as pd
from scipy import stats
d = sys.argv[1]
runs = pd.read_csv(f"{d}/combined.csv")
agg = pd.read_csv(f"{d}/combined_seeds.csv")
for _, g in agg.iterrows():
    v = runs[(runs.router == g.router) & (runs.rate_rps == g.rate_rps)]["tpot_p50_ms"]
    lo, hi = stats.t.interval(0.95, len(v) - 1, loc=v.mean(), scale=stats.sem(v))
    assert abs(g.tpot_p50_ms_mean - v.mean()) < 1e-6 and abs(g.tpot_p50_ms_ci95_lo - lo) < 1e-6 and abs(g.tpot_p50_ms_ci95_hi - hi) < 1e-6, (g, lo, hi)
print("intervals match scipy")
PY
check "intervals equal scipy's t interval" 'grep -q "intervals match scipy" "$TMP/ci.out"'
# A one-seed sweep into the same OUT: the intervals it wrote go (they are not these points'); a file of
# that name eldr-sim did not write stays, said on stderr.
"$ELDRSIM" sweep "$TMP/small.json" --out "$TMP/s" -j 2 -q
check "a one-seed sweep over a --seeds OUT removes its combined_seeds.csv" '[ ! -e "$TMP/s/combined_seeds.csv" ]'
printf 'my,own,table\n1,2,3\n' >"$TMP/s/combined_seeds.csv"
"$ELDRSIM" sweep "$TMP/small.json" --out "$TMP/s" -j 2 2>"$TMP/seeds-own.err" >/dev/null
check "... but not a combined_seeds.csv eldr-sim did not write" \
  '[ "$(cat "$TMP/s/combined_seeds.csv")" = "$(printf "my,own,table\n1,2,3")" ] && grep -q "combined_seeds.csv is not a table eldr-sim wrote: left as it is" "$TMP/seeds-own.err"'

# What a Slurm array task and the merge step run.
"$ELDRSIM" sweep "$TMP/small.json" --out "$TMP/p" --point 2 -q
check "--point 2 runs exactly one point" '[ $(ls -d "$TMP"/p/small/*=* | wc -l) = 1 ] && [ -f "$TMP/p/small/router=eldr__rate_rps=20/summary.json" ]'
"$ELDRSIM" sweep "$TMP/small.json" --out "$TMP/p" --merge -q
rc=$?
check "--merge with points missing exits 1" '[ $rc = 1 ] && [ $(wc -l <"$TMP/p/combined.csv") = 2 ]'
for i in 0 1 3; do "$ELDRSIM" sweep "$TMP/small.json" --out "$TMP/p" --point $i -q; done
"$ELDRSIM" sweep "$TMP/small.json" --out "$TMP/p" --merge -q
rc=$?
check "--merge of all points equals a local sweep" '[ $rc = 0 ] && cmp -s "$TMP/p/combined.csv" "$TMP/a/combined.csv"'
"$ELDRSIM" sweep "$TMP/small.json" --out "$TMP/p" --emit-slurm "$TMP/slurm" --slurm-options "--partition=debug" >/dev/null
check "--emit-slurm writes an array of 4 tasks, a merge step and submit.sh" 'grep -q "^#SBATCH --array=0-3$" "$TMP/slurm/points.sbatch" && grep -q -- "--point \"\$SLURM_ARRAY_TASK_ID\"" "$TMP/slurm/points.sbatch" && grep -q "^#SBATCH --partition=debug$" "$TMP/slurm/merge.sbatch" && grep -q "dependency=afterany" "$TMP/slurm/submit.sh" && [ -x "$TMP/slurm/submit.sh" ] && bash -n "$TMP/slurm/points.sbatch"'

# Bad sweep files: exit 2, one line on stderr naming the file and the field, nothing run.
bad() {  # NAME PATTERN JSON
  local name=$1 pattern=$2
  printf '%s\n' "$3" >"$TMP/$name.json"
  "$ELDRSIM" sweep "$TMP/$name.json" --out "$TMP/bad" -q >"$TMP/bad.out" 2>"$TMP/bad.err"
  local rc=$?
  check "bad sweep file: $name" '[ $rc = 2 ] && [ $(wc -l <"$TMP/bad.err") = 1 ] && grep -qF -- "eldrsim: error: $TMP/$name.json: $pattern" "$TMP/bad.err" && [ ! -e "$TMP/bad" ]'
  [ $rc = 2 ] || cat "$TMP/bad.err"
}
bad typo "grdi: unknown key" '{"grdi": {"router": ["jsq"]}}'
bad empty_list "grid.router: must be a non-empty list" '{"grid": {"router": []}}'
bad unknown_router "grid.router: value \"fastest\"" '{"grid": {"router": ["jsq", "fastest"]}}'
bad unknown_config_key "grid.workload.rate_rsp: value 60" '{"grid": {"workload.rate_rsp": [60]}}'
bad bad_rate "grid.workload.rate_rps: value -5" '{"grid": {"workload.rate_rps": [20, -5]}}'
bad set_not_object "set: must be an object" '{"set": ["router", "jsq"]}'
bad seeds_zero "seeds" '{"seeds": 0}'
bad missing_base "base: file not found" '{"base": "nowhere.json"}'
bad malformed "" '{"grid": {"router": ["jsq",]}}'
bad missing_include "include: file not found" '{"include": ["nothere.json"]}'
"$ELDRSIM" sweep "$TMP/nothing.json" >/dev/null 2>"$TMP/bad.err"
rc=$?
check "missing sweep file: exit 2, one line" '[ $rc = 2 ] && [ $(wc -l <"$TMP/bad.err") = 1 ] && grep -q "nothing.json" "$TMP/bad.err"'

finish
