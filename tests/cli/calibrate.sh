#!/usr/bin/env bash
# `eldrsim calibrate` ("bring your own cluster"): the cost-model fit (analysis/fit_cost.py) on a
# measured round-robin curve, here the shipped one, traces/calibration/rr_task_tpot.csv. A short fit
# (short runs, few evaluations) started from the committed coefficients of models/MODEL.json must stay
# within a tolerance of them, read from the model file at test time (they may be refitted), and write
# the block and the fit table; bad inputs exit 2 with one line naming the file and the field.
# Usage: calibrate.sh PATH/TO/eldrsim   (run from the project root)
set -u
ELDRSIM=${1:?usage: calibrate.sh PATH/TO/eldrsim}
[ -f configs/default.json ] || { echo "run from the project root (no configs/default.json here)"; exit 1; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/eldr-calibrate.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
DATA=traces/calibration/rr_task_tpot.csv
MODEL=${CALIBRATE_MODEL:-gpt-oss-120b}

# Short runs: 40 s of traffic after 1000 warm-up requests (the measurement: 120 s after 3840), at
# most 20 evaluations, about 40 s on 2 cores, started away from the committed block (START: every
# coefficient outside the tolerance below, so a fit that does not move fails).
# Short runs shift the optimum by 5-20 % (fit_cost.py), so the tolerance is 15 % of the efficiency
# and of the prefill overhead, and 2 ms of the step overhead (the committed ones are 0-6 ms): the
# committed block is fitted to the round-robin curves and every router's task study together
# (fit_cost.py --routers), which the round-robin curve alone cannot see.
# Measured 2026-12-06 for gpt-oss-120b from START: efficiency -9.6 %, step -1.64 ms, prefill -12.5 %.
START=${CALIBRATE_START:-0.30 4.0 55}
before=$(cksum <"models/$MODEL.json")
# shellcheck disable=SC2086
if "$ELDRSIM" calibrate "$DATA" --model "$MODEL" --hardware mi300x --out "$TMP/cal.json" \
  --duration 40 --warmup 1000 --max-evals 20 -j 2 --start $START >"$TMP/stdout" 2>"$TMP/stderr"; then
  ok "calibrate $MODEL on the shipped curve: $(grep -F "$MODEL: decode_bw_efficiency" "$TMP/stdout")"
else
  bad "calibrate exited $?: $(tail -3 "$TMP/stderr")"
fi
# Five cells and the model's line of the error summary.
check "it prints the fit table" "grep -q 'TPOT P50 meas (ms)' '$TMP/stdout' && grep -c '^$MODEL ' '$TMP/stdout' | grep -qx 6"
check "it says where the block is" "grep -qF 'calibration block: $TMP/cal.json' '$TMP/stdout'"
check "the report sits beside the block" "[ -s '$TMP/cal_report.md' ] && [ -s '$TMP/cal_report.csv' ]"
if $PY - "$TMP/cal.json" "models/$MODEL.json" "$MODEL" $START >"$TMP/cmp" 2>&1 <<'PYEOF'
import json, sys
out, committed = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))["calibration"]["mi300x"]
start = dict(zip(("decode_bw_efficiency", "step_overhead_ms", "prefill_overhead_ms"), map(float, sys.argv[4:7])))
assert out["model"] == sys.argv[3] and out["hardware"] == "mi300x", out
fit = out["calibration"]["mi300x"]
tol = {"decode_bw_efficiency": ("rel", 0.15), "step_overhead_ms": ("abs", 2.0), "prefill_overhead_ms": ("rel", 0.15)}
diff = lambda kind, c, f: abs(f - c) / c if kind == "rel" else abs(f - c)  # noqa: E731
for k, (kind, t) in tol.items():
    c, f = committed[k], fit[k]
    err = diff(kind, c, f)
    print(f"{k}: committed {c}, started {start[k]}, fitted {f}, {'relative' if kind == 'rel' else 'absolute'} "
          f"difference {err:.3g} (tolerance {t})")
    assert diff(kind, c, start[k]) > t, f"{k}: the start is within the tolerance already"
    assert err <= t, k
assert "Fitted" in fit["source"] and "rr_task_tpot.csv" in fit["source"], fit["source"]
for k in committed:  # every other key of the committed block (moe_layer_overhead_us, ...) is kept
    assert k in fit, k
