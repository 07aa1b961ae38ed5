#!/usr/bin/env bash
# The eplb section (docs/eplb.md): bad values are one-line errors naming the fix; enabled false gives
# the results of no section; with redundant experts 0 and no rearrangement in reach the steps are those
# of no section (the replica path counts picks, distinct experts and dispatches as the placement masks
# do); with a short interval the instances rearrange, move expert weights, lose the redundant experts'
# HBM from their KV memory, and balance the ranks' token loads better than the initial placement.
# Usage: eplb.sh PATH/TO/eldrsim (from the project root).
set -u
ELDRSIM=${1:?usage: eplb.sh PATH/TO/eldrsim}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/eldr-eplb.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
T=configs/tpep.json
E=eplb

expect_error "not an expert-parallel instance" "--set: eplb" "expert_parallel" -- \
  run configs/default.json --set $E.num_redundant_experts=0
expect_error "redundant experts not a multiple of the ranks" "--set: $E.num_redundant_experts" \
  "do not split over 4 ranks" "multiple of expert_parallel" -- run $T --set $E.num_redundant_experts=6
expect_error "a placement of its own" "eplb" "topology.decode.placement" -- \
  run $T --set $E.num_redundant_experts=8 --set topology.decode.placement=random
expect_error "unknown policy" "--set: $E.policy" "default, hierarchical, global" -- run $T --set $E.policy=greedy
expect_error "groups not dividing the experts" "--set: $E.expert_groups" "do not split into 3 groups" -- \
  run $T --set $E.expert_groups=3
expect_error "zero window" "--set: $E.window_size" -- run $T --set $E.window_size=0
expect_error "redundant experts that leave no KV memory" "qwen3-235b-a22b.json: (weights)" \
  "model weights and eplb's redundant experts leave no room" -- run $T --set $E.num_redundant_experts=128
# A node of 128 GPUs (a cluster file of the test's own) allows an instance beyond EPLB's 64 ranks.
sed -e 's/"gpus_per_node": 8/"gpus_per_node": 128/' configs/cluster/mi300x-5node.json >"$TMP/big.json"
expect_error "more than 64 ranks" "--set: eplb" "at most 64 expert-parallel ranks" -- \
  run $T --set cluster="$TMP/big.json" --set topology.decode.instances=1 --set topology.decode.gpus_per_instance=128 \
  --set topology.decode.tensor_parallel=128 --set topology.decode.expert_parallel=128 --set 'topology.decode.nodes=[1]' \
  --set $E.num_redundant_experts=0
expect_error "unknown key in the section" "--set: $E.redundant" "unknown key" -- run $T --set $E.redundant=8

SMALL=(--requests 200 --set workload.warmup_requests=0 --steps -q)
"$ELDRSIM" run $T "${SMALL[@]}" --out "$TMP/none" >/dev/null
"$ELDRSIM" run $T "${SMALL[@]}" --set $E.enabled=false --set $E.num_redundant_experts=8 --out "$TMP/off" >/dev/null
"$ELDRSIM" run $T "${SMALL[@]}" --set $E.step_interval=100000000 --out "$TMP/never" >/dev/null
"$ELDRSIM" run $T "${SMALL[@]}" --set $E.num_redundant_experts=8 --set $E.step_interval=40 \
  --set $E.window_size=20 --out "$TMP/on" >/dev/null
check "enabled false: every result file as without the section" "same_results $TMP/none $TMP/off config.eplb expert_parallel.eplb"
check "no redundant experts, no rearrangement in reach: the same steps and results as no section" \
  "same_results $TMP/none $TMP/never config.eplb expert_parallel.eplb"
summary() { $PY -c "import json,sys; print(json.load(open(sys.argv[1]))$2)" "$TMP/$1/summary.json"; }
check "the placement by its name, as the config gives it" '[ "$(summary none "[\"expert_parallel\"][\"placement\"]")" = contiguous ]'
check "no rearrangement in reach: none reported" '[ "$(summary never "[\"expert_parallel\"][\"eplb\"][\"rearrangements\"]")" = 0 ]'
check "a short interval: rearrangements that move experts over the GPUs' links" "$PY - '$TMP/on/summary.json' <<'PYEOF'
import json, sys
e = json.load(open(sys.argv[1]))['expert_parallel']['eplb']
sys.exit(0 if e['rearrangements'] > 0 and e['experts_moved'] > 0 and e['bytes_moved'] == e['experts_moved'] * 37.7e6
         and e['transfer_s'] > 0 and e['steps_rebalanced'] > 0 else 1)
PYEOF"
check "rebalanced ranks: max over mean token load below the initial placement's" "$PY - '$TMP/on/summary.json' <<'PYEOF'
import json, sys
e = json.load(open(sys.argv[1]))['expert_parallel']['eplb']
print('     max/mean initial %.4f, rebalanced %.4f' % (e['rank_load_max_over_mean_initial'], e['rank_load_max_over_mean_rebalanced']))
sys.exit(0 if e['rank_load_max_over_mean_rebalanced'] < e['rank_load_max_over_mean_initial'] else 1)
PYEOF"
# 8 redundant experts on each of 94 MoE layers, 37.7 MB each: 28.3504 GB less KV memory per instance.
check "redundant experts take their HBM from the KV cache" "$PY - '$TMP/none/summary.json' '$TMP/on/summary.json' <<'PYEOF'
import json, sys
a, b = (json.load(open(p))['decode_workers'] for p in sys.argv[1:3])
sys.exit(0 if all(abs(x['kv_capacity_bytes'] - y['kv_capacity_bytes'] - 8 * 94 * 37.7e6) < 1 for x, y in zip(a, b)) else 1)
PYEOF"

echo "$pass passed, $failures failed"
[ "$failures" -eq 0 ]
