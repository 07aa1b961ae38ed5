#!/usr/bin/env bash
# The speculative section (docs/speculative.md): bad values are one-line errors naming the key; k = 0
# gives the results of no section; a step emits 1 + a tokens (acceptance 1: k + 1 a step, so a
# 512-token request needs ceil(511 / (k + 1)) decode steps); its union covers the k + 1 verified
# tokens (persistence 1: exactly one token's top_k; else between one and k + 1 tokens' worth); the
# sampled and expected unions of the same model agree; the proposer makes a step slower.
# Usage: speculative.sh PATH/TO/eldrsim (from the project root).
set -u
ELDRSIM=${1:?usage: speculative.sh PATH/TO/eldrsim}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/eldr-spec.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
D=configs/default.json
S=speculative

expect_error "acceptance missing with k > 0" "$D" "$S.acceptance" "is required" -- \
  run $D --set $S.num_speculative_tokens=2
expect_error "acceptance shorter than k" "--set: $S.acceptance" "has 1 values for num_speculative_tokens 2" -- \
  run $D --set $S.num_speculative_tokens=2 --set "$S.acceptance=[0.8]"
expect_error "acceptance above 1" "--set: $S.acceptance[1]" "between 0 and 1" -- \
  run $D --set $S.num_speculative_tokens=2 --set "$S.acceptance=[0.8, 1.5]"
expect_error "acceptance not a list" "--set: $S.acceptance" "must be a list" -- \
  run $D --set $S.num_speculative_tokens=1 --set "$S.acceptance=0.8"
expect_error "unknown method" "--set: $S.method" "mtp, ngram" -- run $D --set $S.method=medusa
expect_error "negative k" "--set: $S.num_speculative_tokens" -- run $D --set $S.num_speculative_tokens=-1
expect_error "persistence above 1" "--set: $S.expert_persistence" -- run $D --set $S.expert_persistence=1.2
expect_error "unknown key in the section" "--set: $S.acceptence" "unknown key" -- run $D --set "$S.acceptence=[1]"

SMALL=(--requests 150 --set workload.warmup_requests=0 --steps -q)
"$ELDRSIM" run $D "${SMALL[@]}" --out "$TMP/none" >/dev/null
"$ELDRSIM" run $D "${SMALL[@]}" --set $S.num_speculative_tokens=0 --set "$S.acceptance=[0.9]" --out "$TMP/k0" >/dev/null
check "k = 0: every result file as without the section (summary.json: but its config's section)" \
  "same_results $TMP/none $TMP/k0 config.speculative"

# One request alone: 511 tokens after prefill's first, k + 1 a step with every draft accepted.
ONE=(--requests 1 --set workload.warmup_requests=0 --steps -q)
for k in 0 1 3; do
  "$ELDRSIM" run $D "${ONE[@]}" --set $S.num_speculative_tokens=$k --set "$S.acceptance=[1, 1, 1]" \
    --set $S.expert_persistence=1 --out "$TMP/one$k" >/dev/null
done
rows() { echo $(($(wc -l <"$1") - 1)); }
check "acceptance 1: 511, 256 and 128 decode steps for k = 0, 1, 3" \
  '[ "$(rows $TMP/one0/steps.csv) $(rows $TMP/one1/steps.csv) $(rows $TMP/one3/steps.csv)" = "511 256 128" ]'
# steps.csv: column 6 the mean distinct experts per layer (qwen3-30b-a3b: top_k 8).
check "persistence 1: the verified window is one token's 8 experts" \
  "awk -F, 'NR > 1 && (\$6 > 8.000001 || \$6 < 7.999999) { exit 1 }' $TMP/one3/steps.csv"
"$ELDRSIM" run $D "${ONE[@]}" --set $S.num_speculative_tokens=3 --set "$S.acceptance=[1, 1, 1]" \
  --out "$TMP/one3p" >/dev/null
check "default persistence: 4 verified tokens pick more than 8 and fewer than 32 experts a layer" \
  "awk -F, 'NR > 1 && (\$6 <= 9 || \$6 >= 32) { exit 1 }' $TMP/one3p/steps.csv"
check "the proposer (one MoE layer per draft) and 4 verified tokens make a step slower than k = 0's" \
  "$PY -c \"import csv,sys; m=lambda p: sum(float(r['duration_ms']) for r in csv.DictReader(open(p)))/sum(1 for _ in open(p)); sys.exit(0 if m('$TMP/one3p/steps.csv') > m('$TMP/one0/steps.csv') else 1)\""

# A replayed trace: drafts are the request's real next tokens, those past its last fed token repeat it.
"$ELDRSIM" trace gen $D --out "$TMP/trace" --routing --set workload.measured_requests=40 \
  --set workload.warmup_requests=5 --set workload.calibration_requests=10 --set workload.output_tokens=64 >/dev/null 2>&1
REPLAY=(--set workload.kind=trace --set workload.trace="$TMP/trace" --set workload.routing=trace
  --set workload.warmup_requests=5 -q)
check "a replayed trace runs with k = 3 and its steps verify more experts than k = 0's" \
  "'$ELDRSIM' run $D \"\${REPLAY[@]}\" --out '$TMP/replay0' >/dev/null &&
   '$ELDRSIM' run $D \"\${REPLAY[@]}\" --set $S.num_speculative_tokens=3 --set '$S.acceptance=[0.9, 0.9, 0.9]' \
     --out '$TMP/replay3' >/dev/null &&
   $PY -c \"import json,sys; d=[json.load(open(f'$TMP/replay{k}/summary.json'))['distinct_experts_per_layer_mean'] for k in (0, 3)]; sys.exit(0 if d[1] > d[0] else 1)\""

# The same model, expected against sampled, at a load where batches hold many sequences.
for mode in expected sampled; do
  "$ELDRSIM" run $D --requests 600 --set workload.warmup_requests=0 --rate 60 -q --set workload.union=$mode \
    --set $S.num_speculative_tokens=2 --set "$S.acceptance=[0.8, 0.8]" --out "$TMP/$mode" >/dev/null
done
out=$($PY - "$TMP/expected/summary.json" "$TMP/sampled/summary.json" <<'PYEOF'
import json, sys
e, s = (json.load(open(p))["distinct_experts_per_layer_mean"] for p in sys.argv[1:3])
print(f"expected {e:.3f} sampled {s:.3f}")
sys.exit(0 if abs(e / s - 1) <= 0.02 else 1)
PYEOF
)
rc=$?
check "k = 2: expected and sampled distinct experts per layer within 2% ($out)" '[ $rc = 0 ]'
finish
