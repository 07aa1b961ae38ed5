#!/usr/bin/env bash
# Every setting takes effect or is an error, numbers mean what they say, messages name what to fix:
#  - eldr.variant/kmeans against the model file's (recorded when absent, refused when they differ);
#  - --router, --scheduler and --set of the same key with different values; a router's section under
#    another router; prefill scorers that are constant without prefix caching, a prefill section naming
#    no plugin, weights too small to keep their digits; a composition of no scorer is noted;
#  - compare and table name a composition by what it is and refuse two different ones;
#  - a routing cache that cannot be written is a note, and the run goes on.
#  - numbers, in options and --set values, are decimal as JSON writes them, with one range message;
#    calibrate checks its settings and measured rows before simulating;
#  - messages name the option at fault, keep the problem when a path is long, suggest a command for
#    an unknown one, point from a directory of runs to its runs, and blame arrivals on the input line.
# Usage: settings.sh PATH/TO/eldrsim   (run from the project root)
set -u
ELDRSIM=${1:?usage: settings.sh PATH/TO/eldrsim}
DEFAULT=configs/default.json
[ -f "$DEFAULT" ] || { echo "run from the project root (no $DEFAULT here)"; exit 1; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/eldr-settings.XXXXXX")
trap 'chmod -R u+w "$TMP" 2>/dev/null; rm -rf "$TMP"' EXIT
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
OUT="$TMP/out"
FIT=(--set workload.warmup_requests=0 --set workload.calibration_requests=200 --set eldr.mask_pairs=1000)
SMALL=(--requests 20 "${FIT[@]}" -q)
# summary.json's value at a Python subscript path, e.g. json_at FILE '["config"]["eldr"]["variant"]'.
json_at() { $PY -c "import json,sys; print(json.load(open(sys.argv[1]))$2)" "$1"; }

# --- 3. eldr.model_file fixes the fit: its variant and kmeans, not the config's.
printf '{"format": "eldr-router-model", "version": 1, "variant": "binary", "kmeans": "vanilla"}\n' >"$TMP/hand.json"
expect_error "eldr.variant other than the model file's" "eldr.variant" "differs from the model file's 'binary'" \
  "remove eldr.variant" -- run "$DEFAULT" "${SMALL[@]}" --router eldr --set eldr.model_file="$TMP/hand.json" \
  --set eldr.variant=counts --out "$OUT"
expect_error "eldr.kmeans other than the model file's" "eldr.kmeans" "differs from the model file's 'vanilla'" \
  -- run "$DEFAULT" "${SMALL[@]}" --router eldr --set eldr.model_file="$TMP/hand.json" --set eldr.kmeans=balanced \
  --out "$OUT"
"$ELDRSIM" fit "$DEFAULT" "${FIT[@]}" --set eldr.variant=binary --set eldr.kmeans=vanilla \
  --out "$TMP/model.json" >/dev/null 2>&1
"$ELDRSIM" run "$DEFAULT" "${SMALL[@]}" --router eldr --set eldr.model_file="$TMP/model.json" --out "$TMP/file" \
  2>"$TMP/file.err"
check "without eldr.variant/kmeans the run records the model file's" \
  '[ "$(json_at "$TMP/file/summary.json" "[\"config\"][\"eldr\"][\"variant\"]")" = binary ] &&
   [ "$(json_at "$TMP/file/summary.json" "[\"config\"][\"eldr\"][\"kmeans\"]")" = vanilla ]'
"$ELDRSIM" run "$DEFAULT" "${SMALL[@]}" --router eldr --set eldr.model_file="$TMP/model.json" \
  --set eldr.variant=binary --out "$TMP/same" 2>/dev/null
check "the model file's own variant given again is accepted, same results" \
  'cmp -s "$TMP/file/requests.csv" "$TMP/same/requests.csv"'

# --- 3. A setting two options give differently, or that the run's router does not read.
expect_error "--router with --scheduler" "--router" "sets router to \"jsq\"" "--scheduler" "give one" \
  -- run "$DEFAULT" "${SMALL[@]}" --router jsq --scheduler configs/scheduler/llm-d-decode.yaml --out "$OUT"
expect_error "--scheduler with --set router" "--scheduler" "but --set sets it to eldr" \
  -- run "$DEFAULT" "${SMALL[@]}" --scheduler configs/scheduler/llm-d-decode.yaml --set router=eldr --out "$OUT"
expect_error "--rate with --set workload.rate_rps" "--rate" "workload.rate_rps" \
  -- run "$DEFAULT" "${SMALL[@]}" --rate 80 --set workload.rate_rps=100 --out "$OUT"
"$ELDRSIM" run "$DEFAULT" "${SMALL[@]}" --rate 80 --set workload.rate_rps=80 --out "$TMP/agree" 2>/dev/null
check "--rate with --set workload.rate_rps of the same value runs" '[ -f "$TMP/agree/summary.json" ]'
expect_error "a composed weight under router jsq" "--set: composed" "applies only to router 'composed'" "'jsq'" \
  -- run "$DEFAULT" "${SMALL[@]}" --router jsq --set composed.scorers.queue-scorer.weight=2 --out "$OUT"
expect_error "composed.scheduler under router jsq" "composed" "applies only to router 'composed'" \
  -- run "$DEFAULT" "${SMALL[@]}" --set composed.scheduler=configs/scheduler/llm-d-decode.yaml --out "$OUT"
expect_error "an example router's section under another router" "jsq_of_d" "applies only to router 'jsq_of_d'" \
  -- run "$DEFAULT" "${SMALL[@]}" --set jsq_of_d.d=3 --out "$OUT"

# --- 3. The prefill router's composition.
expect_error "prefill kv-cache-utilization-scorer without prefix caching" \
  "prefill_router.scorers.kv-cache-utilization-scorer" "serving.prefix_cache" \
  -- run "$DEFAULT" "${SMALL[@]}" --set 'prefill_router.scorers.kv-cache-utilization-scorer={}' --out "$OUT"
expect_error "prefill prefix-cache-scorer without prefix caching" \
  "prefill_router.scorers.prefix-cache-scorer" "routed at random" \
  -- run "$DEFAULT" "${SMALL[@]}" --set 'prefill_router.scorers.prefix-cache-scorer={"weight": 2}' --out "$OUT"
"$ELDRSIM" run "$DEFAULT" "${SMALL[@]}" --set serving.prefix_cache=true \
  --set 'prefill_router.scorers.kv-cache-utilization-scorer={}' --out "$TMP/kvpf" 2>/dev/null
check "... with prefix caching it runs" '[ -f "$TMP/kvpf/summary.json" ]'
expect_error "prefill {\"scorers\": {}}" "prefill_router.scorers" "names no plugin" "consistent-hash ring" \
  -- run "$DEFAULT" "${SMALL[@]}" --set 'prefill_router={"scorers": {}}' --out "$OUT"
expect_error "prefill {\"filters\": {}, \"picker\": {}}" "prefill_router.filters" "names no plugin" \
  -- run "$DEFAULT" "${SMALL[@]}" --set 'prefill_router={"filters": {}, "picker": {}}' --out "$OUT"
expect_error "a subnormal weight" "composed.scorers.queue-scorer.weight" "at least 1e-6" "1e-310" \
  -- run "$DEFAULT" "${SMALL[@]}" --router composed --set composed.scorers.queue-scorer.weight=1e-310 --out "$OUT"
expect_error "a weight too small to keep its digits" "prefill_router.scorers.queue-scorer.weight" "at least 1e-6" \
  -- run "$DEFAULT" "${SMALL[@]}" --set prefill_router.scorers.queue-scorer.weight=1e-9 --out "$OUT"
"$ELDRSIM" run "$DEFAULT" "${SMALL[@]}" --router composed --set 'composed.scorers.queue-scorer.weight=0' \
  --out "$TMP/noscore" 2>"$TMP/noscore.err"
drop_sanitizer_noise "$TMP/noscore.err"
check "a decode composition with no scorer left runs, with a one-line note" \
  '[ -f "$TMP/noscore/summary.json" ] && [ "$(wc -l <"$TMP/noscore.err")" = 1 ] &&
   grep -q "^eldrsim: note: router composed: no scorer has a weight above 0, so max-score-picker picks at random" \
     "$TMP/noscore.err"'
"$ELDRSIM" run "$DEFAULT" "${SMALL[@]}" --set 'prefill_router.scorers.queue-scorer.weight=0' \
  --out "$TMP/noscore-prefill" 2>"$TMP/noscore-prefill.err"
check "... and a prefill one" 'grep -q "^eldrsim: note: router prefill: no scorer" "$TMP/noscore-prefill.err"'

# --- 3. compare and table name a composition by what it is.
mkdir -p "$TMP/cmpA" "$TMP/cmpB"
"$ELDRSIM" run "$DEFAULT" "${SMALL[@]}" --router composed --set 'composed.scorers.queue-scorer.weight=1' \
  --out "$TMP/cmpA/run" 2>/dev/null
"$ELDRSIM" run "$DEFAULT" "${SMALL[@]}" --router composed \
  --set 'composed.scorers={"queue-scorer": {}, "kv-cache-utilization-scorer": {"weight": 3}}' --out "$TMP/cmpB/run" \
  2>/dev/null
expect_error "compare refuses two different compositions" "not comparable" "router composed:" "composition " \
  "--allow-different" -- compare "$TMP/cmpA" "$TMP/cmpB"
"$ELDRSIM" compare "$TMP/cmpA" "$TMP/cmpB" --allow-different >"$TMP/cmp.out" 2>&1
check "... and names them with --allow-different" \
  'grep -q "note: run differ: .*router composed:[0-9a-f]\{8\} vs composed:[0-9a-f]\{8\}" "$TMP/cmp.out"'
"$ELDRSIM" compare "$TMP/cmpA" "$TMP/cmpA" >"$TMP/cmp-same.out" 2>&1
check "the same composition compares" 'grep -q "^PASS" "$TMP/cmp-same.out"'
"$ELDRSIM" run "$DEFAULT" "${SMALL[@]}" --router composed --set composed.name=mine \
  --set 'composed.scorers.queue-scorer.weight=1' --out "$TMP/named" 2>/dev/null
"$ELDRSIM" table "$TMP/cmpA/run" "$TMP/cmpB/run" "$TMP/named" >"$TMP/table.out"
check "table names compositions by hash or name" \
  '[ "$(grep -c "^composed:[0-9a-f]\{8\} " "$TMP/table.out")" = 2 ] && grep -q "^composed:mine " "$TMP/table.out" &&
   [ "$(awk "NR>2{print \$1}" "$TMP/table.out" | sort -u | wc -l)" = 3 ]'

# --- 3. The routing cache is optional: a file that cannot be written is a note.
CACHED=(--requests 20 --set workload.warmup_requests=0 --set workload.calibration_requests=10 -q)
"$ELDRSIM" run "$DEFAULT" "${CACHED[@]}" --out "$TMP/uncached" 2>/dev/null
"$ELDRSIM" run "$DEFAULT" "${CACHED[@]}" --routing-cache "$TMP/cache" --out "$TMP/cached" 2>/dev/null
name=$(cd "$TMP/cache" 2>/dev/null && ls generated-*.bin | head -1)
rm -rf "$TMP/cache" && mkdir -p "$TMP/cache/$name/inside"
"$ELDRSIM" run "$DEFAULT" "${CACHED[@]}" --routing-cache "$TMP/cache" --out "$TMP/dir-entry" 2>"$TMP/dir-entry.err"
rc=$?
drop_sanitizer_noise "$TMP/dir-entry.err"
check "a directory in the cache file's place: the run goes on, same results" \
  '[ $rc = 0 ] && [ -n "$name" ] && diff -r "$TMP/uncached" "$TMP/dir-entry" >/dev/null'
check "... with notes naming the file" \
  'grep -q "^eldrsim: note: .*$name.*going on without the routing cache file" "$TMP/dir-entry.err" &&
   ! grep -qv "^eldrsim: note: " "$TMP/dir-entry.err"'
: >"$TMP/not-a-dir"
"$ELDRSIM" fit "$DEFAULT" "${FIT[@]}" --routing-cache "$TMP/not-a-dir/cache" \
  --out "$TMP/fit-nocache.json" >/dev/null 2>"$TMP/fit-nocache.err"
rc=$?
check "fit with a cache directory that cannot be made: the fit goes on, with a note" \
  '[ $rc = 0 ] && [ -s "$TMP/fit-nocache.json" ] && grep -q "^eldrsim: note: .*routing cache" "$TMP/fit-nocache.err"'

# --- 4. One reading of numbers: decimal, as JSON writes them, and the same range message everywhere.
expect_error "--seed 010 is not octal" "--seed" "decimal integer" "got 010" -- run "$DEFAULT" "${SMALL[@]}" --seed 010 \
  --out "$OUT"
expect_error "--requests 010 is not octal" "--requests" "no leading zeros" -- run "$DEFAULT" "${SMALL[@]}" \
  --requests 010 --out "$OUT"
expect_error "--rate 0x10 is not hex" "--rate" "decimal number" "no 0x" -- run "$DEFAULT" "${SMALL[@]}" --rate 0x10 \
  --out "$OUT"
expect_error "trace stats --requests 0x20" "--requests" "decimal integer" -- trace stats "$DEFAULT" --requests 0x20
expect_error "--seed 2^63" "--seed" "must be at most 9223372036854775807, got 9223372036854775808" \
  -- run "$DEFAULT" "${SMALL[@]}" --seed 9223372036854775808 --out "$OUT"
expect_error "--seed 2^64" "--seed" "must be at most 9223372036854775807, got 18446744073709551616" \
  -- run "$DEFAULT" "${SMALL[@]}" --seed 18446744073709551616 --out "$OUT"
expect_error "--set seed=2^63: the same message" "--set: seed: must be at most 9223372036854775807, got 9223372036854775808" \
  -- run "$DEFAULT" "${SMALL[@]}" --set seed=9223372036854775808 --out "$OUT"
expect_error "--set seed=2^64" "--set: seed: must be at most 9223372036854775807" \
  -- run "$DEFAULT" "${SMALL[@]}" --set seed=18446744073709551616 --out "$OUT"
expect_error "--set workload.rate_rps=0x10" "--set: workload.rate_rps: must be a decimal number" \
  -- run "$DEFAULT" "${SMALL[@]}" --set workload.rate_rps=0x10 --out "$OUT"
expect_error "--set seed=010" "--set: seed: must be a decimal number" "got 010" \
  -- run "$DEFAULT" "${SMALL[@]}" --set seed=010 --out "$OUT"
"$ELDRSIM" run "$DEFAULT" "${SMALL[@]}" --seed 10 --rate 60.5 --out "$TMP/decimal" 2>/dev/null
check "decimal values still run" '[ "$(json_at "$TMP/decimal/summary.json" "[\"config\"][\"seed\"]")" = 10 ]'

# calibrate checks its settings and its measured rows before the first simulation.
CAL=(calibrate traces/calibration/rr_task_tpot.csv --model qwen3-30b-a3b --out "$TMP/cal.json")
expect_error "calibrate --start out of the fit's bounds" "--start: decode_bw_efficiency must be between 0.05 and 1.0" \
  "got -1.0" -- "${CAL[@]}" --start -1 0.5 5
expect_error "calibrate --duration beyond the key's range" "--duration: must be between 1e-06 and 1e+07" \
  -- "${CAL[@]}" --duration 1e9
expect_error "calibrate --duration too long for the measured rates" "--duration" "requests a run may hold" \
  -- "${CAL[@]}" --duration 500000
expect_error "calibrate --warmup beyond the key's range" "--warmup" "must be between 0 and 10000000" \
  -- "${CAL[@]}" --warmup 20000000
$PY - traces/calibration/rr_task_tpot.csv "$TMP/swapped.csv" <<'PYEOF'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
rows[1]["tpot_p50_ms"], rows[1]["tpot_p99_ms"] = rows[1]["tpot_p99_ms"], rows[1]["tpot_p50_ms"]
w = csv.DictWriter(open(sys.argv[2], "w", newline=""), fieldnames=list(rows[0]))
w.writeheader()
w.writerows(rows)
PYEOF
expect_error "calibrate: a row whose TPOT P99 is below its P50" "swapped.csv: line 3" "is below tpot_p" \
  -- calibrate "$TMP/swapped.csv" --model qwen3-30b-a3b --out "$TMP/cal.json"

# --- 5. Messages name what the user gave and can fix.
expect_error "--router blamed, not the config" "--router: unknown value" -- run "$DEFAULT" "${SMALL[@]}" \
  --router nosuch --out "$OUT"
expect_error "--scheduler blamed" "--scheduler: file not found" -- run "$DEFAULT" "${SMALL[@]}" \
  --scheduler "$TMP/none.yaml" --out "$OUT"
expect_error "--set blamed, with its key" "--set: workload.rate_rps: must be" -- run "$DEFAULT" "${SMALL[@]}" \
  --set workload.rate_rps=-1 --out "$OUT"
check "  ... not the config file" '! grep -q "default.json" "$TMP/stderr"'
expect_error "fit: --set blamed" "--set: eldr.tau" -- fit "$DEFAULT" --set eldr.tau=9 --out "$TMP/m.json"
long="$TMP"
for i in 1 2 3 4 5 6; do long="$long/$(printf 'd%.0s' $(seq 200))"; done
mkdir -p "$long" && $PY -c 'import json,sys; d=json.load(open(sys.argv[1])); d["workload"]["rate_rsp"]=5; json.dump(d, open(sys.argv[2], "w"))' \
  "$DEFAULT" "$long/bad.json"
expect_error "a long path is shortened in its middle: the problem still shows" "bad.json: workload.rate_rsp: unknown key" \
  "did you mean 'rate_rps'" -- run "$long/bad.json" "${SMALL[@]}" --out "$OUT"
check "  ... and the line stays short" '[ "$(wc -c <"$TMP/stderr")" -lt 1100 ]'
expect_error "an unknown command suggests the closest" "unknown command 'runn'" "did you mean 'run'?" -- runn "$DEFAULT"
expect_error "an unknown nested command" "unknown command 'trace gn'" "did you mean 'trace gen'?" -- trace gn "$DEFAULT"
"$ELDRSIM" trace gen "$DEFAULT" --set workload.measured_requests=20 --set workload.warmup_requests=0 \
  --set workload.calibration_requests=0 --out "$TMP/trace" -q >"$TMP/gen.out" 2>&1
check "trace gen -q: quiet" '[ $? = 0 ] && [ ! -s "$TMP/gen.out" ] && [ -f "$TMP/trace/trace.json" ]'
"$ELDRSIM" fit "$DEFAULT" "${FIT[@]}" --out "$TMP/quiet-model.json" -q >"$TMP/fit.out" 2>&1
check "fit -q: quiet" '[ ! -s "$TMP/fit.out" ] && [ -s "$TMP/quiet-model.json" ]'
mkdir -p "$TMP/sweepout/main"
cp -r "$TMP/cmpA/run" "$TMP/sweepout/main/a" && cp -r "$TMP/cmpB/run" "$TMP/sweepout/main/b"
expect_error "table on a directory of runs points to them and to report" "a directory of 2 runs" \
  "$TMP/sweepout/main/a" "eldrsim report $TMP/sweepout" -- table "$TMP/sweepout"

# A write that fails (here: past a file-size limit, as on a full disk) names the output, not its staging place.
(trap '' XFSZ; ulimit -f 40; exec "$ELDRSIM" run "$DEFAULT" --requests 400 --set workload.warmup_requests=0 -q \
  --out "$TMP/toolarge") >/dev/null 2>"$TMP/toolarge.err"
rc=$?
check "run: a failed write names the output file, not the staging directory" \
  '[ $rc = 2 ] && grep -q "^eldrsim: error: $TMP/toolarge/requests.csv: write failed: File too large ($TMP/toolarge left as it was)$" \
     "$TMP/toolarge.err" && [ ! -e "$TMP/toolarge" ]'
(trap '' XFSZ; ulimit -f 40; exec "$ELDRSIM" trace gen "$DEFAULT" --set workload.measured_requests=2000 \
  --set workload.warmup_requests=0 --out "$TMP/toolarge-trace" -q) >/dev/null 2>"$TMP/toolarge-trace.err"
check "trace gen: the same" 'grep -q "^eldrsim: error: $TMP/toolarge-trace/requests.jsonl: write failed" "$TMP/toolarge-trace.err" &&
   ! grep -q "tmp@" "$TMP/toolarge-trace.err"'

# trace import vllm's advice for long prompts names only what it takes (it has no --max-prompt).
$PY - tests/data/vllm/responses_npy.jsonl "$TMP/long.jsonl" <<'PYEOF'
import base64, io, json, sys
import numpy as np
row = json.loads(open(sys.argv[1]).readline())
f = io.BytesIO()
np.lib.format.write_array(f, np.tile(np.arange(6, dtype=np.int16), (8200, 26, 1)))
row["prompt_routed_experts"] = base64.b64encode(f.getvalue()).decode()
row["usage"]["prompt_tokens"] = 8200
row["arrival_s"] = 0.5
open(sys.argv[2], "w").write(json.dumps(row) + "\n")
PYEOF
"$ELDRSIM" trace import vllm "$TMP/long.jsonl" --model deepseek-v2-lite --out "$TMP/long-trace" >"$TMP/long.out" 2>&1
check "vllm: a prompt over the default budget: the advice leaves out --max-prompt" \
  'grep -q "prompts exceed the default serving.prefill_token_budget of 8192: raise it" "$TMP/long.out" &&
   ! grep -q -- "--max-prompt" "$TMP/long.out"'
printf 'TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9799600,9000,10\n2023-11-16 18:17:04.0319600,300,8\n' \
  >"$TMP/azure-long.csv"
"$ELDRSIM" trace import azure "$TMP/azure-long.csv" --out "$TMP/azure-long" >"$TMP/azure-long.out" 2>&1
check "azure, which takes --max-prompt, still advises it" \
  'grep -q "exceed the default serving.prefill_token_budget of 8192: raise it or re-import with --max-prompt" \
     "$TMP/azure-long.out"'

# Arrivals a trace cannot hold are blamed on the input line, not on the trace being written.
printf 'TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9799600,4808,10\n2024-11-16 18:17:04.0319600,3180,8\n' \
  >"$TMP/azure.csv"
expect_error "azure: arrivals scaled past any time" "azure.csv: line 3" "too far from the first" "--time-scale" \
  -- trace import azure "$TMP/azure.csv" --time-scale 1e308 --out "$TMP/azure-trace"
$PY - tests/data/vllm/responses_lists.jsonl "$TMP/far.jsonl" <<'PYEOF'
import json, sys
lines = open(sys.argv[1]).read().splitlines()
rows = [json.loads(l) for l in lines]
rows[0]["arrival_s"], rows[1]["arrival_s"] = 1.7e308, -1.7e308
open(sys.argv[2], "w").write("".join(json.dumps(r) + "\n" for r in rows))
PYEOF
expect_error "vllm: arrivals too far apart" "far.jsonl: line 1: arrival_s" "too far from the first" \
  -- trace import vllm "$TMP/far.jsonl" --model deepseek-v2-lite --out "$TMP/far-trace"

finish
