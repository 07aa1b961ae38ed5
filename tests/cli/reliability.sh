#!/usr/bin/env bash
# Hostile inputs (issue 17): deep nesting, NaN and infinities, null, duplicate keys, a count of 0,
# results without data, cut or mixed result directories, unusable output paths, Ctrl-C during a run
# and a sweep, CLI11's range errors. Each bad input must exit 2 with one "eldrsim: error:" line.
# Usage: reliability.sh PATH/TO/eldrsim   (run from the project root)
set -u
ELDRSIM=${1:?usage: reliability.sh PATH/TO/eldrsim}
DEFAULT=configs/default.json
[ -f "$DEFAULT" ] || { echo "run from the project root (no $DEFAULT here)"; exit 1; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/eldr-reliability.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
OUT="$TMP/out"
SMALL=(--requests 20 --set workload.warmup_requests=0 -q --out "$OUT")
. "$(dirname "$0")/lib.sh"

# ---------------------------------------------------------------- deep and wide JSON: no crash
/usr/bin/python3 - "$TMP" "$DEFAULT" <<'PY'
import json, sys
tmp = sys.argv[1]
base = open(sys.argv[2]).read().rstrip().rstrip("}")  # the default config, open for one more key
n = 100000
open(f"{tmp}/deep_object.json", "w").write('{"description": ' + '{"a": ' * n + '1' + '}' * n + '}')
open(f"{tmp}/deep_array.json", "w").write('{"description": ' + '[' * n + ']' * n + '}')
open(f"{tmp}/deep_value.txt", "w").write('[' * 50000 + ']' * 50000)
# Just past the limit (101 levels) and at it (100 levels, here a legal but unknown key's value).
open(f"{tmp}/depth101.json", "w").write(base + ', "x": ' + '[' * 100 + ']' * 100 + '}')
open(f"{tmp}/depth100.json", "w").write(base + ', "x": ' + '[' * 99 + ']' * 99 + '}')
open(f"{tmp}/wide.json", "w").write(base + ', "x": [' + ','.join(['{}'] * 200000) + ']}')
open(f"{tmp}/long_router.json", "w").write(base.replace('"router": "round_robin"', '"router": "' + 'r' * 1000000 + '"') + '}')
PY
expect_error "100,000 nested objects" "deep_object.json" "nested deeper than 100 levels" -- run "$TMP/deep_object.json" "${SMALL[@]}"
expect_error "100,000 nested arrays" "deep_array.json" "nested deeper than 100 levels" -- run "$TMP/deep_array.json" "${SMALL[@]}"
expect_error "50,000 nested arrays via --set" "--set: description" "nested deeper than 100 levels" -- \
  run "$DEFAULT" --set "description=$(cat "$TMP/deep_value.txt")" "${SMALL[@]}"
expect_error "a --set key path of 60,000 segments" "--set: key path" "nests deeper than 100 levels" -- \
  run "$DEFAULT" --set "$(/usr/bin/python3 -c "print('.'.join(['a'] * 60000))")=1" "${SMALL[@]}"
expect_error "101 levels" "depth101.json" "nested deeper than 100 levels" -- run "$TMP/depth101.json" "${SMALL[@]}"
expect_error "100 levels parse (then the key is unknown)" "depth100.json: x: unknown key" -- run "$TMP/depth100.json" "${SMALL[@]}"
expect_error "a model file nested too deep" "deep_object.json" "nested deeper" -- \
  run "$DEFAULT" --set model="$TMP/deep_object.json" "${SMALL[@]}"
expect_error "200,000 objects in a list" "wide.json: x: unknown key" -- run "$TMP/wide.json" "${SMALL[@]}"
expect_error "a 1 MB string value" "long_router.json: router: unknown value" "more characters" -- \
  run "$TMP/long_router.json" "${SMALL[@]}"
check "the 1 MB string is not repeated whole" '[ $(wc -c <"$TMP/stderr") -lt 4000 ]'

# ---------------------------------------------------------------- NaN, infinities, null, 0
for v in nan NaN inf -inf infinity 1e999; do
  expect_error "--rate $v" "--rate" "$v" -- run "$DEFAULT" --rate "$v" "${SMALL[@]}"
done
expect_error "--tol-p50 nan" "--tol-p50" "nan" -- compare "$TMP" "$TMP" --tol-p50 nan
expect_error "--set router=null" "--set: router: is null" -- run "$DEFAULT" --set router=null "${SMALL[@]}"
expect_error "--set workload=null" "--set: workload: is null" -- run "$DEFAULT" --set workload=null -q --out "$OUT"
expect_error "--set workload.rate_rps=NaN (a string)" "workload.rate_rps" "must be a number" -- \
  run "$DEFAULT" --set workload.rate_rps=NaN "${SMALL[@]}"
expect_error "measured_requests=0 is not the default" "workload.measured_requests: must be between 1 and" "got 0" -- \
  run "$DEFAULT" --set workload.measured_requests=0 -q --out "$OUT"
expect_error "horizon_s=0 is not \"no horizon\"" "workload.horizon_s: must be between" "got 0" -- \
  run "$DEFAULT" --set workload.horizon_s=0 "${SMALL[@]}"
printf '{"name": "n", "base": "%s", "grid": {"router": ["jsq", null]}}\n' "$PWD/$DEFAULT" >"$TMP/null_grid.json"
expect_error "a sweep grid value null" "null_grid.json" "grid.router" "null" -- sweep "$TMP/null_grid.json" -q --out "$TMP/sw" --list
printf '{"name": "n", "base": "%s", "set": {"router": null}}\n' "$PWD/$DEFAULT" >"$TMP/null_set.json"
expect_error "a sweep set value null" "null_set.json" "set.router" "null" -- sweep "$TMP/null_set.json" -q --out "$TMP/sw" --list

# ---------------------------------------------------------------- duplicate keys
printf '{"router": "jsq", "workload": {"rate_rps": 60, "rate_rps": 5}}\n' >"$TMP/dup.json"
expect_error "a duplicate key" "dup.json: workload.rate_rps: duplicate key" -- run "$TMP/dup.json" "${SMALL[@]}"
printf '{"router": "jsq", "router": "jsq"}\n' >"$TMP/dup_top.json"
expect_error "a duplicate top-level key" "dup_top.json: router: duplicate key" -- run "$TMP/dup_top.json" "${SMALL[@]}"
printf '{"x": [{"a": 1}, {"a": 1, "a": 2}]}\n' >"$TMP/dup_list.json"
expect_error "a duplicate key inside a list" "dup_list.json: x[1].a: duplicate key" -- run "$TMP/dup_list.json" "${SMALL[@]}"
expect_error "a duplicate key via --set" "--set: workload: rate_rps: duplicate key" -- \
  run "$DEFAULT" --set 'workload={"rate_rps": 1, "rate_rps": 2}' "${SMALL[@]}"
printf '{"name": "n", "name": "m"}\n' >"$TMP/dup_sweep.json"
expect_error "a duplicate key in a sweep file" "dup_sweep.json: name: duplicate key" -- sweep "$TMP/dup_sweep.json" --list

# ---------------------------------------------------------------- CLI11's errors: one line, readable
expect_error "--rate 0" "--rate" "must be above 0, got 0" -- run "$DEFAULT" --rate 0 "${SMALL[@]}"
expect_error "--requests 0" "--requests" "must be above 0, got 0" -- run "$DEFAULT" --requests 0 -q --out "$OUT"
expect_error "sweep -j 0" "-j" "must be above 0, got 0" -- sweep "$TMP/null_grid.json" -j 0
expect_error "sweep --seeds 0" "--seeds" "between 1 and 1000, got 0" -- sweep "$TMP/null_grid.json" --seeds 0
expect_error "an unknown option" "--frobnicate" -- run "$DEFAULT" --frobnicate
expect_error "a missing argument" "config" -- run
check "no 309-digit numbers" '! grep -q "[0-9]\{40\}" "$TMP/stderr"'

# ---------------------------------------------------------------- unusable output paths, before simulating
: >"$TMP/a_file"
expect_error "run --out under a file" "$TMP/a_file/out" -- run "$DEFAULT" -q --out "$TMP/a_file/out"
expect_error "run --out that is a file" "$TMP/a_file" "not a directory" -- run "$DEFAULT" -q --out "$TMP/a_file"
printf '{"name": "main", "base": "%s", "set": {"workload.measured_requests": 5, "workload.warmup_requests": 0}, "grid": {"router": ["jsq", "round_robin"]}}\n' \
  "$PWD/$DEFAULT" >"$TMP/ok_sweep.json"
expect_error "sweep -o under a file" "$TMP/a_file/sw" -- sweep "$TMP/ok_sweep.json" -q -o "$TMP/a_file/sw"
expect_error "sweep --emit-slurm under a file" "$TMP/a_file/slurm" -- sweep "$TMP/ok_sweep.json" -q --emit-slurm "$TMP/a_file/slurm"
expect_error "fit --out under a file" "$TMP/a_file: exists and is not a directory" -- fit "$DEFAULT" --out "$TMP/a_file/m.json"
expect_error "fit --out that is a directory" "$TMP: is a directory" -- fit "$DEFAULT" --out "$TMP"
expect_error "trace gen --out under a file" "$TMP/a_file/tr" -- trace gen "$DEFAULT" --out "$TMP/a_file/tr"
expect_error "trace stats --json under a file" "$TMP/a_file: exists and is not a directory" -- trace stats "$DEFAULT" --json "$TMP/a_file/s.json"
check "sweep prints its plan at once" \
  '"$ELDRSIM" sweep "$TMP/ok_sweep.json" --list -o "$TMP/plan" >/dev/null 2>&1; "$ELDRSIM" sweep "$TMP/ok_sweep.json" -o "$TMP/a_file/x" 2>&1 | head -1 | grep -q "^sweep: .*ok_sweep.json: 2 points"'

# ---------------------------------------------------------------- results without data are missing, not 0
"$ELDRSIM" run "$DEFAULT" --requests 50 --set workload.warmup_requests=0 --set workload.horizon_s=0.01 \
  --out "$TMP/short" >"$TMP/short.out" 2>/dev/null
rc=$?
check "a run where nothing finished exits 3" '[ $rc = 3 ]'
check "its summary has null TPOT and TTFT" '/usr/bin/python3 -c "
import json, sys
s = json.load(open(sys.argv[1]))
assert s[\"tpot_ms\"][\"p50\"] is None and s[\"ttft_ms\"][\"p99\"] is None and s[\"throughput_tok_s\"] is None, s[\"tpot_ms\"]
" "$TMP/short/summary.json"'
check "its summary line says so" 'grep -q "no measured request finished" "$TMP/short.out" && ! grep -q "0.00 ms" "$TMP/short.out"'
check "table shows - for the missing values" '"$ELDRSIM" table "$TMP/short" | tail -1 | grep -q "^round_robin  *-  *-  *- "'

# ---------------------------------------------------------------- compare and table verify what they read
"$ELDRSIM" run "$DEFAULT" --requests 60 --set workload.warmup_requests=0 -q --out "$TMP/base/r"
cp -r "$TMP/base" "$TMP/cut"
head -c $(( $(wc -c <"$TMP/cut/r/requests.csv") / 2 )) "$TMP/cut/r/requests.csv" | sed '$d' >"$TMP/cut/r/requests.half"
mv "$TMP/cut/r/requests.half" "$TMP/cut/r/requests.csv"
expect_error "compare: requests.csv cut in half" "cut/r/requests.csv" "does not match summary.json" -- compare "$TMP/base" "$TMP/cut"
expect_error "table: requests.csv cut in half" "cut/r/requests.csv" "does not match summary.json" -- table "$TMP/cut/r"
# A summary from before the checksums: the row count still catches the cut.
/usr/bin/python3 - "$TMP/cut/r/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1])); del s["files"]; json.dump(s, open(sys.argv[1], "w"))
PY
expect_error "compare: cut requests.csv, summary without checksums" "cut/r/requests.csv" "measured rows, summary.json counts 60" -- \
  compare "$TMP/base" "$TMP/cut"
cp -r "$TMP/base" "$TMP/nosum"
rm "$TMP/nosum/r/summary.json"
expect_error "compare: a run without summary.json" "nosum/r/summary.json" "missing" -- compare "$TMP/base" "$TMP/nosum"
expect_error "table: a run without summary.json" "nosum/r/summary.json" "missing" -- table "$TMP/nosum/r"
# Mixed: a new requests.csv beside an old summary.json.
"$ELDRSIM" run "$DEFAULT" --requests 60 --set workload.warmup_requests=0 --seed 7 -q --out "$TMP/other"
cp -r "$TMP/base" "$TMP/mixed"
cp "$TMP/other/requests.csv" "$TMP/mixed/r/requests.csv"
expect_error "table: new requests.csv, old summary.json" "mixed/r/requests.csv" "does not match" -- table "$TMP/mixed/r"
expect_error "compare: new requests.csv, old summary.json" "mixed/r/requests.csv" "does not match" -- compare "$TMP/base" "$TMP/mixed"
check "an intact run still compares" '"$ELDRSIM" compare "$TMP/base" "$TMP/base" >/dev/null'

# ---------------------------------------------------------------- writing over old results
cp -r "$TMP/base/r" "$TMP/over"
echo "notes" >"$TMP/over/notes.txt"
"$ELDRSIM" run "$DEFAULT" --requests 30 --set workload.warmup_requests=0 -q --out "$TMP/over"
check "a run over old results: the new ones, whole" '"$ELDRSIM" table "$TMP/over" | tail -1 | grep -q " 30$"'
check "... other files in the directory stay" '[ -f "$TMP/over/notes.txt" ]'
"$ELDRSIM" run "$DEFAULT" --requests 30 --set workload.warmup_requests=0 -q --out "$TMP/base/r2"
"$ELDRSIM" run "$DEFAULT" --requests 40 --set workload.warmup_requests=0 -q --steps --out "$TMP/base/r2"
"$ELDRSIM" run "$DEFAULT" --requests 30 --set workload.warmup_requests=0 -q --out "$TMP/base/r2"
check "a results-only directory is swapped whole (no stale steps.csv)" '[ ! -e "$TMP/base/r2/steps.csv" ] && "$ELDRSIM" table "$TMP/base/r2" >/dev/null'
mkdir "$TMP/real" && ln -s "$TMP/real" "$TMP/link"
"$ELDRSIM" run "$DEFAULT" --requests 30 --set workload.warmup_requests=0 -q --out "$TMP/link"
"$ELDRSIM" run "$DEFAULT" --requests 40 --set workload.warmup_requests=0 -q --out "$TMP/link"
check "a symbolic link to a results directory stays a link, the results behind it" \
  '[ -L "$TMP/link" ] && "$ELDRSIM" table "$TMP/real" | tail -1 | grep -q " 40$"'
# A killed run's staging directory (SIGKILL leaves it) is removed by the next run there.
mkdir -p "$TMP/base/.r2.eldr-tmp@$(hostname)@2147483646" "$TMP/base/r2/.eldr-tmp@$(hostname)@2147483645" \
  "$TMP/base/.r2.eldr-tmp@another-host@1"
"$ELDRSIM" run "$DEFAULT" --requests 30 --set workload.warmup_requests=0 -q --out "$TMP/base/r2"
check "another host's staging directory is left alone" '[ -d "$TMP/base/.r2.eldr-tmp@another-host@1" ]'
rmdir "$TMP/base/.r2.eldr-tmp@another-host@1"
check "no staging directories left" '[ -z "$(find "$TMP" -name "*.eldr-tmp@*")" ]'

# ---------------------------------------------------------------- Ctrl-C
# wait_for PATTERN: until a file or directory matching the find pattern exists under $TMP (10 s at most).
wait_for() {
  for _ in $(seq 100); do
    [ -n "$(find "$TMP" -name "$1" 2>/dev/null | head -1)" ] && return 0
    sleep 0.1
  done
  return 1
}
cp -r "$TMP/base/r" "$TMP/keep"
cp "$TMP/keep/summary.json" "$TMP/keep.summary"
"$ELDRSIM" run "$DEFAULT" --requests 200000 --set workload.warmup_requests=0 -q --out "$TMP/keep" 2>"$TMP/int.err" &
pid=$!
wait_for ".keep.eldr-tmp@*"
sleep 2  # into the simulation (SimGrid installs its own SIGINT handler when the engine starts)
kill -INT $pid
wait $pid
rc=$?
check "Ctrl-C during a run exits 130" '[ $rc = 130 ]'
# (Under ASan the sanitizer's own makecontext warnings come first: `make sanitize`.)
check "... with one line" '[ $(grep -cv "^==\|^False positive\|^For details" "$TMP/int.err") = 1 ] && grep -qx "eldrsim: error: interrupted by SIGINT: $TMP/keep: no results written, earlier ones intact" "$TMP/int.err"'
check "... the old results intact" 'cmp -s "$TMP/keep/summary.json" "$TMP/keep.summary" && "$ELDRSIM" table "$TMP/keep" >/dev/null'
check "... no staging directory left" '[ -z "$(find "$TMP" -name "*.eldr-tmp@*")" ]'

printf '{"name": "big", "base": "%s", "set": {"workload.measured_requests": 200000, "workload.warmup_requests": 0}, "grid": {"seed": [1, 2, 3, 4, 5, 6]}}\n' \
  "$PWD/$DEFAULT" >"$TMP/big_sweep.json"
"$ELDRSIM" sweep "$TMP/big_sweep.json" -j 2 --no-fit -o "$TMP/bigsw" 2>"$TMP/sw.err" &
pid=$!
wait_for ".tmp.seed=*"
sleep 0.5
check "a sweep makes each point's directory when the point starts" '[ $(find "$TMP/bigsw" -name ".tmp.*" | wc -l) = 2 ]'
kill -INT $pid
wait $pid
rc=$?
check "Ctrl-C during a sweep exits 130" '[ $rc = 130 ]'
check "... with one error line" '[ $(grep -c "^eldrsim: error: " "$TMP/sw.err") = 1 ] && grep -q "interrupted by SIGINT: $TMP/bigsw: 0 of 6 points done, kept" "$TMP/sw.err"'
check "... and no temporaries left" '[ -z "$(find "$TMP/bigsw" -name ".tmp.*" -o -name "*.eldr-tmp@*" -o -name "*.failed.log")" ]'

# ---------------------------------------------------------------- the default -j: the CPUs we may use
taskset -c 0 "$ELDRSIM" sweep "$TMP/ok_sweep.json" --no-fit -o "$TMP/oksw" 2>"$TMP/ok.err"
check "the default -j follows the affinity mask" 'grep -q "1 at a time" "$TMP/ok.err"'

# ---------------------------------------------------------------- report on broken results: one line, no report/
cp -r "$TMP/oksw" "$TMP/rep"
expect_error "report --out under a file" "$TMP/a_file/rep" "cannot write the report here" -- report "$TMP/rep" --out "$TMP/a_file/rep"
rm "$TMP/rep/main/router=jsq/requests.csv"
expect_error "report: a point's requests.csv missing" "router=jsq/requests.csv: No such file or directory" -- report "$TMP/rep"
check "... leaves no report directory" '[ -z "$(ls -A "$TMP/rep" | grep report)" ]'
head -c 3000 /dev/urandom >"$TMP/rep/combined.csv"
expect_error "report: combined.csv is binary" "combined.csv: not a readable CSV" -- report "$TMP/rep"
printf 'sweep,point\n"unterminated\n' >"$TMP/rep/combined.csv"
expect_error "report: combined.csv is cut inside a quote" "combined.csv: not a readable CSV (EOF inside string" -- report "$TMP/rep"
check "... and still no report directory" '[ -z "$(ls -A "$TMP/rep" | grep report)" ]'

# Trace importers: a count of zero is an error, never "all" (leaving the option out is all).
expect_error "trace import azure --limit 0" "--limit" -- trace import azure --out "$TMP/imp" --limit 0
expect_error "trace import mooncake --max-prompt 0" "--max-prompt" -- trace import mooncake --out "$TMP/imp" --max-prompt 0
expect_error "trace import esft --sequences 0" "--sequences" -- trace import esft --out "$TMP/imp" --sequences 0
finish
