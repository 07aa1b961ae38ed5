#!/usr/bin/env bash
# llm-d's scheduler configuration through the CLI (`run --scheduler`, composed.scheduler): the shipped
# EndpointPickerConfig files run unchanged and route exactly as the composition they map to, written
# as JSON; the config's own composed entries replace the file's (how a sweep varies a weight); bad
# files are one line and exit 2. The reader's cases in detail: tests/unit/endpoint_picker_config_test.cpp.
# Usage: scheduler.sh PATH/TO/eldrsim   (run from the project root)
set -u
ELDRSIM=${1:?usage: scheduler.sh PATH/TO/eldrsim}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/eldr-scheduler.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
RUN=(run configs/default.json --set workload.duration_s=20 -q)
# summary.json's resolved composition (without the scheduler's path) as compact JSON.
composition() {
  $PY -c 'import json,sys; c=json.load(open(sys.argv[1]))["config"]["composed"]; c.pop("scheduler"); print(json.dumps(c, sort_keys=True))' "$1"
}

# GIE's default: queue (2) + KV-cache utilisation (2) + prefix cache (3), the max-score picker.
"$ELDRSIM" "${RUN[@]}" --scheduler configs/scheduler/gie-default.yaml --out "$TMP/gie"
check "GIE's default file runs unchanged and maps to queue, KV-cache and prefix-cache scorers" \
  "[ '$(composition "$TMP/gie/summary.json" 2>/dev/null)' = \
'{\"filters\": {}, \"name\": \"composed\", \"picker\": {\"max-score-picker\": {\"tie_break\": \"random\"}}, \"scorers\": {\"kv-cache-utilization-scorer\": {\"weight\": 2.0}, \"prefix-cache-scorer\": {\"weight\": 3.0}, \"queue-scorer\": {\"weight\": 2.0}}}' ]"
"$ELDRSIM" "${RUN[@]}" --router composed --out "$TMP/gie-json" --set \
  'composed={"scorers": {"queue-scorer": {"weight": 2}, "kv-cache-utilization-scorer": {"weight": 2}, "prefix-cache-scorer": {"weight": 3}}}'
check "... and routes byte-identically to the same composition written in JSON" \
  "cmp -s '$TMP/gie/requests.csv' '$TMP/gie-json/requests.csv'"

# llm-d's P/D file: its decode profile (prefix cache 2, queue 1, max-score picker).
"$ELDRSIM" "${RUN[@]}" --scheduler configs/scheduler/llm-d-decode.yaml --out "$TMP/pd"
check "llm-d's P/D file runs unchanged: its decode profile" \
  "composition '$TMP/pd/summary.json' | grep -qF '\"scorers\": {\"prefix-cache-scorer\": {\"weight\": 2.0}, \"queue-scorer\": {\"weight\": 1.0}}'"
# The keys in a config file, relative to the project root, from another directory.
(cd "$TMP" && "$ELDRSIM" run "$OLDPWD/configs/default.json" --set workload.duration_s=20 -q --router composed \
  --set composed.scheduler=configs/scheduler/llm-d-decode.yaml \
  --set prefill_router.scheduler=configs/scheduler/llm-d-decode.yaml --out "$TMP/pd-key")
check "composed.scheduler and prefill_router.scheduler resolve against the project root and route as --scheduler" \
  "cmp -s '$TMP/pd/requests.csv' '$TMP/pd-key/requests.csv'"

# The P/D file's prefill profile routes prefill (prefill_router): the same as that profile written in JSON.
# With prefix caching, so that its prefix-cache scorer sees something on the prefill workers.
"$ELDRSIM" "${RUN[@]}" --set serving.prefix_cache=true --scheduler configs/scheduler/llm-d-decode.yaml \
  --out "$TMP/pd-cache"
"$ELDRSIM" "${RUN[@]}" --set serving.prefix_cache=true --router composed --out "$TMP/pd-cache-json" \
  --set 'composed={"scorers": {"prefix-cache-scorer": {"weight": 2}, "queue-scorer": {"weight": 1}}}' \
  --set 'prefill_router={"scorers": {"prefix-cache-scorer": {"weight": 2}, "queue-scorer": {"weight": 1}}}'
check "a P/D file's prefill profile routes prefill byte-identically to the same prefill_router in JSON" \
  "cmp -s '$TMP/pd-cache/requests.csv' '$TMP/pd-cache-json/requests.csv' && \
   $PY -c 'import json,sys; c=json.load(open(sys.argv[1]))[\"config\"][\"prefill_router\"]; sys.exit(c[\"scorers\"] != {\"prefix-cache-scorer\": {\"weight\": 2.0}, \"queue-scorer\": {\"weight\": 1.0}})' '$TMP/pd-cache/summary.json'"
