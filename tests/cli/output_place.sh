#!/usr/bin/env bash
# Where outputs may go (sim/common/output_place.hpp, docs/running.md "Outputs"): an output never
# replaces a directory eldr-sim did not write, never is, holds or lies inside one of the command's
# inputs, and a report never lives where a sweep's points live. Every refusal is exit 2, one line,
# before any work, and leaves every byte in place; then a property test of random placements.
# Usage: output_place.sh PATH/TO/eldrsim   (run from the project root)
set -u
ELDRSIM=${1:?usage: output_place.sh PATH/TO/eldrsim}
[ -f configs/default.json ] || { echo "run from the project root"; exit 1; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/eldr-output-place.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
. "$(dirname "$0")/lib.sh"

# A listing of every file under the given paths with its checksum: what must not change.
snapshot() { find "$@" -type f -print0 2>/dev/null | sort -z | xargs -0 -r sha1sum; }
# unchanged NAME SNAPSHOT PATH...: the files under PATH are those of SNAPSHOT, byte for byte.
unchanged() {
  local name=$1 want=$2
  shift 2
  if [ "$(snapshot "$@")" = "$want" ]; then ok "$name"; else bad "$name"; fi
}

SMALL='"workload.measured_requests": 40, "workload.warmup_requests": 0, "workload.calibration_requests": 300, "eldr.mask_pairs": 3000'
cat >"$TMP/tau.json" <<JSON
{ "name": "tau", "base": "configs/default.json", "set": { $SMALL, "router": "eldr" }, "grid": { "eldr.tau": [0, 0.2] } }
JSON
"$ELDRSIM" sweep "$TMP/tau.json" --out "$TMP/r" -q
check "a small sweep to report on" '[ -s "$TMP/r/combined.csv" ] && [ -f "$TMP/r/tau/tau=0/point.json" ]'
results=$(snapshot "$TMP/r")

# ---------------------------------------------------------------- report --out and validate --out
mkdir -p "$TMP/thesis/sub" && echo '\documentclass{article}' >"$TMP/thesis/thesis.tex" && echo 1,2 >"$TMP/thesis/sub/data.csv"
thesis=$(snapshot "$TMP/thesis")
expect_error "report --out a user's directory" "$TMP/thesis: --out: exists and is not a report eldr-sim wrote" \
  "move it away" -- report "$TMP/r" --out "$TMP/thesis"
unchanged "  ... thesis.tex and sub/data.csv intact" "$thesis" "$TMP/thesis"
expect_error "report --out the results themselves" "--out: holds an input of this command, the sweep's combined.csv" \
  -- report "$TMP/r" --out "$TMP/r"
expect_error "report --out a parent of the results" "--out: holds an input of this command" -- report "$TMP/r" --out "$TMP"
expect_error "report --out a sweep's points" "--out: is an input of this command, the points of sweep 'tau'" \
  -- report "$TMP/r" --out "$TMP/r/tau"
expect_error "report --out inside a sweep's points" "--out: lies inside an input of this command, the points of sweep 'tau'" \
  -- report "$TMP/r" --out "$TMP/r/tau/new"
ln -s "$TMP/r" "$TMP/link-to-r"
expect_error "report --out the results through a symbolic link" "--out: holds an input of this command" \
  -- report "$TMP/r" --out "$TMP/link-to-r"
unchanged "  ... the sweep's results intact after every refusal" "$results" "$TMP/r"
check "  ... and no report directory made" '[ ! -e "$TMP/r/tau/new" ] && [ ! -e "$TMP/r/report" ]'
expect_error "validate --out a user's directory (the same rule)" "$TMP/thesis: --out: exists and is not validate's results" \
  -- validate --out "$TMP/thesis"
expect_error "validate --out the project (holds its inputs)" "--out: holds an input of this command" -- validate --out .
unchanged "  ... thesis intact" "$thesis" "$TMP/thesis"

# What eldr-sim wrote it may replace: the default report twice, an empty directory, a report moved.
"$ELDRSIM" report "$TMP/r" >/dev/null 2>&1 && "$ELDRSIM" report "$TMP/r" >/dev/null 2>&1
check "report writes RESULTS/report and replaces its own report" \
  '[ -f "$TMP/r/report/.eldrsim-report" ] && [ -s "$TMP/r/report/report.md" ]'
mkdir "$TMP/empty"
"$ELDRSIM" report "$TMP/r" --out "$TMP/empty" >/dev/null 2>&1
check "report --out an empty directory" '[ -s "$TMP/empty/report.md" ]'
/usr/bin/python3 analysis/report.py "$TMP/r" --out "$TMP/thesis" >/dev/null 2>"$TMP/err"
rc=$?
check "analysis/report.py run directly refuses a user's directory too" \
  '[ $rc = 2 ] && grep -q "exists and is not a report eldr-sim wrote" "$TMP/err"'
unchanged "  ... thesis intact" "$thesis" "$TMP/thesis"

# ---------------------------------------------------------------- a report never lives where points live
sed 's/"name": "tau", //' "$TMP/tau.json" >"$TMP/report.json"
expect_error "a sweep named report (the file report.json)" "report.json: name: 'report' is where the sweep's report goes" \
  -- sweep "$TMP/report.json" --out "$TMP/r2"
check "  ... nothing written" '[ ! -e "$TMP/r2" ]'

# ---------------------------------------------------------------- sweep: points and reports it did not write
mkdir -p "$TMP/r3/tau/tau=0" && echo mine >"$TMP/r3/tau/tau=0/notes.txt"
mine=$(snapshot "$TMP/r3")
expect_error "sweep --out where a point's directory is a user's" "tau=0: --out: exists and is not a sweep point eldr-sim wrote" \
  -- sweep "$TMP/tau.json" --out "$TMP/r3" -q
unchanged "  ... notes.txt intact, no point ran" "$mine" "$TMP/r3"
check "  ... no point ran" '[ ! -e "$TMP/r3/tau/tau=0.2" ]'
cp -r "$TMP/r" "$TMP/r4" && rm -rf "$TMP/r4/report" "$TMP/r4/tau/tau=0.2" && mkdir "$TMP/r4/report" && echo x >"$TMP/r4/report/draft.md"
expect_error "sweep --report where OUT/report is a user's" "r4/report: --report: exists and is not a report eldr-sim wrote" \
  -- sweep "$TMP/tau.json" --out "$TMP/r4" --report -q
check "  ... refused before the missing point ran" '[ ! -e "$TMP/r4/tau/tau=0.2" ] && [ -f "$TMP/r4/report/draft.md" ]'
expect_error "sweep --out a directory holding the sweep file" "--out: holds an input of this command, the sweep file" \
  -- sweep "$TMP/tau.json" --out "$TMP" -q

# ---------------------------------------------------------------- an output is never an input
cp configs/default.json "$TMP/c.json"
cfg=$(snapshot "$TMP/c.json")
expect_error "fit C.json --out C.json" "c.json: --out: is an input of this command, the config" -- fit "$TMP/c.json" --out "$TMP/c.json"
ln "$TMP/c.json" "$TMP/hard.json"
expect_error "fit --out a hard link of the config" "hard.json: --out: is an input of this command, the config" \
  -- fit "$TMP/c.json" --out "$TMP/hard.json"
expect_error "trace stats C.json --json C.json" "c.json: --json: is an input of this command, the config" \
  -- trace stats "$TMP/c.json" --json "$TMP/c.json"
expect_error "run --out the directory holding its config" "--out: holds an input of this command, the config" \
  -- run "$TMP/c.json" --out "$TMP"
expect_error "run --out a directory the config reads" "configs/cluster: --out: holds an input of this command, a file the config reads" \
  -- run configs/default.json --out configs/cluster
expect_error "trace gen --out the directory holding its config" "--out: holds an input of this command, the config" \
  -- trace gen "$TMP/c.json" --out "$TMP"
unchanged "  ... the config intact" "$cfg" "$TMP/c.json"
cp traces/calibration/rr_task_tpot.csv "$TMP/m.csv"
measured=$(snapshot "$TMP/m.csv")
expect_error "calibrate M.csv --out M.csv" "m.csv: --out: is an input of this command, the measured data" \
  -- calibrate "$TMP/m.csv" --model qwen3-30b-a3b --out "$TMP/m.csv"
expect_error "calibrate --report the measured data" "m.csv: --report: is an input of this command, the measured data" \
  -- calibrate "$TMP/m.csv" --model qwen3-30b-a3b --out "$TMP/cal.json" --report "$TMP/m.csv"
unchanged "  ... the measured data intact" "$measured" "$TMP/m.csv"
mkdir "$TMP/cap" && cp tests/data/vllm/responses_chat.jsonl "$TMP/cap/requests.jsonl"
captured=$(snapshot "$TMP/cap")
expect_error "trace import vllm DIR/requests.jsonl --out DIR" "cap: --out: holds an input of this command, the captured responses" \
  -- trace import vllm "$TMP/cap/requests.jsonl" --model deepseek-v2-lite --out "$TMP/cap"
head -20 traces/mooncake_conversation.jsonl >"$TMP/cap/mooncake.jsonl"
expect_error "trace import mooncake --out the directory of its input" "--out: holds an input of this command, the Mooncake trace" \
  -- trace import mooncake "$TMP/cap/mooncake.jsonl" --out "$TMP/cap"
rm "$TMP/cap/mooncake.jsonl"
unchanged "  ... the captured responses intact" "$captured" "$TMP/cap"

# ---------------------------------------------------------------- property: random placements
# Outputs of report, trace stats --json and fit --out placed at random against the inputs and a user's
# files (the paths themselves, parents, children, siblings, symbolic links to them): whatever each
# command answers, no byte of a file eldr-sim did not write changes, but for the one file a command
# was told to write (a file output replaces the file named, as cp and cc -o do, unless it is an input).
/usr/bin/python3 - "$ELDRSIM" "$TMP" <<'PY'
import hashlib, os, random, subprocess, sys
eldrsim, tmp = sys.argv[1], sys.argv[2]
root = os.path.join(tmp, "prop")
os.makedirs(os.path.join(root, "user", "deep"))
subprocess.run(["cp", "-r", os.path.join(tmp, "r"), os.path.join(root, "res")], check=True)
subprocess.run(["rm", "-rf", os.path.join(root, "res", "report")], check=True)
subprocess.run(["cp", "configs/default.json", os.path.join(root, "user", "c.json")], check=True)
for name, text in [("user/notes.md", "notes\n"), ("user/deep/data.csv", "1,2\n"), ("user/report.md", "mine\n")]:
    with open(os.path.join(root, name), "w") as f:
        f.write(text)
os.symlink(os.path.join(root, "user"), os.path.join(root, "link-user"))
os.symlink(os.path.join(root, "res"), os.path.join(root, "link-res"))

ours = set()


def theirs():
    """Every file not under a directory eldr-sim marked as its own, with its checksum."""
    out = {}
    for d, dirs, files in os.walk(root):
        if ".eldrsim-report" in files:
            dirs[:] = []
            continue
        for f in files:
            p = os.path.join(d, f)
            if os.path.islink(p):
                continue
            if os.path.realpath(p) in ours:
                continue  # what trace stats and fit wrote earlier, theirs to replace
            out[os.path.relpath(p, root)] = hashlib.sha1(open(p, "rb").read()).hexdigest()
    return out

places = ["", "res", "res/tau", "res/tau/tau=0", "res/combined.csv", "user", "user/deep", "user/c.json",
          "user/notes.md", "link-user", "link-res", "link-res/tau", "user/deep/data.csv"]
rng = random.Random(7)
before = theirs()
changed, tried, foreign = [], 0, 0
for i in range(60):
    base = rng.choice(places)
    tail = rng.choice(["", "", "new", "..", "new/deeper"])
    out = os.path.normpath(os.path.join(root, base, tail))
    kind = rng.choice(["report", "report", "stats", "fit"])
    if kind == "report":
        cmd = [eldrsim, "report", os.path.join(root, "res"), "--out", out]
    elif kind == "stats":
        cmd = [eldrsim, "trace", "stats", os.path.join(root, "user", "c.json"), "--json", out,
               "--set", "workload.measured_requests=20", "--set", "workload.calibration_requests=20"]
    else:
        cmd = [eldrsim, "fit", os.path.join(root, "user", "c.json"), "--out", out, "--set",
               "workload.calibration_requests=300", "--set", "eldr.mask_pairs=2000"]
    # Coverage: how many tries aim a report at an existing directory eldr-sim did not write.
    foreign += kind == "report" and os.path.isdir(out) and not os.path.exists(os.path.join(out, ".eldrsim-report"))
    p = subprocess.run(cmd, capture_output=True, text=True)
    tried += 1
    if p.returncode == 0 and kind != "report":
        ours.add(os.path.realpath(out))
    after = theirs()
    lost = {k for k in before if before[k] != after.get(k) and os.path.realpath(os.path.join(root, k)) not in ours}
    if lost:
        changed.append(f"{' '.join(cmd[1:3])} --out {os.path.relpath(out, root)}: exit {p.returncode}, changed {sorted(lost)}")
    if p.returncode not in (0, 2) or (p.returncode == 2 and len(p.stderr.strip().splitlines()) != 1):
        changed.append(f"{' '.join(cmd[1:3])} --out {os.path.relpath(out, root)}: exit {p.returncode}: {p.stderr[-300:]}")
    before = after
if foreign < 5:
    changed.append(f"only {foreign} reports aimed at a directory eldr-sim did not write: the test proves little")
print(("ok   " if not changed else "FAIL ") + f"random output placements: {tried} commands ({foreign} reports aimed "
      f"at a directory eldr-sim did not write), {len(changed)} changed a file eldr-sim did not write or answered "
      f"in more than one line")
for c in changed[:10]:
    print("     " + c)
sys.exit(1 if changed else 0)
PY
rc=$?
if [ $rc = 0 ]; then pass=$((pass + 1)); else failures=$((failures + 1)); fi
finish
