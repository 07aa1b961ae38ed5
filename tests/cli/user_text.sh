#!/usr/bin/env bash
# Every text a user gives on the command line (options, positionals, --set keys and values, paths)
# is checked before any work: an empty one or one that is not UTF-8 is one line and exit 2 from
# every command, and no message prints a byte that is not UTF-8. Numbers in messages print the bound
# and the value apart. A run too large to hold in memory is refused before it starts.
# Usage: user_text.sh PATH/TO/eldrsim   (run from the project root)
set -u
ELDRSIM=${1:?usage: user_text.sh PATH/TO/eldrsim}
DEFAULT=configs/default.json
[ -f "$DEFAULT" ] || { echo "run from the project root (no $DEFAULT here)"; exit 1; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/eldr-text.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
. "$(dirname "$0")/lib.sh"

FF=$'\xff'
BAD=$'caf\xc3\x28'       # a two-byte lead with a bad continuation
SURROGATE=$'\xed\xa0\x80' # U+D800 encoded: not UTF-8
OVERLONG=$'\xc0\xaf'      # '/' in two bytes: not UTF-8
OUT="$TMP/out"
SMALL=(--requests 20 --set workload.warmup_requests=0 -q)

# The message itself must be UTF-8 (the bad byte is escaped, not echoed).
utf8_stderr() { /usr/bin/python3 -c 'import sys; open(sys.argv[1], "rb").read().decode("utf-8")' "$TMP/stderr" 2>/dev/null; }

expect_error "run: free text in --set (the issue's case)" "--set" "not valid UTF-8" "0xFF" -- \
  run "$DEFAULT" "${SMALL[@]}" --set "description=${FF}"$'\xfe' --out "$OUT"
check "  ... the message is UTF-8" utf8_stderr
check "  ... nothing written" '[ ! -e "$OUT" ]'
expect_error "run: --router" "--router" "not valid UTF-8" -- run "$DEFAULT" "${SMALL[@]}" --router "$FF" --out "$OUT"
expect_error "run: a --set key" "--set" "not valid UTF-8" -- run "$DEFAULT" "${SMALL[@]}" --set "work${FF}=1" --out "$OUT"
expect_error "run: a surrogate in --set" "not valid UTF-8" -- run "$DEFAULT" "${SMALL[@]}" --set "description=$SURROGATE" --out "$OUT"
expect_error "run: an overlong form in --set" "not valid UTF-8" -- run "$DEFAULT" "${SMALL[@]}" --set "description=$OVERLONG" --out "$OUT"
cp "$DEFAULT" "$TMP/conf${FF}.json"
expect_error "run: a config path that is not UTF-8" "config" "not valid UTF-8" -- run "$TMP/conf${FF}.json" "${SMALL[@]}" --out "$OUT"
check "  ... the message is UTF-8" utf8_stderr
expect_error "run: --out" "--out" "not valid UTF-8" -- run "$DEFAULT" "${SMALL[@]}" --out "$TMP/o${BAD}"
expect_error "run: --routing-cache" "--routing-cache" "not valid UTF-8" -- run "$DEFAULT" "${SMALL[@]}" --routing-cache "$TMP/c${FF}" --out "$OUT"
# Valid UTF-8 beyond ASCII is text like any other.
"$ELDRSIM" run "$DEFAULT" "${SMALL[@]}" --set "description=Grüße, 東京 🚀" --out "$TMP/utf8" 2>"$TMP/stderr"
check "run: UTF-8 text beyond ASCII is accepted and echoed" \
  '/usr/bin/python3 -c "import json,sys; assert json.load(open(sys.argv[1]))[\"config\"][\"description\"] == \"Grüße, 東京 🚀\"" "$TMP/utf8/summary.json"'

# Every command checks its texts the same way.
# (The command line is checked before any file is read: the files named need not exist.)
expect_error "sweep: --set value" "--set" "not valid UTF-8" -- sweep "$TMP/sweep.json" --set "description=$FF" --out "$TMP/sw"
expect_error "sweep: the sweep file's path" "sweep" "not valid UTF-8" -- sweep "$TMP/s${FF}.json" --out "$TMP/sw"
expect_error "fit: --out" "--out" "not valid UTF-8" -- fit "$DEFAULT" --out "$TMP/m${FF}.json"
expect_error "trace gen: --out" "--out" "not valid UTF-8" -- trace gen "$DEFAULT" --out "$TMP/t${FF}"
expect_error "trace import vllm: --label" "--label" "not valid UTF-8" -- \
  trace import vllm tests/data/vllm/responses_nested.jsonl --model models/deepseek-v2-lite.json --out "$TMP/v" --label "$FF"
expect_error "trace stats: --set" "--set" "not valid UTF-8" -- trace stats "$DEFAULT" --set "description=$FF"
expect_error "table: a results path" "results" "not valid UTF-8" -- table "$TMP/r${FF}"
expect_error "compare: a results path" "not valid UTF-8" -- compare "$TMP/a" "$TMP/b${FF}"
expect_error "report: the results path" "results" "not valid UTF-8" -- report "$TMP/r${FF}"
expect_error "calibrate: --model" "--model" "not valid UTF-8" -- calibrate "$TMP/m.csv" --model "$FF" --out "$TMP/c.json"
expect_error "validate: --out" "--out" "not valid UTF-8" -- validate --out "$TMP/v${FF}"

# An empty path (or any empty text) means nothing: an error everywhere, not "the working directory".
expect_error "run: --out ''" "--out" "must not be empty" -- run "$DEFAULT" "${SMALL[@]}" --out ''
expect_error "sweep: --out ''" "--out" "must not be empty" -- sweep "$TMP/sweep.json" --out ''
expect_error "report: --out ''" "--out" "must not be empty" -- report "$TMP/r" --out ''
expect_error "fit: --out ''" "--out" "must not be empty" -- fit "$DEFAULT" --out ''
expect_error "trace gen: --out ''" "--out" "must not be empty" -- trace gen "$DEFAULT" --out ''
expect_error "trace import azure: --out ''" "--out" "must not be empty" -- trace import azure --out ''
expect_error "calibrate: --out ''" "--out" "must not be empty" -- calibrate "$TMP/m.csv" --model qwen3-30b-a3b --out ''
expect_error "validate: --out ''" "--out" "must not be empty" -- validate --out ''
expect_error "run: an empty config path" "config" "must not be empty" -- run '' "${SMALL[@]}" --out "$OUT"
expect_error "run: --router ''" "--router" "must not be empty" -- run "$DEFAULT" "${SMALL[@]}" --router '' --out "$OUT"

# Bounds and values print apart (shortest round-trip digits, never %g's six).
expect_error "a value just above a bound shows its digits" "between 1e-06 and 1e+07" "got 10000000.000001" -- \
  run "$DEFAULT" "${SMALL[@]}" --set workload.rate_rps=10000000.000001 --out "$OUT"
expect_error "a subnormal rate is not 'above 0'" "--rate" "normal positive number" "got 1e-320" -- \
  run "$DEFAULT" "${SMALL[@]}" --rate 1e-320 --out "$OUT"
expect_error "a subnormal rate in --set" "rate_rps" "got 1e-320" -- \
  run "$DEFAULT" "${SMALL[@]}" --set workload.rate_rps=1e-320 --out "$OUT"

# rate x duration beyond what a run can hold is refused at once (it was std::bad_alloc, or 22 GB at 1e6).
expect_error "rate x duration too many requests" "workload.rate_rps" "1200000000 requests" "measured_requests" -- \
  run "$DEFAULT" -q --set workload.rate_rps=1e7 --out "$OUT"
expect_error "the same through --rate and duration_s" "--rate: rate_rps x duration_s" "requests" -- \
  run "$DEFAULT" -q --rate 1e5 --set workload.duration_s=1e3 --out "$OUT"
expect_error "measured_requests above the bound" "measured_requests" -- \
  run "$DEFAULT" -q --set workload.measured_requests=20000000 --out "$OUT"

finish
