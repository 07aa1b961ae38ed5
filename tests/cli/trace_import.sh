#!/usr/bin/env bash
# `eldrsim trace import` end to end: the three importers on the real data, runs of what they wrote,
# and bad traces / bad import arguments (exit 2, one stderr line naming the file and the problem).
# The full ESFT trace is imported into a scratch directory here, not read from traces/ (its 5.2 MB
# routing file is not committed; see docs/trace-format.md).
# Usage: trace_import.sh PATH/TO/eldrsim   (run from the project root)
set -u
ELDRSIM=${1:?usage: trace_import.sh PATH/TO/eldrsim}
[ -f configs/esft.json ] || { echo "run from the project root (no configs/esft.json here)"; exit 1; }

TMP=$(mktemp -d "${TMPDIR:-/tmp}/eldr-trace.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
. "$(dirname "$0")/lib.sh"

# expect_success NAME PATTERN -- ARGS: exit 0 and stdout containing PATTERN (fixed string).
expect_success() {
  local name=$1 pattern=$2
  shift 3
  if "$ELDRSIM" "$@" >"$TMP/stdout" 2>"$TMP/stderr" && grep -qF -- "$pattern" "$TMP/stdout"; then
    ok "$name: $(grep -F -- "$pattern" "$TMP/stdout" | head -1)"
  else
    bad "$name: exit $?, stdout: $(head -c 400 "$TMP/stdout"), stderr: $(head -c 400 "$TMP/stderr")"
    echo "     command: $ELDRSIM $*"
  fi
}

RUN_TRACE=(--set workload.kind=trace --set workload.arrivals=trace --set workload.warmup_requests=0 -q)

# --- ESFT: 213 sequences of 4 domains, 40 calibration, the other 173 served twice. The first import
# reads the default --data (the copy shipped in traces/routing/), the second names it.
expect_success "import esft from the shipped data" "wrote 386 requests (40 calibration)" -- \
  trace import esft --out "$TMP/esft" --calibration 40 --repeat 2
expect_success "esft routing tokens" "routing: 33279 tokens" -- \
  trace import esft --data traces/routing/esft_deepseek_v2_lite --out "$TMP/esft" --calibration 40 --repeat 2
if "$ELDRSIM" run configs/esft.json --set workload.trace="$TMP/esft" -q --out "$TMP/run-esft" &&
  grep -q '"unfinished": 0' "$TMP/run-esft/summary.json"; then
  ok "configs/esft.json replays the imported ESFT trace, every request finishes"
else
  bad "configs/esft.json on the imported ESFT trace"
fi

# --- Azure and Mooncake: lengths and arrivals, uniform routing on the default model.
expect_success "import azure code" "read 500 rows, wrote 500 requests" -- \
  trace import azure traces/azure2023_code.csv --out "$TMP/azure" --limit 500
if "$ELDRSIM" run configs/default.json "${RUN_TRACE[@]}" --set workload.trace="$TMP/azure" \
  --set workload.calibration_requests=100 --requests 300 --out "$TMP/run-azure" &&
  served_from_trace "$TMP/run-azure" "$TMP/azure" 300; then
  ok "an imported Azure trace runs: 300 of its requests, all finished"
else
  bad "run of the imported Azure trace"
fi
expect_success "import mooncake with --max-prompt" "clipped 217 prompts to --max-prompt" -- \
  trace import mooncake --out "$TMP/moon" --limit 400 --max-prompt 8192
if "$ELDRSIM" run configs/default.json "${RUN_TRACE[@]}" --set workload.trace="$TMP/moon" \
  --set workload.calibration_requests=0 --out "$TMP/run-moon" && served_from_trace "$TMP/run-moon" "$TMP/moon" 400; then
  ok "an imported Mooncake trace runs: its 400 requests, all finished"
else
  bad "run of the imported Mooncake trace"
fi
# Mooncake's hash_ids shared across turns: with prefix caching, prompt blocks are reused.
if "$ELDRSIM" run configs/mooncake.json --set workload.trace="$TMP/moon" --set workload.calibration_requests=50 \
  -q --out "$TMP/run-moon-cache" &&
  /usr/bin/python3 -c 'import json,sys; p=json.load(open(sys.argv[1]))["prefix_cache"]; sys.exit(not (p["prefill_token_hit_rate"] > 0.2 and p["decode_token_hit_rate"] > 0))' \
    "$TMP/run-moon-cache/summary.json"; then
  ok "the Mooncake trace replays its prefix sharing: prefill and decode cache hits"
else
  bad "prefix-cache run of the imported Mooncake trace"
fi
expect_success "import mooncake as is" "exceed the default serving.prefill_token_budget" -- \
  trace import mooncake --out "$TMP/moon-full" --limit 400

# --- Bad traces.
expect_error "replayed routing of another model" "esft/trace.json: model:" \
  "does not match the experiment's model 'qwen3-30b-a3b'" "configs/default.json" -- \
  run configs/default.json "${RUN_TRACE[@]}" --set workload.trace="$TMP/esft" --set workload.routing=trace --out "$TMP/x"
# Replayed routing belongs to the trace's model: its dimensions and its name must be the experiment's.
cp -r "$TMP/esft" "$TMP/esft-renamed"
sed -i 's/"name": "deepseek-v2-lite"/"name": "mixtral-8x7b"/' "$TMP/esft-renamed/trace.json"
expect_error "a trace whose model.name was edited" "esft-renamed/trace.json: model.name: 'mixtral-8x7b'" \
  "configs/esft.json runs model 'deepseek-v2-lite'" -- \
  run configs/esft.json --set workload.trace="$TMP/esft-renamed" -q --out "$TMP/x"
cp models/deepseek-v2-lite.json "$TMP/twin.json"
sed -i 's/"name": "deepseek-v2-lite"/"name": "deepseek-v2-lite-twin"/' "$TMP/twin.json"
expect_error "replay by a model of the same shape but another name" "esft/trace.json: model.name: 'deepseek-v2-lite'" \
  "runs model 'deepseek-v2-lite-twin'" -- \
  run configs/esft.json --set model="$TMP/twin.json" --set workload.trace="$TMP/esft" -q --out "$TMP/x"
expect_error "prompt over the prefill budget" "moon-full/requests.jsonl: line " ": prompt_tokens: " \
  "exceed serving.prefill_token_budget" "--max-prompt" -- \
  run configs/default.json "${RUN_TRACE[@]}" --set workload.trace="$TMP/moon-full" --set workload.calibration_requests=0 \
  --out "$TMP/x"
cp -r "$TMP/esft" "$TMP/esft-trunc"
truncate -s 3000000 "$TMP/esft-trunc/routing.bin"
expect_error "truncated routing file" "esft-trunc/routing.bin: header: index offset" "truncated" -- \
  run configs/esft.json --set workload.trace="$TMP/esft-trunc" -q --out "$TMP/x"
cp -r "$TMP/azure" "$TMP/azure-bad"
sed -i '3s/"label":"code"/"label":"code","colour":1/' "$TMP/azure-bad/requests.jsonl"
expect_error "edited requests.jsonl" "azure-bad/requests.jsonl: contents differ from the checksum" "cut or edited" \
  "regenerate or re-import" -- \
  run configs/default.json "${RUN_TRACE[@]}" --set workload.trace="$TMP/azure-bad" --out "$TMP/x"
# A trace written before the manifest carried checksums is read unchecked, line by line.
/usr/bin/python3 - "$TMP/azure-bad/trace.json" <<'PYEOF'
import json, sys
m = json.load(open(sys.argv[1]))
for k in ("request_count", "requests_fnv1a64", "routing_fnv1a64"):
    m.pop(k, None)
json.dump(m, open(sys.argv[1], "w"), indent=2)
PYEOF
expect_error "unknown key in requests.jsonl" "azure-bad/requests.jsonl: line 3: colour: unknown key" -- \
  run configs/default.json "${RUN_TRACE[@]}" --set workload.trace="$TMP/azure-bad" --out "$TMP/x"
expect_error "routing replay without a routing file" "workload.routing" "has none (routing_file is null)" -- \
  run configs/default.json "${RUN_TRACE[@]}" --set workload.trace="$TMP/azure" --set workload.routing=trace \
  --set workload.calibration_requests=0 --out "$TMP/x"

# --- Bad import arguments.
expect_error "esft data directory missing" "esft_law_top6_u8.bin: file not found" -- \
  trace import esft --data "$TMP/nowhere" --out "$TMP/x"
expect_error "azure input missing" "nowhere.csv: file not found" -- \
  trace import azure "$TMP/nowhere.csv" --out "$TMP/x"
expect_error "mooncake input that is a CSV" "azure2023_code.csv: line 1: invalid JSON" -- \
  trace import mooncake traces/azure2023_code.csv --out "$TMP/x"
for args in "trace import" "trace import esft" "trace import frobnicate --out $TMP/x"; do
  # shellcheck disable=SC2086
  "$ELDRSIM" $args >/dev/null 2>&1
  rc=$?
  if [ "$rc" -eq 2 ]; then ok "'$args' exits 2"; else bad "'$args' exited $rc, want 2"; fi
done
[ -e "$TMP/x" ] && bad "a failing command wrote $TMP/x" || ok "no failing command wrote an output"

finish