"$ELDRSIM" "${RUN[@]}" --set serving.prefix_cache=true --router composed \
  --set composed.scheduler=configs/scheduler/llm-d-decode.yaml --out "$TMP/pd-decode-only" 2>"$TMP/pd-decode-only.err"
check "composed.scheduler alone routes decode only (prefill by the ring), and a note says how to route prefill too" \
  "! cmp -s '$TMP/pd-cache/requests.csv' '$TMP/pd-decode-only/requests.csv' && \
   grep -qF 'its prefill profile does not route prefill here: set prefill_router.scheduler' '$TMP/pd-decode-only.err'"
"$ELDRSIM" "${RUN[@]}" --router eldr --set prefill_router.scheduler=configs/scheduler/llm-d-decode.yaml \
  --out "$TMP/pd-eldr" 2>"$TMP/pd-eldr.err"
check "prefill_router.scheduler under ELDR: llm-d's prefill profile before ELDR's decode routing; the file's cache scorer noted" \
  "[ -f '$TMP/pd-eldr/summary.json' ] && grep -qF \"the file's prefix-cache-scorer scores every prefill worker the same\" '$TMP/pd-eldr.err' && \
   grep -qF \"'prefix-based-pd-decider' is llm-d's prefix-based-pd-decider, not modelled\" '$TMP/pd-eldr.err'"
expect_error "prefill_router.scheduler names a file without a prefill profile" \
  "gie-default.yaml" "plugins" "no P/D profile handler" \
  -- "${RUN[@]}" --set prefill_router.scheduler=configs/scheduler/gie-default.yaml --out "$TMP/x"
expect_error "prefill_router.scheduler set both by --scheduler and --set" "prefill_router.scheduler" \
  -- "${RUN[@]}" --scheduler configs/scheduler/llm-d-decode.yaml \
  --set prefill_router.scheduler=configs/scheduler/llm-d-decode-expert-locality.yaml --out "$TMP/x"

# The config's own entries replace the file's: a weight swept over a scheduler file.
"$ELDRSIM" "${RUN[@]}" --scheduler configs/scheduler/llm-d-decode-expert-locality.yaml \
  --set composed.scorers.expert-locality-scorer.weight=0 --out "$TMP/w0"
check "expert-locality weight 0 over the file is llm-d's decode profile alone" \
  "cmp -s '$TMP/pd/requests.csv' '$TMP/w0/requests.csv'"
"$ELDRSIM" "${RUN[@]}" --scheduler configs/scheduler/llm-d-decode-expert-locality.yaml --out "$TMP/w2"
check "with the expert-locality scorer (weight 2) the routing changes and ELDR's model is built" \
  "! cmp -s '$TMP/pd/requests.csv' '$TMP/w2/requests.csv' && \
   $PY -c 'import json,sys; sys.exit(json.load(open(sys.argv[1]))[\"router_stats\"][\"mask_layers\"] < 1)' '$TMP/w2/summary.json'"

# The worked example's sweep (configs/sweeps/expert_locality_weight.json), cut to two weights, one rate
# and one seed, from one command: the sweep and its report with the plot against the weight.
"$ELDRSIM" sweep configs/sweeps/expert_locality_weight.json --out "$TMP/sweep" -q --seeds 1 --report \
  --set workload.duration_s=10 >/dev/null 2>"$TMP/sweep.err" || true
check "a weight sweep over a scheduler file, then its report, from one command" \
  "[ -f '$TMP/sweep/combined.csv' ] && grep -qF 'tpot_vs_composed.scorers.expert-locality-scorer.weight.png' '$TMP/sweep/report/report.md' && \
   head -c 8 '$TMP/sweep/report/tpot_vs_composed.scorers.expert-locality-scorer.weight.png' | grep -q PNG"
expect_error "sweep --report with --emit-slurm" "--report" "emit-slurm" \
  -- sweep configs/sweeps/expert_locality_weight.json --report --emit-slurm "$TMP/slurm"

