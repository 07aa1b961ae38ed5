#!/usr/bin/env bash
# What run, sweep, fit and compare write and say (issue "Reliability, round three"): every CSV reads
# back through Python's csv module whatever the trace's labels hold; a sweep redoes a point whose files
# were cut; compare refuses runs of different configurations; signals exit 128 + N with one line
# naming what was kept; a sweep says which signal killed a point and prints failures under -q;
# progress to a file is whole lines; windows.csv lists no empty windows; invalid UTF-8 in a free-text
# key never throws finished work away.
# Usage: outputs.sh PATH/TO/eldrsim   (run from the project root)
set -u
ELDRSIM=${1:?usage: outputs.sh PATH/TO/eldrsim}
DEFAULT=configs/default.json
[ -f "$DEFAULT" ] || { echo "run from the project root (no $DEFAULT here)"; exit 1; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/eldr-outputs.XXXXXX")
BG=
cleanup() { [ -n "$BG" ] && kill -9 $BG 2>/dev/null; rm -rf "$TMP"; }
trap cleanup EXIT
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3

# ---------------------------------------------------------------- 1. CSV escaping
# A generated trace whose labels hold a comma, a quote, LF and CRLF.
small=(--set workload.measured_requests=40 --set workload.warmup_requests=5 --set workload.calibration_requests=10
       --set workload.output_tokens=64 --set workload.prompt_max_tokens=256)
"$ELDRSIM" trace gen "$DEFAULT" --out "$TMP/tr" "${small[@]}" >/dev/null 2>&1
$PY - "$TMP/tr" <<'PY'
import json, sys
d = sys.argv[1]
t = json.load(open(d + "/trace.json"))
new = ["co,de", 'ma"th', "med\nical", "le\r\ngal"]
m = dict(zip(t["labels"], new))
t["labels"] = new
rows = [json.loads(l) for l in open(d + "/requests.jsonl")]
with open(d + "/requests.jsonl", "w") as f:
    for r in rows:
        r["label"] = m[r["label"]]
        f.write(json.dumps(r) + "\n")
# The manifest's checksum of the edited file (FNV-1a 64, docs/trace-format.md).
h = 0xcbf29ce484222325
for b in open(d + "/requests.jsonl", "rb").read():
    h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
t["requests_fnv1a64"] = "%016x" % h
json.dump(t, open(d + "/trace.json", "w"), indent=2)
PY
TRACE=("$DEFAULT" --set workload.kind=trace --set workload.trace="$TMP/tr" --set workload.arrivals=trace
       --set workload.warmup_requests=5 --set workload.calibration_requests=10 -q)
"$ELDRSIM" run "${TRACE[@]}" --router round_robin --steps --decisions --out "$TMP/lab1" 2>"$TMP/lab1.err"
rc=$?
"$ELDRSIM" run "${TRACE[@]}" --router round_robin --steps --decisions --out "$TMP/lab2" 2>/dev/null
# csv_ok DIR FILE...: every row has the header's width, and the labels are the trace's, byte for byte.
csv_ok() {
  $PY - "$@" <<'PY'
import csv, sys
d = sys.argv[1]
labels = {"co,de", 'ma"th', "med\nical", "le\r\ngal"}
for f in sys.argv[2:]:
    rows = list(csv.reader(open(f"{d}/{f}", newline="")))
    assert len({len(r) for r in rows}) == 1, (f, {len(r) for r in rows})
    if "label" in rows[0]:
        i = rows[0].index("label")
        seen = {r[i] for r in rows[1:]}
        assert seen <= labels and len(seen) > 1, (f, seen)
PY
}
check "labels with , \" LF CRLF: the run succeeds" '[ $rc = 0 ]'
check "... requests.csv, decisions.csv, steps.csv, windows.csv read back through Python's csv" \
  'csv_ok "$TMP/lab1" requests.csv decisions.csv steps.csv windows.csv'
check "... compare reads them (two such runs: PASS)" \
  '"$ELDRSIM" compare "$TMP/lab1" "$TMP/lab2" >"$TMP/cmp.out" 2>&1 && grep -q "^PASS" "$TMP/cmp.out"'
check "... table reads them: a row of numbers per run" \
  '"$ELDRSIM" table "$TMP/lab1" "$TMP/lab2" >"$TMP/tab.out" && \
   [ $(grep -cE "^[a-z_]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ " "$TMP/tab.out") = 2 ]'
check "plain fields stay unquoted" '! grep -q "\"" "$TMP/lab1/steps.csv" && head -1 "$TMP/lab1/requests.csv" | grep -q "^id,label,measured,"'
# A sweep over such a trace, with grid values that need quoting in combined.csv.
cat >"$TMP/labsweep.json" <<JSON
{ "name": "lab", "base": "$PWD/$DEFAULT",
  "set": { "workload.kind": "trace", "workload.trace": "$TMP/tr", "workload.arrivals": "trace",
           "workload.warmup_requests": 5, "workload.calibration_requests": 10 },
  "grid": { "router": ["round_robin", "jsq"], "description": ["a,b", "say \"hi\"\r\nbye", "cr\ronly"] } }
JSON
"$ELDRSIM" sweep "$TMP/labsweep.json" -q -j 2 --out "$TMP/labsw" 2>"$TMP/labsw.err"
rc=$?
check "a sweep over it: combined.csv reads back, grid values intact" '[ $rc = 0 ] && $PY -c "
import csv, sys
rows = list(csv.reader(open(sys.argv[1], newline=\"\")))
assert len(rows) == 7 and len({len(r) for r in rows}) == 1, rows
col = rows[0].index(\"description\")
assert {r[col] for r in rows[1:]} == {\"a,b\", \"say \\\"hi\\\"\r\nbye\", \"cr\ronly\"}, [r[col] for r in rows]
" "$TMP/labsw/combined.csv"'
check "... and compare reads the sweep's 6 runs" \
  '"$ELDRSIM" compare "$TMP/labsw" "$TMP/labsw" >"$TMP/labcmp.out" 2>&1 && grep -q "^PASS: 0 of 6 runs regressed" "$TMP/labcmp.out"'

# ---------------------------------------------------------------- 2. sweep resume verifies what it reads
cat >"$TMP/rs.json" <<JSON
{ "name": "rs", "base": "$PWD/$DEFAULT", "set": { "workload.measured_requests": 60, "workload.warmup_requests": 0 },
  "grid": { "router": ["round_robin", "jsq", "random"] } }
JSON
"$ELDRSIM" sweep "$TMP/rs.json" -q -j 2 --out "$TMP/rs" 2>/dev/null
cp "$TMP/rs/combined.csv" "$TMP/rs.combined"
R="$TMP/rs/rs/router=jsq"
head -c $(( $(wc -c <"$R/requests.csv") / 2 )) "$R/requests.csv" >"$R/half" && mv "$R/half" "$R/requests.csv"
R2="$TMP/rs/rs/router=random"
rm "$R2/windows.csv"
check "--list: a cut point is not done" \
  '"$ELDRSIM" sweep "$TMP/rs.json" --list --out "$TMP/rs" | grep -q "rs/router=jsq$" && "$ELDRSIM" sweep "$TMP/rs.json" --list --out "$TMP/rs" | grep -q "rs/router=round_robin (done)"'
"$ELDRSIM" sweep "$TMP/rs.json" -j 2 --out "$TMP/rs" 2>"$TMP/rs.err"
rc=$?
check "a cut requests.csv: the point is run again, with a note" \
  '[ $rc = 0 ] && grep -q "^sweep: rs/router=jsq: running it again: .*requests.csv: does not match summary.json" "$TMP/rs.err"'
check "a missing windows.csv: the same" 'grep -q "^sweep: rs/router=random: running it again: .*windows.csv: missing" "$TMP/rs.err"'
check "... 1 of 3 done, 2 rerun, the results whole again" \
  'grep -q "1 of 3 points already done" "$TMP/rs.err" && "$ELDRSIM" table "$R" "$R2" >/dev/null && cmp -s "$TMP/rs/combined.csv" "$TMP/rs.combined"'
printf '{"router": ' >"$R/summary.json"
"$ELDRSIM" sweep "$TMP/rs.json" -q --out "$TMP/rs" 2>"$TMP/rs2.err"
check "a cut summary.json: run again, the note printed under -q too" \
  '"$ELDRSIM" table "$R" >/dev/null 2>&1 && cmp -s "$TMP/rs/combined.csv" "$TMP/rs.combined" && [ $(wc -l <"$TMP/rs2.err") = 1 ] && grep -q "^sweep: rs/router=jsq: running it again: .*summary.json" "$TMP/rs2.err"'

# ---------------------------------------------------------------- 3. compare refuses different configurations
run60=("$DEFAULT" --requests 60 --set workload.warmup_requests=0 -q)
"$ELDRSIM" run "${run60[@]}" --out "$TMP/c_rr"
"$ELDRSIM" run "${run60[@]}" --router jsq --out "$TMP/c_jsq"
"$ELDRSIM" run "${run60[@]}" --seed 9 --out "$TMP/c_seed"
"$ELDRSIM" run "$DEFAULT" --requests 50 --set workload.warmup_requests=0 -q --out "$TMP/c_50"
"$ELDRSIM" run "${run60[@]}" --set model=gpt-oss-120b --out "$TMP/c_model"
expect_error "compare: another router" "c_jsq: not comparable with $TMP/c_rr: router round_robin vs jsq" "--allow-different" -- \
  compare "$TMP/c_rr" "$TMP/c_jsq"
expect_error "compare: another seed" "seed 1 vs 9" -- compare "$TMP/c_rr" "$TMP/c_seed"
expect_error "compare: another request count" "requests 60 vs 50" -- compare "$TMP/c_rr" "$TMP/c_50"
expect_error "compare: another model" "model qwen3-30b-a3b vs gpt-oss-120b" -- compare "$TMP/c_rr" "$TMP/c_model"
cp -r "$TMP/tr" "$TMP/tr2"
"$ELDRSIM" run "$DEFAULT" --set workload.kind=trace --set workload.trace="$TMP/tr2" --set workload.arrivals=trace \
  --set workload.warmup_requests=5 --set workload.calibration_requests=10 -q --router round_robin --out "$TMP/lab3" 2>/dev/null
expect_error "compare: another trace" "workload.trace tr vs tr2" -- compare "$TMP/lab1" "$TMP/lab3"
expect_error "compare: a trace against a generated workload" "workload.kind trace vs task" -- compare "$TMP/lab1" "$TMP/c_rr"
"$ELDRSIM" compare "$TMP/c_rr" "$TMP/c_jsq" --allow-different >"$TMP/allow.out" 2>&1
rc=$?
check "--allow-different compares, the differences as a note" \
  '[ $rc -le 1 ] && grep -q "^note: the runs differ: router round_robin vs jsq" "$TMP/allow.out" && grep -q "^\(PASS\|FAIL\):" "$TMP/allow.out"'
check "compare --help says what makes runs comparable, and the exit codes" \
  '"$ELDRSIM" compare --help | grep -q "Runs are comparable when" && "$ELDRSIM" compare --help | grep -q "128+N"'

# ---------------------------------------------------------------- 4. signals: 128 + N, one line naming the output
wait_for() {  # PATTERN: until a file matching it exists under $TMP (10 s at most)
  for _ in $(seq 100); do
    [ -n "$(find "$TMP" -name "$1" 2>/dev/null | head -1)" ] && return 0
    sleep 0.1
  done
  return 1
}
cp -r "$TMP/c_rr" "$TMP/keep"
for sig in TERM HUP; do
  "$ELDRSIM" run "$DEFAULT" --requests 200000 --set workload.warmup_requests=0 -q --out "$TMP/keep" 2>"$TMP/sig.err" &
  BG=$!
  wait_for ".keep.eldr-tmp@*"
  sleep 2
  kill -$sig $BG
  wait $BG
  rc=$?
  BG=
  want=$((128 + $(kill -l $sig)))
  drop_sanitizer_noise "$TMP/sig.err"
  check "run: SIG$sig exits $want" '[ $rc = $want ]'
  check "... one line naming the output and what was kept" \
    '[ $(wc -l <"$TMP/sig.err") = 1 ] && grep -qx "eldrsim: error: interrupted by SIG$sig: $TMP/keep: no results written, earlier ones intact" "$TMP/sig.err"'
  check "... old results intact, no staging directory" '"$ELDRSIM" table "$TMP/keep" >/dev/null && [ -z "$(find "$TMP" -name "*.eldr-tmp@*")" ]'
done
"$ELDRSIM" run "$DEFAULT" --requests 200000 --set workload.warmup_requests=0 -q --out "$TMP/fresh" 2>"$TMP/sig.err" &
BG=$!
wait_for ".fresh.eldr-tmp@*"
sleep 2
kill -TERM $BG
wait $BG
rc=$?
BG=
check "run into a new directory: SIGTERM says no results written" \
  '[ $rc = 143 ] && grep -qx "eldrsim: error: interrupted by SIGTERM: $TMP/fresh: no results written" "$TMP/sig.err" && [ ! -e "$TMP/fresh" ]'
echo '{}' >"$TMP/model.json"
"$ELDRSIM" fit "$DEFAULT" --out "$TMP/model.json" --set workload.calibration_requests=20000 --set eldr.mask_pairs=200000 \
  >/dev/null 2>"$TMP/fit.err" &
BG=$!
sleep 1
kill -TERM $BG
wait $BG
rc=$?
BG=
check "fit: SIGTERM exits 143, one line naming the file" \
  '[ $rc = 143 ] && [ $(wc -l <"$TMP/fit.err") = 1 ] && grep -qx "eldrsim: error: interrupted by SIGTERM: $TMP/model.json: not written, the earlier file intact" "$TMP/fit.err"'
check "... the earlier file intact, no temporary" '[ "$(cat "$TMP/model.json")" = "{}" ] && [ -z "$(ls "$TMP" | grep "model.json.tmp")" ]'
printf '{"name": "big", "base": "%s", "set": {"workload.measured_requests": 200000, "workload.warmup_requests": 0}, "grid": {"seed": [1, 2, 3]}}\n' \
  "$PWD/$DEFAULT" >"$TMP/big.json"
for sig in TERM HUP; do
  "$ELDRSIM" sweep "$TMP/big.json" -j 2 --no-fit -o "$TMP/bigsw" 2>"$TMP/sw.err" &
  BG=$!
  wait_for ".tmp.seed=*"
  sleep 0.5
  kill -$sig $BG
  wait $BG
  rc=$?
  BG=
  want=$((128 + $(kill -l $sig)))
  drop_sanitizer_noise "$TMP/sig.err"
  check "sweep: SIG$sig exits $want" '[ $rc = $want ]'
  check "... one error line naming the signal and what was kept" \
    '[ $(grep -c "^eldrsim: error: " "$TMP/sw.err") = 1 ] && grep -q "^eldrsim: error: interrupted by SIG$sig: $TMP/bigsw: 0 of 3 points done, kept" "$TMP/sw.err"'
  check "... no temporaries, no failure logs" '[ -z "$(find "$TMP/bigsw" -name ".tmp.*" -o -name "*.eldr-tmp@*" -o -name "*.failed.log")" ]'
done

# ---------------------------------------------------------------- 5. a sweep point killed by a signal
# kill_child PATTERN: SIGKILL to the sweep's child whose command line or log (its stdout: the point's
# run.log, the fit's log) holds PATTERN, once it runs. The children are forked from the sweep without
# exec, so their command line is the sweep's; the log names the point.
kill_child() {
  for _ in $(seq 200); do
    for c in $(pgrep -P "$BG"); do
      if { tr '\0' ' ' <"/proc/$c/cmdline"; readlink "/proc/$c/fd/1"; } 2>/dev/null | grep -q -- "$1"; then
        sleep 0.5
        kill -KILL "$c"
        return 0
      fi
    done
    sleep 0.05
  done
  return 1
}
printf '{"name": "oom", "base": "%s", "set": {"workload.warmup_requests": 0}, "grid": {"workload.measured_requests": [30, 200000]}}\n' \
  "$PWD/$DEFAULT" >"$TMP/oom.json"
"$ELDRSIM" sweep "$TMP/oom.json" -q -j 2 --no-fit --report -o "$TMP/oom" >"$TMP/oom.out" 2>"$TMP/oom.err" &
BG=$!
kill_child "measured_requests=200000"
wait $BG
rc=$?
BG=
LOG="$TMP/oom/oom/measured_requests=200000.failed.log"
check "a point killed by SIGKILL: exit 1, printed even with -q" \
  '[ $rc = 1 ] && grep -q "measured_requests=200000 FAILED (killed by SIGKILL (signal 9): usually the kernel.s out-of-memory killer" "$TMP/oom.err"'
check "... its failed.log says so" '[ -s "$LOG" ] && grep -q "killed by SIGKILL (signal 9)" "$LOG"'
check "... the failure count is printed under -q too" 'grep -q "^sweep: 1 point failed" "$TMP/oom.err"'
check "... and with --report, that no report was written (not silently skipped)" \
  'grep -q "^sweep: 1 point failed .*; no report written" "$TMP/oom.err" && [ ! -e "$TMP/oom/report" ]'
# ELDR's shared fit killed: the points name the fit's log, which exists, and their own failed.log.
printf '{"name": "fk", "base": "%s", "set": {"workload.measured_requests": 30, "workload.warmup_requests": 0, "workload.calibration_requests": 20000, "eldr.mask_pairs": 200000}, "grid": {"router": ["eldr"], "seed": [1]}}\n' \
  "$PWD/$DEFAULT" >"$TMP/fk.json"
"$ELDRSIM" sweep "$TMP/fk.json" -q -o "$TMP/fk" 2>"$TMP/fk.err" &
BG=$!
kill_child "eldr-fits/"
wait $BG
rc=$?
BG=
fitlog=$(grep -o "see [^ ]*\.log" "$TMP/fk.err" | head -1 | cut -c5-)
check "a killed ELDR fit: exit 1, the signal named, under -q" \
  '[ $rc = 1 ] && grep -q "ELDR fit failed (killed by SIGKILL (signal 9)" "$TMP/fk.err"'
check "... the log it names exists and says so" '[ -n "$fitlog" ] && [ -f "$fitlog" ] && grep -q "killed by SIGKILL" "$fitlog"'
check "... each point has the failed.log the last line points at" \
  'grep -q "1 point failed (logs: <point>.failed.log" "$TMP/fk.err" && grep -q "its ELDR fit failed" "$TMP/fk/fk/router=eldr__seed=1.failed.log"'

# ---------------------------------------------------------------- 6. progress to a file or pipe: whole lines
"$ELDRSIM" run "$DEFAULT" --requests 3000 --set workload.warmup_requests=0 --out "$TMP/prog" >/dev/null 2>"$TMP/prog.err"
check "run's stderr to a file: no carriage returns, every line ended" \
  '! grep -q $'"'"'\r'"'"' "$TMP/prog.err" && [ -s "$TMP/prog.err" ] && [ "$(tail -c 1 "$TMP/prog.err" | od -An -c | tr -d " ")" = "\n" ]'
"$ELDRSIM" run "$DEFAULT" --requests 3000 --set workload.warmup_requests=0 --out "$TMP/prog" 2>&1 >/dev/null | cat >"$TMP/pipe.err"
check "... to a pipe: the same" '! grep -q $'"'"'\r'"'"' "$TMP/pipe.err" && [ "$(tail -c 1 "$TMP/pipe.err" | od -An -c | tr -d " ")" = "\n" ]'
"$ELDRSIM" sweep "$TMP/rs.json" -j 2 --out "$TMP/rs3" 2>"$TMP/swprog.err"
check "sweep's progress to a file: one whole line per point" \
  '! grep -q $'"'"'\r'"'"' "$TMP/swprog.err" && [ $(grep -c "^sweep: [0-9]/3 done" "$TMP/swprog.err") = 3 ]'

# ---------------------------------------------------------------- 7. windows.csv: no empty windows
"$ELDRSIM" run "$DEFAULT" --requests 50 --rate 1e-6 --set workload.warmup_requests=0 -q --out "$TMP/slow" 2>/dev/null
rc=$?
check "50 requests at 1e-6 req/s: windows.csv is small" '[ $rc = 0 ] && [ $(wc -l <"$TMP/slow/windows.csv") -le 51 ]'
check "... every row a window with a finished request or a refit" \
  '[ -z "$(awk -F, "NR > 1 && \$3 == 0 && \$6 == 0" "$TMP/slow/windows.csv")" ] && [ $(awk -F, "NR > 1 { n += \$3 } END { print n }" "$TMP/slow/windows.csv") = 50 ]'
"$ELDRSIM" run "$DEFAULT" --requests 40 --rate 0.02 --set workload.warmup_requests=0 -q --out "$TMP/slow2" 2>/dev/null
check "40 requests at 0.02 req/s: the same" \
  '[ $(wc -l <"$TMP/slow2/windows.csv") -le 41 ] && [ -z "$(awk -F, "NR > 1 && \$3 == 0 && \$6 == 0" "$TMP/slow2/windows.csv")" ]'

# ---------------------------------------------------------------- 8. invalid UTF-8 in free text: no lost work
# Either refused at input (exit 2, one line, nothing written) or the run's results written whole,
# the bad bytes replaced: never an error after the simulation.
utf8_case() {  # NAME OUT ARGS...
  local name=$1 out=$2
  shift 2
  "$ELDRSIM" "$@" >/dev/null 2>"$TMP/u.err"
  local rc=$?
  check "$name: refused at input or results written" \
    '{ [ $rc = 2 ] && [ $(wc -l <"$TMP/u.err") = 1 ] && [ ! -e "$out/summary.json" ]; } ||
     { [ $rc = 0 ] && $PY -c "import json, sys; json.load(open(sys.argv[1], encoding=\"utf-8\"))" "$out/summary.json" &&
       "$ELDRSIM" table "$out" >/dev/null; }'
}
utf8_case "--set description=\\xff" "$TMP/u1" run "$DEFAULT" --requests 20 --set workload.warmup_requests=0 -q \
  --set description=$'\xff' --out "$TMP/u1"
utf8_case "--set description=\\xc3 (cut) in a new key" "$TMP/u2" run "$DEFAULT" --requests 20 --set workload.warmup_requests=0 -q \
  --set description=$'caf\xc3' --out "$TMP/u2"

finish