PYEOF
then
  ok "the refit stays within tolerance of the committed coefficients: $(tr '\n' ';' <"$TMP/cmp")"
else
  bad "refit against the committed coefficients: $(cat "$TMP/cmp")"
fi
check "models/$MODEL.json is not changed" '[ "$(cksum <"models/$MODEL.json")" = "$before" ]'

# --- fit_cost.py --hold (the ablations' tool, docs/calibration.md section 4): a held coefficient is
# not fitted and keeps the value given, or the block's; the rest are fitted around it.
if $PY analysis/fit_cost.py --models "$MODEL" --hold step_overhead_ms=2.5 prefill_overhead_ms --max-evals 2 \
  --duration 20 --warmup 200 --calibration-out "$TMP/held.json" --report "$TMP/held.md" >"$TMP/held.out" 2>&1 &&
  $PY - "$TMP/held.json" "models/$MODEL.json" >"$TMP/held.cmp" 2>&1 <<'PYEOF'
import json, sys
fit = json.load(open(sys.argv[1]))["calibration"]["mi300x"]
committed = json.load(open(sys.argv[2]))["calibration"]["mi300x"]
assert fit["step_overhead_ms"] == 2.5, fit
assert fit["prefill_overhead_ms"] == committed["prefill_overhead_ms"], (fit, committed)
assert "over decode_bw_efficiency (held: step_overhead_ms 2.5, prefill_overhead_ms " in fit["source"], fit["source"]
PYEOF
then
  ok "--hold keeps step_overhead_ms at 2.5 and prefill_overhead_ms at the block's, fitting the rest"
else
  bad "--hold: $(tail -3 "$TMP/held.out") $(cat "$TMP/held.cmp" 2>/dev/null)"
fi
$PY analysis/fit_cost.py --models "$MODEL" --hold step_jump_ms=1 --max-evals 1 --duration 5 --warmup 10 \
  --calibration-out "$TMP/inert.json" >"$TMP/inert.out" 2>&1
rc=$?
check "--hold of a coefficient the block does not use exits 2 with one line" \
  "[ $rc = 2 ] && [ \"\$(wc -l <'$TMP/inert.out')\" = 1 ] && grep -q 'hold step_jump_ms: not a coefficient of this block' '$TMP/inert.out'"

# --- Bad inputs: nothing is simulated, one line, exit 2.
head -1 $DATA | sed 's/,ttft_p50_ms//' >"$TMP/nocol.csv"
expect_error "a measured file without a column" "nocol.csv: header: no column 'ttft_p50_ms'" -- \
  calibrate "$TMP/nocol.csv" --model "$MODEL" --out "$TMP/x.json"
expect_error "a model without rows" "rr_task_tpot.csv: model: no round_robin rows for 'deepseek-v2-lite' (has: " -- \
  calibrate $DATA --model deepseek-v2-lite --out "$TMP/x.json"
{ head -1 $DATA; grep "^$MODEL," $DATA | head -1 | sed "s/,[0-9.]*\r\?$/,fast/"; } >"$TMP/nan.csv"
expect_error "a measured cell that is not a number" "nan.csv: line 2: ttft_p50_ms: not a number: 'fast'" -- \
  calibrate "$TMP/nan.csv" --model "$MODEL" --out "$TMP/x.json"
expect_error "no block for the hardware and no --start" "models/$MODEL.json: calibration.h100-sxm: missing" -- \
  calibrate $DATA --model "$MODEL" --hardware h100-sxm --out "$TMP/x.json"
expect_error "hardware other than the config's" "configs/default.json: cluster: runs on hardware 'mi300x', not --hardware 'h100-sxm'" -- \
  calibrate $DATA --model "$MODEL" --hardware h100-sxm --start 0.5 1 40 --out "$TMP/x.json"
expect_error "a missing measured file" "nowhere.csv: measured data: not found" -- \
  calibrate "$TMP/nowhere.csv" --model "$MODEL" --out "$TMP/x.json"

# --- Special files: /dev/zero would be read for ever, a FIFO blocks; a directory is not "not found".
mkfifo "$TMP/fifo.csv"
expect_error "a device as the measured file" "/dev/zero: measured data: is not a regular file (a device, FIFO or socket)" -- \
  calibrate /dev/zero --model "$MODEL" --out "$TMP/x.json"