# llm-d's published files run as they are (tests/data/llm-d, read in full by the unit test); what eldr-sim
# reads differently is said in notes, the only lines on stderr.
only_notes() { drop_sanitizer_noise "$1"; [ -s "$1" ] && ! grep -qv '^eldrsim: note: ' "$1"; }
D=tests/data/llm-d
"$ELDRSIM" "${RUN[@]}" --scheduler $D/v0.2.0-epp-prefix-cache-tracking-config.yaml --out "$TMP/v020" 2>"$TMP/v020.err"
check "llm-d v0.2.0's file runs: kv-cache-scorer read as kv-cache-utilization-scorer, with a note" \
  "composition '$TMP/v020/summary.json' | grep -qF '\"kv-cache-utilization-scorer\": {\"weight\": 1.0}' && \
   only_notes '$TMP/v020.err' && grep -qF \"plugins[3].type: 'kv-cache-scorer' is GIE v0.5.0's name\" '$TMP/v020.err'"
"$ELDRSIM" "${RUN[@]}" --scheduler $D/v0.8.0-epp-precise-prefix-cache-config.yaml --out "$TMP/v080" 2>"$TMP/v080.err"
check "llm-d v0.8.0's precise file runs: the precise scorer, its tokenizer step skipped with a note" \
  "composition '$TMP/v080/summary.json' | grep -qF '\"precise-prefix-cache-scorer\": {\"weight\": 2.0}' && \
   only_notes '$TMP/v080.err' && grep -qF 'schedulingProfiles[0].plugins[1].pluginRef' '$TMP/v080.err'"
"$ELDRSIM" "${RUN[@]}" --scheduler $D/main-pd-epp-config.yaml --out "$TMP/main-pd" 2>"$TMP/main-pd.err"
check "llm-d main's P/D file runs: its decode and prefill profiles, as the shipped P/D file's" \
  "cmp -s '$TMP/pd/requests.csv' '$TMP/main-pd/requests.csv' && only_notes '$TMP/main-pd.err'"
expect_error "a published file with a scorer eldr-sim does not model is refused" \
  "v0.2.0-epp-prefix-estimate-config.yaml" "schedulingProfiles[0].plugins[2].pluginRef" "load-aware-scorer" \
  -- "${RUN[@]}" --scheduler $D/v0.2.0-epp-prefix-estimate-config.yaml --out "$TMP/x"

# Bad files: one line, exit 2, naming the file and the YAML field.
printf 'apiVersion: llm-d.ai/v1alpha1\nkind: EndpointPickerConfig\nplugins:\n- type: foo-scorer\nschedulingProfiles:\n- name: decode\n  plugins:\n  - pluginRef: foo-scorer\n' >"$TMP/unknown.yaml"
expect_error "an unknown plugin is named, with what is supported" "unknown.yaml" "plugins[0].type" "foo-scorer" "queue-scorer" \
  -- "${RUN[@]}" --scheduler "$TMP/unknown.yaml" --out "$TMP/x"
printf 'apiVersion: llm-d.ai/v1alpha1\nkind: EndpointPickerConfig\nplugins:\n- type: queue-scorer\nschedulingProfiles:\n- name: decode\n  plugins:\n  - pluginRef: queue-scorer\n    weight: -2\n' >"$TMP/weight.yaml"
expect_error "a negative weight" "weight.yaml" "schedulingProfiles[0].plugins[0].weight" \
  -- "${RUN[@]}" --scheduler "$TMP/weight.yaml" --out "$TMP/x"
printf 'apiVersion: llm-d.ai/v1alpha1\nkind: EndpointPickerConfig\nplugins:\n- type: queue-scorer\nschedulingProfiles:\n- name: decode\n  plugins:\n  - pluginRef: kv-scorer\n' >"$TMP/ref.yaml"
expect_error "a reference to no plugin" "ref.yaml" "schedulingProfiles[0].plugins[0].pluginRef" "kv-scorer" \
  -- "${RUN[@]}" --scheduler "$TMP/ref.yaml" --out "$TMP/x"
printf 'kind: EndpointPickerConfig\nplugins: [\n' >"$TMP/broken.yaml"
expect_error "broken YAML" "broken.yaml" "YAML" -- "${RUN[@]}" --scheduler "$TMP/broken.yaml" --out "$TMP/x"
expect_error "a missing file, blamed on --scheduler" "--scheduler: file not found" -- "${RUN[@]}" \
  --scheduler "$TMP/none.yaml" --out "$TMP/x"
expect_error "a value the composed reader rejects, blamed on --set" \
  "--set: composed.picker.max-score-picker.tie_break: unknown value 'first'" \
  -- "${RUN[@]}" --scheduler configs/scheduler/llm-d-decode.yaml --set composed.picker.max-score-picker.tie_break=first --out "$TMP/x"
check "no results directory is left by the errors" "[ ! -e '$TMP/x' ]"

finish
