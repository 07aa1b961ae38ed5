#!/usr/bin/env bash
# Every setting takes effect or is an error, numbers mean what they say:
#  - eldr.variant/kmeans against the model file's (recorded when absent, refused when they differ);
#  - --router, --scheduler and --set of the same key with different values; a router's section under
#    another router; prefill scorers that are constant without prefix caching, a prefill section naming
#    no plugin, weights too small to keep their digits; a composition of no scorer is noted;
#  - compare and table name a composition by what it is and refuse two different ones;
#  - a routing cache that cannot be written is a note, and the run goes on.
#  - numbers, in options and --set values, are decimal as JSON writes them, with one range message;
#    calibrate checks its settings and measured rows before simulating;
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

finish