expect_error "a FIFO as the measured file" "fifo.csv: measured data: is not a regular file" -- \
  calibrate "$TMP/fifo.csv" --model "$MODEL" --out "$TMP/x.json"
expect_error "a directory as the measured file" "measured data: is a directory, not a file" -- \
  calibrate "$TMP" --model "$MODEL" --out "$TMP/x.json"
# fit_cost.py's own readers (--data, --config) say the same.
$PY analysis/fit_cost.py --models "$MODEL" --data "task=$TMP/fifo.csv" --max-evals 1 >/dev/null 2>"$TMP/err"
rc=$?
check "fit_cost.py --data FIFO: exit 2, one line" \
  "[ $rc = 2 ] && [ \$(wc -l <'$TMP/err') = 1 ] && grep -q 'fifo.csv: measured data: is not a regular file' '$TMP/err'"
$PY analysis/fit_cost.py --models "$MODEL" --config /dev/zero --max-evals 1 >/dev/null 2>"$TMP/err"
rc=$?
check "fit_cost.py --config /dev/zero: exit 2, one line" \
  "[ $rc = 2 ] && [ \$(wc -l <'$TMP/err') = 1 ] && grep -q '/dev/zero: config: is not a regular file' '$TMP/err'"

# --- The measured CSV read as a CSV (the csv module): each problem one line naming the file, the row
# and the column; nothing simulated.
HEAD=$(head -1 $DATA | tr -d '\r')
rows() { grep "^$MODEL,round_robin" $DATA | tr -d '\r'; }
{ echo "$HEAD,rate_rps"; rows | sed 's/$/,5/'; } >"$TMP/dupcol.csv"
expect_error "a duplicated column" "dupcol.csv: header: column 'rate_rps' appears twice" -- \
  calibrate "$TMP/dupcol.csv" --model "$MODEL" --out "$TMP/x.json"
{ echo "tpot_p50_ms,$HEAD"; rows | sed 's/^/1,/'; } >"$TMP/dupcol2.csv"
expect_error "another duplicated column" "dupcol2.csv: header: column 'tpot_p50_ms' appears twice" -- \
  calibrate "$TMP/dupcol2.csv" --model "$MODEL" --out "$TMP/x.json"
{ echo "$HEAD"; rows | sed '1s/,round_robin,20,/,round_robin,20000000,/'; } >"$TMP/fast.csv"
expect_error "a rate above the simulator's range" "fast.csv: line 2: rate_rps: must be between 1e-06 and 10000000.0 req/s" \
  "got 20000000" -- calibrate "$TMP/fast.csv" --model "$MODEL" --out "$TMP/x.json"
{ echo "$HEAD"; rows | sed '2s/,round_robin,40,/,round_robin,10000000.000001,/'; } >"$TMP/edge.csv"
expect_error "a rate just above the range: bound and value told apart" "line 3: rate_rps: must be between 1e-06 and 10000000.0" \
  "got 10000000.000001" -- calibrate "$TMP/edge.csv" --model "$MODEL" --out "$TMP/x.json"
{ echo "$HEAD"; rows | sed '1s/,round_robin,20,/,round_robin,0,/'; } >"$TMP/zero.csv"
expect_error "a rate of 0" "zero.csv: line 2: rate_rps: must be between 1e-06 and 10000000.0" -- \
  calibrate "$TMP/zero.csv" --model "$MODEL" --out "$TMP/x.json"
{ echo "$HEAD"; rows | sed '1s/,round_robin,20,2400,/,round_robin,20,2400,-/'; } >"$TMP/neg.csv"
expect_error "a negative latency" "neg.csv: line 2: tpot_p50_ms: must be above 0.0, got -" -- \
  calibrate "$TMP/neg.csv" --model "$MODEL" --out "$TMP/x.json"
{ echo "$HEAD"; rows | sed '3s/,[0-9.]*$/,NaN/'; } >"$TMP/nancell.csv"
expect_error "a NaN cell" "nancell.csv: line 4: ttft_p50_ms: must be a finite number, got 'NaN'" -- \
  calibrate "$TMP/nancell.csv" --model "$MODEL" --out "$TMP/x.json"
{ echo "$HEAD"; rows | sed '2s/,[0-9.]*$/,/'; } >"$TMP/emptycell.csv"
expect_error "an empty cell" "emptycell.csv: line 3: ttft_p50_ms: not a number: ''" -- \
  calibrate "$TMP/emptycell.csv" --model "$MODEL" --out "$TMP/x.json"
{ echo "$HEAD"; rows; } | head -c -12 >"$TMP/cut.csv"
expect_error "a file cut mid-row" "cut.csv: line 6: " "cells, the header has 8" -- \
  calibrate "$TMP/cut.csv" --model "$MODEL" --out "$TMP/x.json"
{ echo "$HEAD"; rows; } | head -c -3 >"$TMP/cut2.csv"
expect_error "a file cut in its last number" "cut2.csv: line 6: the last line has no end of line" -- \
  calibrate "$TMP/cut2.csv" --model "$MODEL" --out "$TMP/x.json"
