#!/usr/bin/env bash
# The Python tools (calibrate/fit_cost.py, report, validate) interrupted or out of disk: a signal ends
# them with one line `eldrsim: error: interrupted by SIGNAME: ...` and exit 128 + its number, a full disk
# with one error line and exit 2; either way the earlier outputs stay whole and no temporary file or
# directory is left. Output sets (fit_cost.py --write's model files) are all or none; the CSVs they write
# read back through the csv module.
# Usage: analysis_interrupt.sh PATH/TO/eldrsim   (run from the project root)
set -u
ELDRSIM=${1:?usage: analysis_interrupt.sh PATH/TO/eldrsim}
[ -f configs/default.json ] || { echo "run from the project root (no configs/default.json here)"; exit 1; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/eldr-interrupt.XXXXXX")
TINY="$TMP/tiny"
trap 'umount "$TINY" "$TMP/copy/models" 2>/dev/null; rm -rf "$TMP"' EXIT
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
DATA=traces/calibration/rr_task_tpot.csv
MODEL=gpt-oss-120b
# The scripts' own scratch directories go here, so that a left one shows.
mkdir -p "$TMP/scratch"
export TMPDIR="$TMP/scratch"

# wait_for PATTERN FILE...: until a file matching the glob exists or a line matches (at most 120 s).
wait_for_line() {
  for _ in $(seq 1 1500); do
    grep -q "$1" "$2" 2>/dev/null && return 0
    sleep 0.2
  done
  return 1
}
wait_for_glob() {
  for _ in $(seq 1 6000); do
    compgen -G "$1" >/dev/null && return 0
    sleep 0.02
  done
  return 1
}
# interrupted NAME SIGNAL RC ERRFILE: the exit status and the one error line of an interrupted run.
interrupted() {
  check "$1: exit $3, one error line naming $2" \
    "[ '$4' = '$3' ] && [ \$(grep -c '^eldrsim: error: ' '$5') = 1 ] && tail -1 '$5' | grep -q '^eldrsim: error: interrupted by $2: '"
}

# --- calibrate: SIGTERM and SIGHUP during the fit.
mkdir -p "$TMP/cal" && echo '{"old": true}' >"$TMP/cal/cal.json"
for sig in TERM HUP; do
  rm -f "$TMP/cal.err"  # the last run's lines must not be waited for
  "$ELDRSIM" calibrate $DATA --model $MODEL --out "$TMP/cal/cal.json" --max-evals 6 --duration 40 --warmup 1000 \
    >/dev/null 2>"$TMP/cal.err" &
  pid=$!
  wait_for_line "eval   1/" "$TMP/cal.err"
  kill -$sig $pid
  wait $pid
  rc=$?
  want=$((128 + $(kill -l $sig)))
  interrupted "calibrate on SIG$sig" "SIG$sig" "$want" "$rc" "$TMP/cal.err"
  check "calibrate on SIG$sig says nothing was written" "grep -q 'no files written, earlier ones intact' '$TMP/cal.err'"
  check "calibrate on SIG$sig: the old block intact, no report, no temporary left" \
    "grep -q old '$TMP/cal/cal.json' && [ \$(ls -A '$TMP/cal') = cal.json ] && [ -z \"\$(ls -A '$TMP/scratch')\" ]"
done
# fit_cost.py directly, SIGINT (Ctrl-C): 130.
$PY analysis/fit_cost.py --models $MODEL --max-evals 6 --duration 40 --warmup 1000 --report "$TMP/fit/r.md" \
  >/dev/null 2>"$TMP/fit.err" &
pid=$!
wait_for_line "eval   1/" "$TMP/fit.err"
kill -INT $pid
wait $pid
rc=$?
interrupted "fit_cost.py on SIGINT" SIGINT 130 "$rc" "$TMP/fit.err"
check "fit_cost.py on SIGINT: no report, no temporary left" "[ ! -e '$TMP/fit' ] && [ -z \"\$(ls -A '$TMP/scratch')\" ]"

# --- report: SIGTERM while the figures are drawn; the old report stays whole.
SMALL='"workload.measured_requests": 120, "workload.warmup_requests": 0, "workload.calibration_requests": 300, "eldr.mask_pairs": 3000'
cat >"$TMP/main.json" <<JSON
{ "name": "main", "base": "configs/default.json", "set": { $SMALL },
  "grid": { "model": ["qwen3-30b-a3b", "gpt-oss-120b", "gemma-4-26b-a4b"], "workload.kind": ["task", "language"],
            "router": ["round_robin", "eldr"], "workload.rate_rps": [20, 60] } }
JSON
"$ELDRSIM" sweep "$TMP/main.json" --out "$TMP/r" -q
# An old report eldr-sim wrote (its marker): the one a report may replace.
mkdir -p "$TMP/r/report" && echo old >"$TMP/r/report/report.md" && touch "$TMP/r/report/.eldrsim-report"
"$ELDRSIM" report "$TMP/r" >/dev/null 2>"$TMP/rep.err" &
pid=$!
wait_for_glob "$TMP/r/.report.tmp-*"
kill -TERM $pid
wait $pid
rc=$?
interrupted "report on SIGTERM" SIGTERM 143 "$rc" "$TMP/rep.err"
check "report on SIGTERM: the old report whole, no temporary directory" \
  "[ \"\$(cat '$TMP/r/report/report.md')\" = old ] && [ \"\$(ls -A '$TMP/r/report' | tr '\\n' ' ')\" = '.eldrsim-report report.md ' ] && ! ls -A '$TMP/r' | grep -q tmp"

# --- validate: SIGTERM while the cells run; the old results directory stays, no staging left.
mkdir -p "$TMP/val" && echo old >"$TMP/val/report.md" && touch "$TMP/val/.eldrsim-validate"
$PY analysis/validate.py --eldrsim "$ELDRSIM" --out "$TMP/val" --skip-claims --skip-loro --duration 10 --warmup 200 \
  >/dev/null 2>"$TMP/val.err" &
pid=$!
wait_for_glob "$TMP/.validate-*"
sleep 1
kill -TERM $pid
wait $pid
rc=$?
interrupted "validate on SIGTERM" SIGTERM 143 "$rc" "$TMP/val.err"
check "validate on SIGTERM: the old directory, no staging or scratch left" \
  "[ \"\$(cat '$TMP/val/report.md')\" = old ] && ! ls -A '$TMP' | grep -q '^\.validate-' && [ -z \"\$(ls -A '$TMP/scratch')\" ]"

# --- Output sets and CSVs (fit_cost.py --write writes models/*.json and models/routing/*.json so).
$PY - "$TMP" <<'PYEOF'
import csv, os, sys
sys.path.insert(0, "analysis")
import eldr_common as ec
d = sys.argv[1]
labels = ['plain', 'a,comma', 'a "quote"', 'cr\rhere', 'new\nline', '']
outs = ec.OutputSet()
outs.add_csv(os.path.join(d, "labels.csv"), ["label", "value"], [[l, i] for i, l in enumerate(labels)])
outs.commit()
back = list(csv.reader(open(os.path.join(d, "labels.csv"), newline="")))
good = back == [["label", "value"]] + [[l, str(i)] for i, l in enumerate(labels)]
print(("ok   " if good else "FAIL ") + f"labels with a comma, a quote, CR and a newline read back through csv: {back}")
sys.exit(0 if good else 1)
PYEOF
check "CSV labels round-trip" "[ $? = 0 ]"

# --- A full disk (a tiny tmpfs; needs root): one line, exit 2, old files kept, nothing half-written.
mkdir -p "$TINY"
if [ "$(id -u)" = 0 ] && mount -t tmpfs -o size=16k tmpfs "$TINY" 2>/dev/null; then
  echo '{"old": true}' >"$TINY/cal.json"
  mkdir -p "$TINY/report" && echo old >"$TINY/report/report.md" && touch "$TINY/report/.eldrsim-report"
  dd if=/dev/zero of="$TINY/fill" bs=1k count=64 2>/dev/null
  "$ELDRSIM" calibrate $DATA --model $MODEL --out "$TINY/cal.json" --report "$TMP/full/r.md" --max-evals 1 \
    --duration 5 --warmup 10 >/dev/null 2>"$TMP/full.err"
  rc=$?
  check "calibrate onto a full disk: exit 2, one error line" \
    "[ $rc = 2 ] && [ \$(grep -c '^eldrsim: error: ' '$TMP/full.err') = 1 ] && tail -1 '$TMP/full.err' | grep -q 'cal.json: No space left on device'"
  check "calibrate onto a full disk: the old block, no report written elsewhere, no temporary" \
    "grep -q old '$TINY/cal.json' && [ ! -e '$TMP/full' ] && ! ls -A '$TINY' | grep -q tmp-"
  "$ELDRSIM" report "$TMP/r" --out "$TINY/report" >/dev/null 2>"$TMP/full.err"
  rc=$?
  check "report onto a full disk: exit 2, one line, the old report whole" \
    "[ $rc = 2 ] && [ \$(wc -l <'$TMP/full.err') = 1 ] && grep -q 'No space left on device' '$TMP/full.err' && [ \"\$(ls -A '$TINY/report' | tr '\\n' ' ')\" = '.eldrsim-report report.md ' ] && ! ls -A '$TINY' | grep -q tmp"
  # A set of two outputs, the second on the full disk: neither is replaced.
  echo old >"$TMP/first.json"
  $PY - "$TMP/first.json" "$TINY/second.json" >"$TMP/set.out" 2>&1 <<'PYEOF'
import sys
sys.path.insert(0, "analysis")
import eldr_common as ec
outs = ec.OutputSet()
try:
    outs.add(sys.argv[1], "new\n")
    outs.add(sys.argv[2], "x" * 100000)
    outs.commit()
except ec.Fatal as e:
    outs.discard()
    print(e)
PYEOF
  check "an output set with one write failing: all old, no temporary" \
    "grep -q 'second.json: No space left on device' '$TMP/set.out' && [ \"\$(cat '$TMP/first.json')\" = old ] && ! ls -A '$TMP' | grep -q tmp- && ! ls -A '$TINY' | grep -q tmp-"
  # fit_cost.py --write: the report, the block and the model file as one set. A copy of the project whose
  # models/ is a full tmpfs: the model file cannot be written, so neither are the others.
  COPY="$TMP/copy"
  mkdir -p "$COPY/models" && cp -r analysis configs traces "$COPY/"
  if mount -t tmpfs -o size=64k tmpfs "$COPY/models" 2>/dev/null; then
    cp models/*.json "$COPY/models/"
    ln -s "$PWD/models/hardware" "$COPY/models/hardware" && ln -s "$PWD/models/routing" "$COPY/models/routing"
    dd if=/dev/zero of="$COPY/models/fill" bs=1k count=256 2>/dev/null
    before=$(cksum <"$COPY/models/$MODEL.json")
    $PY "$COPY/analysis/fit_cost.py" --models $MODEL --write --eldrsim "$(realpath "$ELDRSIM")" --max-evals 1 --duration 5 \
      --warmup 10 --report "$TMP/w/r.md" --calibration-out "$TMP/w/cal.json" >/dev/null 2>"$TMP/w.err"
    rc=$?
    check "fit_cost.py --write onto a full disk: exit 2, one error line naming the model file" \
      "[ $rc = 2 ] && [ \$(grep -c '^eldrsim: error: ' '$TMP/w.err') = 1 ] && tail -1 '$TMP/w.err' | grep -q 'models/$MODEL.json: No space left on device'"
    check "fit_cost.py --write onto a full disk: the model file, no report and no block (all or none)" \
      "[ \"\$(cksum <'$COPY/models/$MODEL.json')\" = \"$before\" ] && [ ! -e '$TMP/w' ] && ! ls -A '$COPY/models' | grep -q tmp-"
    umount "$COPY/models"
  fi
  umount "$TINY"
else
  skip "full disk: needs root to mount a tiny tmpfs (CI runs it as root)"
fi

finish
