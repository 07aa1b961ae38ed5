#!/usr/bin/env bash
# `eldrsim trace gen`: a generated workload written as a trace (with its routing) is deterministic,
# replays through the simulator, and the replay sees the routing the generator made.
# Usage: trace_gen.sh PATH/TO/eldrsim   (run from the project root)
set -u
ELDRSIM=${1:?usage: trace_gen.sh PATH/TO/eldrsim}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/eldr-gen.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
. "$(dirname "$0")/lib.sh"

small=(--set workload.measured_requests=40 --set workload.warmup_requests=5 --set workload.calibration_requests=10
       --set workload.output_tokens=64 --set workload.prompt_max_tokens=256)
"$ELDRSIM" trace gen configs/default.json --out "$TMP/a" --routing "${small[@]}" >"$TMP/gen.out" 2>&1
check "gen writes a trace with routing" '[ -f "$TMP/a/trace.json" ] && [ -f "$TMP/a/routing.bin" ] && grep -q "55 requests (10 calibration)" "$TMP/gen.out"'
"$ELDRSIM" trace gen configs/default.json --out "$TMP/b" --routing "${small[@]}" >/dev/null 2>&1
check "same config and seed: byte-identical trace" 'cmp -s "$TMP/a/routing.bin" "$TMP/b/routing.bin" && cmp -s "$TMP/a/requests.jsonl" "$TMP/b/requests.jsonl"'
check "calibration requests are flagged" '[ "$(grep -c "\"calibration\":true" "$TMP/a/requests.jsonl")" = 10 ]'

"$ELDRSIM" run configs/default.json --set workload.kind=trace --set workload.trace="$TMP/a" --set workload.routing=trace \
  --set workload.arrivals=trace --set workload.warmup_requests=5 --set workload.calibration_requests=10 \
  -q --out "$TMP/run" >"$TMP/run.out" 2>&1
check "the trace replays, every measured request finishes" 'grep -q "\"unfinished\": 0" "$TMP/run/summary.json" && grep -q "\"requests\": 40" "$TMP/run/summary.json"'

"$ELDRSIM" trace stats configs/default.json --set workload.kind=trace --set workload.trace="$TMP/a" \
  --set workload.routing=trace --set workload.calibration_requests=10 --set workload.warmup_requests=5 \
  --requests 40 >"$TMP/stats.out" 2>&1
check "trace stats reads the replayed routing" 'grep -q "trace routing" "$TMP/stats.out"'
# The trace carries each token's own gate values, renormalized over Qwen3's top 8: a cell's mean gate
# value per pick sits around 1/8, strictly between 0 and 1 (palette softmax values were mostly near 0).
check "the replayed gates are the tokens' own, about 1/8 a pick" \
  "awk '/gate value per pick/ { split(\$(NF-1), q, \"/\"); ok = q[1] > 0.02 && q[2] > 0.08 && q[2] < 0.17 && q[3] < 0.5 } END { exit !ok }' '$TMP/stats.out'"

"$ELDRSIM" trace gen configs/default.json --out "$TMP/c" --routing --max-routing-mb 1 "${small[@]}" >"$TMP/big.out" 2>&1
rc=$?
check "an oversized routing file is refused with exit 2" '[ $rc = 2 ] && grep -q "max-routing-mb" "$TMP/big.out" && [ ! -e "$TMP/c/routing.bin" ]'

finish