# Quoted fields are read as the csv module reads them (a quoted model name, a quoted number).
{ echo "$HEAD"; rows | sed 's/^\([^,]*\),round_robin,\([0-9]*\),/"\1","round_robin","\2",/'; } >"$TMP/quoted.csv"
"$ELDRSIM" calibrate "$TMP/quoted.csv" --model "$MODEL" --out "$TMP/q/cal.json" --max-evals 1 --duration 5 --warmup 10 \
  >/dev/null 2>"$TMP/err"
check "quoted fields are read as CSV" "grep -q '\"gpt-oss-120b\",\"round_robin\",\"20\"' '$TMP/quoted.csv' && [ -s '$TMP/q/cal.json' ]"
# One rate: the fit runs, with a one-line warning of what it cannot tell apart.
{ echo "$HEAD"; rows | head -1; } >"$TMP/one.csv"
"$ELDRSIM" calibrate "$TMP/one.csv" --model "$MODEL" --out "$TMP/one/cal.json" --max-evals 1 --duration 5 --warmup 10 \
  >/dev/null 2>"$TMP/err"
rc=$?
check "a single rate: a one-line warning, the fit still runs" \
  "[ $rc = 0 ] && [ \$(grep -c '^eldrsim: warning: ' '$TMP/err') = 1 ] && grep -q 'one rate cannot separate decode_bw_efficiency from step_overhead_ms' '$TMP/err' && [ -s '$TMP/one/cal.json' ]"
# The same through fit_cost.py --data KIND=PATH.
$PY analysis/fit_cost.py --models "$MODEL" --data "task=$TMP/one.csv" --max-evals 1 --duration 5 \
  --warmup 10 --report "$TMP/one2/r.md" >/dev/null 2>"$TMP/err"
check "fit_cost.py --data with one rate: the same warning" "grep -q '^eldrsim: warning: .*one.csv: rate_rps: only 20.0 req/s' '$TMP/err'"

# --- Outputs are checked before the fit: a path that cannot be written is one line, nothing runs.
touch "$TMP/plainfile"
expect_error "--out under a file" "plainfile/cal.json: calibration block: cannot create its directory" "plainfile is not a directory" -- \
  calibrate $DATA --model "$MODEL" --out "$TMP/plainfile/cal.json"
expect_error "--out a directory" "calibration block: is a directory, not a file" -- \
  calibrate $DATA --model "$MODEL" --out "$TMP"
expect_error "--report under a file" "plainfile/r.md: report: cannot create its directory" -- \
  calibrate $DATA --model "$MODEL" --out "$TMP/x.json" --report "$TMP/plainfile/r.md"
expect_error "--out a device" "/dev/full: calibration block: is not a regular file" -- \
  calibrate $DATA --model "$MODEL" --out /dev/full
expect_error "--out the same file as the report's CSV" "x.csv: report CSV: also the calibration block" -- \
  calibrate $DATA --model "$MODEL" --out "$TMP/x.csv" --report "$TMP/x.md"
[ -e "$TMP/x.json" ] && bad "a failing calibrate wrote $TMP/x.json" || ok "no failing calibrate wrote an output"
check "no temporary file is left beside the outputs" "! ls -a '$TMP' '$TMP/q' '$TMP/one' | grep -q 'tmp-'"

finish
