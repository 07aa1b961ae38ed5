#!/usr/bin/env bash
# Runs that differ only in their measured phase share one warm-up (sim/workload/measured_phase.hpp):
# `run --measured-phases` simulates it once and forks each run where it has drained, and a sweep runs
# its points of one warm-up that way. Every result file is byte-identical to the run's alone.
# Usage: shared_warmup.sh PATH/TO/eldrsim   (run from the project root)
set -u
ELDRSIM=${1:?usage: shared_warmup.sh PATH/TO/eldrsim}
[ -f configs/default.json ] || { echo "run from the project root"; exit 1; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/eldr-warmup.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
. "$(dirname "$0")/lib.sh"

SMALL=(--set workload.warmup_requests=300 --set workload.duration_s=8 --set workload.calibration_requests=300
  --set eldr.mask_pairs=3000)
same_results() { for f in summary.json requests.csv windows.csv; do cmp -s "$1/$f" "$2/$f" || return 1; done; }

# ---------------------------------------------------------------- run --measured-phases
# Three ELDR runs (its online refits carry across the fork), not in order of length.
member() { printf '{"set": ["workload.rate_rps=%s"], "out": "%s", "log": "%s"}' "$1" "$TMP/g/r$1" "$TMP/g/r$1.log"; }
mkdir -p "$TMP/g"
printf '{"log": "%s", "status": "%s", "members": [%s, %s, %s]}\n' "$TMP/g/group.log" "$TMP/g/status.json" \
  "$(member 40)" "$(member 80)" "$(member 20)" >"$TMP/g/spec.json"
"$ELDRSIM" run configs/default.json --router eldr "${SMALL[@]}" --measured-phases "$TMP/g/spec.json" -q \
  >"$TMP/g/group.log" 2>&1
rc=$?
check "three measured phases of one warm-up: exit 0" '[ $rc = 0 ]'
check "... the status records each run's exit 0 and its CPU" \
  '[ $(grep -c "\"exit_code\": 0" "$TMP/g/status.json") = 3 ] && grep -q "\"warmup_cpu_s\"" "$TMP/g/status.json"'
for r in 20 40 80; do
  "$ELDRSIM" run configs/default.json --router eldr "${SMALL[@]}" --rate $r -q --out "$TMP/alone$r"
  check "... rate $r: byte-identical to its run alone" 'same_results "$TMP/g/r$r" "$TMP/alone$r"'
done
check "... the rates differ" '! cmp -s "$TMP/g/r20/requests.csv" "$TMP/g/r80/requests.csv"'

printf '{"log": "%s", "status": "%s", "members": [{"set": [], "out": "%s", "log": ""}, {"set": ["router=jsq"], "out": "%s", "log": ""}]}\n' \
  "$TMP/b.log" "$TMP/b.status" "$TMP/b1" "$TMP/b2" >"$TMP/bad.json"
expect_error "runs that differ beyond the measured phase are refused" "$TMP/bad.json: members:" "beyond the measured phase" \
  -- run configs/default.json "${SMALL[@]}" --measured-phases "$TMP/bad.json" -q
expect_error "... and a run whose warm-up is its own" "$TMP/bad.json: members:" "no drained warm-up" \
  -- run configs/default.json "${SMALL[@]}" --set workload.drain_after_warmup=false --measured-phases "$TMP/bad.json" -q
check "... writing nothing" '[ ! -e "$TMP/b1" ] && [ ! -e "$TMP/b2" ] && [ ! -e "$TMP/b.status" ]'

# ---------------------------------------------------------------- a sweep
cat >"$TMP/sweep.json" <<JSON
{ "name": "s", "base": "configs/default.json",
  "set": { "workload.warmup_requests": 300, "workload.duration_s": 8, "workload.calibration_requests": 300,
           "eldr.mask_pairs": 3000 },
  "grid": { "router": ["random", "round_robin", "jsq", "p2c", "domain", "eldr"], "workload.rate_rps": [20, 60] } }
JSON
"$ELDRSIM" sweep "$TMP/sweep.json" --out "$TMP/s1" -j 1 2>"$TMP/s1.err"
rc=$?
check "a sweep of the six routers at two rates, -j 1: exit 0, 12 points" \
  '[ $rc = 0 ] && [ $(wc -l <"$TMP/s1/combined.csv") = 13 ]'
check "... each router's two rates share a warm-up (point.json says with which points)" \
  '[ $(grep -l "\"points\": 2" "$TMP"/s1/s/*/point.json | wc -l) = 12 ] && grep -q "\"first\": \"s/router=eldr__rate_rps=20\"" "$TMP/s1/s/router=eldr__rate_rps=60/point.json"'
check "... and no temporaries left" '[ -z "$(find "$TMP/s1" -name ".tmp.*")" ]'
differ=""
for router in random round_robin jsq p2c domain eldr; do
  for r in 20 60; do
    d="$TMP/s1/s/router=${router}__rate_rps=$r"
    "$ELDRSIM" run configs/default.json --router $router "${SMALL[@]}" --rate $r -q --out "$TMP/one"
    cmp -s "$d/requests.csv" "$TMP/one/requests.csv" && cmp -s "$d/windows.csv" "$TMP/one/windows.csv" ||
      differ="$differ $router@$r"
  done
done
check "... every point's requests and windows byte-identical to its run alone" '[ -z "$differ" ] || { echo "differ:$differ"; false; }'
"$ELDRSIM" sweep "$TMP/sweep.json" --out "$TMP/s2" -j 2 --own-warmups 2>"$TMP/s2.err"
check "--own-warmups (-j 2): every point its own warm-up, the same combined.csv" \
  'cmp -s "$TMP/s1/combined.csv" "$TMP/s2/combined.csv" && ! grep -q shared_warmup "$TMP"/s2/s/*/point.json && ! grep -q "share" "$TMP/s2.err" && grep -q "12 of 12 points share 6 warm-ups" "$TMP/s1.err"'

# Ctrl-C in the middle of a group: exit 130, nothing half-written; the resumed sweep ends as a fresh one.
cat >"$TMP/long.json" <<JSON
{ "name": "l", "base": "configs/default.json",
  "set": { "workload.warmup_requests": 300, "workload.duration_s": 900, "router": "round_robin" },
  "grid": { "workload.rate_rps": [20, 30, 40, 50] } }
JSON
"$ELDRSIM" sweep "$TMP/long.json" --out "$TMP/l" -j 1 2>"$TMP/l.err" &
pid=$!
for _ in $(seq 300); do
  [ -n "$(find "$TMP/l" -name point.json 2>/dev/null | head -1)" ] && break
  sleep 0.1
done
kill -INT $pid
wait $pid
rc=$?
check "Ctrl-C during a group's runs: exit 130" '[ $rc = 130 ]'
check "... the runs done are kept, no temporaries left" \
  '[ -n "$(find "$TMP/l" -name point.json)" ] && [ -z "$(find "$TMP/l" -name ".tmp.*" -o -name "*.eldr-tmp@*" -o -name "*.failed.log")" ]'
"$ELDRSIM" sweep "$TMP/long.json" --out "$TMP/l" -j 1 -q
"$ELDRSIM" sweep "$TMP/long.json" --out "$TMP/lf" -j 1 -q
check "... resumed, the same combined.csv as a fresh sweep" 'cmp -s "$TMP/l/combined.csv" "$TMP/lf/combined.csv"'

echo "$pass passed, $failures failed"
[ "$failures" = 0 ]
