#!/usr/bin/env bash
# A sweep's rows are what each point ran. A point's identity is the content of everything it reads
# (its resolved config and every file: model, cluster, scheduler, lengths, trace), so an edited input
# reruns the points that read it, with a note; combined.csv's columns come from each point's
# summary.json, never from the config files as they are now; a rerun that fails leaves no earlier
# directory of that point (nor a report of the earlier results) to pass for the current one.
# Usage: sweep_inputs.sh PATH/TO/eldrsim   (run from the project root)
set -u
ELDRSIM=${1:?usage: sweep_inputs.sh PATH/TO/eldrsim}
[ -f configs/default.json ] || { echo "run from the project root"; exit 1; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/eldr-sweep-inputs.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
. "$(dirname "$0")/lib.sh"

# sweep ARGS...: eldrsim sweep, its exit status in rc.
sweep() { "$ELDRSIM" sweep "$@"; rc=$?; }

# The columns of combined.csv against each row's summary.json: model, router, rate, instances, seed.
columns_match() {  # OUT
  /usr/bin/python3 - "$1" <<'PY'
import csv, json, os, sys
out = sys.argv[1]
rows = list(csv.DictReader(open(os.path.join(out, "combined.csv"))))
assert rows, "no rows"
for r in rows:
    s = json.load(open(os.path.join(out, r["sweep"], r["point"], "summary.json")))
    got = (r["model"], r["router"], float(r["rate_rps"]), int(r["prefill"]), int(r["decode"]), int(r["seed"]),
           r["workload"])
    want = (s["model"], s["router"], s["rate_rps"], s["prefill_instances"], s["decode_instances"], s["seed"],
            s["config"]["workload"]["kind"])
    assert got == want, (r["point"], got, want)
print("columns match")
PY
}

SMALL='"workload.measured_requests": 120, "workload.warmup_requests": 0, "workload.calibration_requests": 300, "eldr.mask_pairs": 3000'

# 1. An edited base config: every point reruns (nothing "already done"), and the rows say what ran.
/usr/bin/python3 - configs/default.json "$TMP/base.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["model"] = "qwen3-30b-a3b"; c["workload"]["rate_rps"] = 60; c["topology"]["prefill"]["instances"] = 8
json.dump(c, open(sys.argv[2], "w"), indent=2)
PY
cat >"$TMP/edit.json" <<JSON
{ "name": "edit", "base": "$TMP/base.json", "set": { $SMALL }, "grid": { "router": ["round_robin", "jsq", "p2c"] } }
JSON
"$ELDRSIM" sweep "$TMP/edit.json" --out "$TMP/e" -j 2 -q
check "the first sweep: qwen3, 8 prefill, 60 req/s in every row" \
  '[ $(grep -c ",qwen3-30b-a3b,task,[a-z_0-9]*,60,8," "$TMP/e/combined.csv") = 3 ]'
/usr/bin/python3 - "$TMP/base.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["model"] = "gpt-oss-120b"; c["workload"]["rate_rps"] = 100; c["topology"]["prefill"]["instances"] = 4
json.dump(c, open(sys.argv[1], "w"), indent=2)
PY
# Merging alone (no run) does not relabel the earlier runs: they are not this config's.
sweep "$TMP/edit.json" --out "$TMP/e" --merge -q
check "--merge after the edit: the earlier runs are no rows of it (exit 1, header only)" \
  '[ $rc = 1 ] && [ $(wc -l <"$TMP/e/combined.csv") = 1 ]'
sweep "$TMP/edit.json" --out "$TMP/e" -j 2 2>"$TMP/e.err"
check "rerun after the edit: every point runs again (exit 0, none already done)" \
  '[ $rc = 0 ] && ! grep -q "already done" "$TMP/e.err" && grep -q "ran 3 points" "$TMP/e.err"'
check "... with a note naming what changed" \
  '[ $(grep -c "edit/router=.*: running it again: changed since it ran: the resolved config" "$TMP/e.err") = 3 ]'
check "... and the rows are the new runs: gpt-oss-120b, 4 prefill, 100 req/s" \
  '[ $(grep -c ",gpt-oss-120b,task,[a-z_0-9]*,100,4," "$TMP/e/combined.csv") = 3 ] && ! grep -q qwen3 "$TMP/e/combined.csv"'
check "every column of combined.csv is its point's summary.json" 'columns_match "$TMP/e" | grep -q "columns match"'
"$ELDRSIM" sweep "$TMP/edit.json" --out "$TMP/e" -j 2 2>"$TMP/e2.err"
check "the same command again: all done" 'grep -q "3 of 3 points already done" "$TMP/e2.err"'

# 2. A file the config reads (the composed router's scheduler YAML) edited between a first point
# and the rest: the first point runs again; every point ran with the same file.
cp configs/scheduler/llm-d-decode-expert-locality.yaml "$TMP/sched.yaml"
cp traces/task_lengths_cl100k.csv "$TMP/lengths.csv"
cat >"$TMP/weight.json" <<JSON
{ "name": "weight", "base": "configs/default.json",
  "set": { $SMALL, "router": "composed", "composed.scheduler": "$TMP/sched.yaml", "workload.lengths_file": "$TMP/lengths.csv" },
  "grid": { "composed.scorers.expert-locality-scorer.weight": [0, 1, 2, 4] } }
JSON
"$ELDRSIM" sweep "$TMP/weight.json" --out "$TMP/w" --point 0 -q
first=$(ls -d "$TMP"/w/weight/*=*)
check "one point done before the edit" '[ $(echo "$first" | wc -l) = 1 ]'
# The decode profile's queue-scorer weight 1 -> 5 (the second "weight: 1" in the file).
/usr/bin/python3 - "$TMP/sched.yaml" <<'PY'
import sys
t = open(sys.argv[1]).read()
i = t.index("- name: decode")
j = t.index("weight: 1", t.index("queue-scorer", i))
open(sys.argv[1], "w").write(t[:j] + "weight: 5" + t[j + len("weight: 1"):])
PY
sweep "$TMP/weight.json" --out "$TMP/w" -j 2 2>"$TMP/w.err"
check "resume after editing the scheduler: the first point runs again, with a note naming the file" \
  '[ $rc = 0 ] && ! grep -q "already done" "$TMP/w.err" && grep -q "weight/weight=0: running it again: changed since it ran: .*$TMP/sched.yaml" "$TMP/w.err"'
check "every point records the same scheduler (one file content in all four)" \
  '[ $(grep -h "\"$TMP/sched.yaml\": " "$TMP"/w/weight/*/point.json | sort -u | wc -l) = 1 ] && [ $(ls -d "$TMP"/w/weight/*=* | wc -l) = 4 ]'
# One more of its kind: the prompt lengths file, edited (one length changed), reruns every point.
/usr/bin/python3 - "$TMP/lengths.csv" <<'PY'
import sys
lines = open(sys.argv[1]).read().splitlines(True)
i = 1 + next(k for k, l in enumerate(lines[1:]) if l.strip())
cells = lines[i].rstrip("\n").split(",")
cells[-1] = str(int(cells[-1]) + 1)
lines[i] = ",".join(cells) + "\n"
open(sys.argv[1], "w").write("".join(lines))
PY
sweep "$TMP/weight.json" --out "$TMP/w" -j 2 2>"$TMP/w2.err"
check "an edited lengths file reruns the points that read it" \
  '[ $rc = 0 ] && [ $(grep -c "running it again: changed since it ran: $TMP/lengths.csv" "$TMP/w2.err") = 4 ]'
# What is not read is no change: the base config's formatting (its values the same).
/usr/bin/python3 - "$TMP/base.json" <<'PY'
import json, sys
json.dump(json.load(open(sys.argv[1])), open(sys.argv[1], "w"), indent=4)
PY
"$ELDRSIM" sweep "$TMP/edit.json" --out "$TMP/e" -j 2 2>"$TMP/e3.err"
check "the base config reformatted, its values the same: nothing reruns" 'grep -q "3 of 3 points already done" "$TMP/e3.err"'

# 3. A rerun whose points fail: their earlier directories go (beside the new .failed.log), compare
# does not count them, and the report of the earlier results goes too.
cp traces/task_lengths_cl100k.csv "$TMP/A.csv"
cp traces/task_lengths_cl100k.csv "$TMP/B.csv"
cat >"$TMP/fail.json" <<JSON
{ "name": "fail", "base": "configs/default.json", "set": { $SMALL },
  "grid": { "workload.lengths_file": ["$TMP/A.csv", "$TMP/B.csv"], "router": ["round_robin", "eldr"] } }
JSON
"$ELDRSIM" sweep "$TMP/fail.json" --out "$TMP/f" -j 2 -q
cp -r "$TMP/f" "$TMP/f0"
ELDR_PYTHON=/usr/bin/python3 "$ELDRSIM" report "$TMP/f" >/dev/null 2>&1
check "the first sweep: 4 points and a report" '[ $(ls -d "$TMP"/f/fail/*=* | wc -l) = 4 ] && [ -f "$TMP/f/report/report.md" ]'
printf 'not,a,lengths,file\n' >"$TMP/B.csv"
sweep "$TMP/fail.json" --out "$TMP/f" -j 2 -q 2>"$TMP/f.err"
check "the rerun of B's points fails (exit 1): the run, and the eldr point's fit" \
  '[ $rc = 1 ] && grep -q "router=round_robin__.*B.csv FAILED (exit 2).*its earlier results, of other inputs, removed" "$TMP/f.err" && grep -q "router=eldr__.*B.csv FAILED: its ELDR fit failed.*its earlier results, of other inputs, removed" "$TMP/f.err"'
check "B's earlier directories are gone, their .failed.log there; A's points stay" \
  '[ $(ls -d "$TMP"/f/fail/*B.csv 2>/dev/null | wc -l) = 0 ] && [ $(ls "$TMP"/f/fail/*B.csv.failed.log | wc -l) = 2 ] && [ $(ls -d "$TMP"/f/fail/*A.csv | wc -l) = 2 ]'
check "no directory set aside is left" '[ -z "$(find "$TMP/f" -name ".old.*")" ]'
check "combined.csv has A's two rows" '[ $(wc -l <"$TMP/f/combined.csv") = 3 ] && ! grep -q "B.csv" "$TMP/f/combined.csv"'
check "the report of the earlier results is gone" '[ ! -e "$TMP/f/report" ]'
"$ELDRSIM" compare "$TMP/f0" "$TMP/f" >"$TMP/cmp.out" 2>&1
rc=$?
check "compare: B's points are only in the baseline, A's are compared" \
  '[ $rc = 0 ] && [ $(grep -c "B.csv.*: only in the baseline" "$TMP/cmp.out") = 2 ] && grep -q "PASS: 0 of 2 runs regressed" "$TMP/cmp.out"'

finish
