#!/usr/bin/env bash
# The speculative section (docs/speculative.md): bad values are one-line errors naming the key; k = 0
# gives the results of no section; a step emits 1 + a tokens (acceptance 1: k + 1 a step, so a
# 512-token request needs ceil(511 / (k + 1)) decode steps); its union covers the k + 1 verified
# tokens (persistence 1: exactly one token's top_k; else between one and k + 1 tokens' worth); the
# sampled and expected unions of the same model agree; the proposer makes a step slower. method draft:
# its errors, a step's draft passes and the decode KV capacity with a draft model or the MTP module.
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

# method draft: a dense draft model file, only with that method; the served model stays MoE.
DR=(--set $S.method=draft --set $S.num_speculative_tokens=1 --set "$S.acceptance=[1]")
expect_error "draft without draft_model" "$S.draft_model" "is required with method draft" -- run $D "${DR[@]}"
expect_error "draft_model with method mtp" "--set: $S.draft_model" "applies only to method draft" -- \
  run $D --set $S.draft_model=qwen3-0.6b
expect_error "draft_model with method ngram" "--set: $S.draft_model" "method is ngram" -- \
  run $D --set $S.method=ngram --set $S.draft_model=qwen3-0.6b
expect_error "proposer_layers with method draft" "--set: $S.proposer_layers" "applies only to method mtp" -- \
  run $D "${DR[@]}" --set $S.draft_model=qwen3-0.6b --set $S.proposer_layers=2
expect_error "unknown draft model file" "--set: $S.draft_model" "file not found" "no-such-draft.json" -- \
  run $D "${DR[@]}" --set $S.draft_model=no-such-draft
expect_error "a MoE model as the draft" "--set: $S.draft_model" "is a MoE model (128 experts)" -- \
  run $D "${DR[@]}" --set $S.draft_model=qwen3-30b-a3b
expect_error "a dense model served" "--set: model" "is a dense model" -- run $D --set model=qwen3-0.6b
$PY - models/qwen3-0.6b.json "$TMP" <<'PYEOF'
import json, sys
m = json.load(open(sys.argv[1]))
json.dump(dict(m, top_k=8), open(sys.argv[2] + "/moe_key.json", "w"))
json.dump(dict(m, intermediate_size=30720), open(sys.argv[2] + "/small_layer.json", "w"))
PYEOF
expect_error "a dense draft file with an expert key" "$TMP/moe_key.json: top_k" "is for MoE models" -- \
  run $D "${DR[@]}" --set $S.draft_model="$TMP/moe_key.json"
expect_error "a dense layer smaller than its MLP" "$TMP/small_layer.json: non_expert_MB_per_layer" \
  "less than the dense MLP alone" -- run $D "${DR[@]}" --set $S.draft_model="$TMP/small_layer.json"
# Qwen3-30B-A3B's 61.08 GB of weights fit 192 GB x 0.322 = 61.82 GB with room for the largest
# request's KV; the draft's 1.19 GB more do not.
expect_error "the draft model leaves no KV room" "(weights)" "the draft model 'qwen3-0.6b'" -- \
  run $D "${DR[@]}" --set $S.draft_model=qwen3-0.6b --set serving.kv_memory_fraction=0.322

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

# The draft model's passes, one request, k = 1, every draft accepted: the same steps and contexts as
# ngram drafts (no GPU work), each longer by one memory-bound pass of Qwen3-0.6B: its 1,192,097,792
# B of weights (28 layers of 31,461,888 B and the tied 311,164,928 B head) and 114,688 B of KV per
# context token, at the target's bandwidth (5.3 TB/s x decode_bw_efficiency).
for m in ngram draft; do
  "$ELDRSIM" run $D "${ONE[@]}" --set $S.method=$m --set $S.num_speculative_tokens=1 --set "$S.acceptance=[1]" \
    $([ $m = draft ] && echo --set $S.draft_model=qwen3-0.6b) --out "$TMP/one_$m" >/dev/null
done
out=$($PY - "$TMP/one_ngram/steps.csv" "$TMP/one_draft/steps.csv" <<'PYEOF'
import csv, json, sys
n, d = (list(csv.DictReader(open(p))) for p in sys.argv[1:3])
bw = json.load(open("models/hardware/mi300x.json"))["hbm_bandwidth_TBps"] * 1e12
bw *= json.load(open("models/qwen3-30b-a3b.json"))["calibration"]["mi300x"]["decode_bw_efficiency"]
same = len(n) == len(d) == 256 and all(a["context_tokens"] == b["context_tokens"] for a, b in zip(n, d))
err = max(abs(float(b["duration_ms"]) - float(a["duration_ms"]) - 1e3 * (1192097792 + 114688 * float(a["context_tokens"])) / bw)
          for a, b in zip(n, d))
print(f"{len(d)} steps, largest error {err:.1e} ms")
sys.exit(0 if same and err < 1e-6 else 1)
PYEOF
)
rc=$?
check "draft k = 1: each step one pass of the draft's weights and KV longer than ngram's ($out)" '[ $rc = 0 ]'
# KV memory: the draft's 1,192,097,792 B of weights off, 98,304 / (98,304 + 114,688) of the rest the
# target's; MTP on Qwen3-30B-A3B: one MoE layer (38.3 + 128 x 9.44 MB) and the 2 x 2048 x 2048 bf16
# projection off, 98,304 / 48 B more KV a token.
"$ELDRSIM" run $D "${ONE[@]}" --set $S.num_speculative_tokens=1 --set "$S.acceptance=[1]" --out "$TMP/one_mtp" >/dev/null
out=$($PY - "$TMP/one0" "$TMP/one_draft" "$TMP/one_mtp" <<'PYEOF'
import json, sys
c0, cd, cm = (json.load(open(p + "/summary.json"))["decode_workers"][0]["kv_capacity_bytes"] for p in sys.argv[1:4])
want_d = (c0 - 1192097792) * 98304 / (98304 + 114688)
want_m = (c0 - (38.3e6 + 128 * 9.44e6 + 2 * 2048 * 2048 * 2)) * 48 / 49
print(f"{c0 / 1e9:.2f}, draft {cd / 1e9:.2f}, mtp {cm / 1e9:.2f} GB")
sys.exit(0 if abs(cd / want_d - 1) < 1e-12 and abs(cm / want_m - 1) < 1e-12 else 1)
PYEOF
)
rc=$?
check "decode KV capacity without, with the draft model and with the MTP module ($out)" '[ $rc = 0 ]'

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
