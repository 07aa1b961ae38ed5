#!/usr/bin/env bash
# One writer per output: a second run into the --out a run is writing, or a second sweep into the OUT
# a sweep is writing, is refused at once (exit 2, one line naming the holder's command, pid and host),
# before any simulation, and the first one's results come out whole. A Slurm array's tasks (--point)
# share their OUT; a lock left by a killed process holds nothing.
# Usage: output_lock.sh PATH/TO/eldrsim   (run from the project root)
set -u
ELDRSIM=${1:?usage: output_lock.sh PATH/TO/eldrsim}
[ -f configs/default.json ] || { echo "run from the project root"; exit 1; }
command -v flock >/dev/null || { echo "skipped: no flock(1)"; exit 77; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/eldr-lock.XXXXXX")
BG=
cleanup() { [ -n "$BG" ] && kill -9 "$BG" 2>/dev/null; rm -rf "$TMP"; }
trap cleanup EXIT
. "$(dirname "$0")/lib.sh"
HOST=$(uname -n)

# wait_for_holder LOCKFILE PID: until the lock file names PID (at most 60 s: a progress condition).
wait_for_holder() {
  for _ in $(seq 1 600); do
    grep -q "^$2@" "$1" 2>/dev/null && return 0
    kill -0 "$2" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

# 1. Two runs into one --out: the second is refused while the first simulates.
"$ELDRSIM" run configs/default.json --requests 20000 --set workload.warmup_requests=0 -q --out "$TMP/r" 2>"$TMP/bg.err" &
BG=$!
wait_for_holder "$TMP/.r.lock" "$BG"
check "a run holds its --out's lock, naming itself" 'grep -q "^$BG@$HOST eldrsim run$" "$TMP/.r.lock"'
expect_error "a second run into the same --out is refused, naming the first" \
  "$TMP/r: --out: being written by eldrsim run (pid $BG on $HOST)" "wait for it to end" -- \
  run configs/default.json --requests 50 --set workload.warmup_requests=0 -q --out "$TMP/r"
# Spelled otherwise (a trailing slash, through ..), the same output.
expect_error "... however the path is spelled" "being written by eldrsim run (pid $BG" -- \
  run configs/default.json --requests 50 --set workload.warmup_requests=0 -q --out "$TMP/x/../r/"
kill -TERM "$BG"
wait "$BG"
rc=$?
BG=
check "the first run, stopped, removes its lock" '[ $rc = 143 ] && [ ! -e "$TMP/.r.lock" ]'
"$ELDRSIM" run configs/default.json --requests 50 --set workload.warmup_requests=0 -q --out "$TMP/r"
rc=$?
check "then a run writes it, and lets go" '[ $rc = 0 ] && [ -f "$TMP/r/summary.json" ] && [ ! -e "$TMP/.r.lock" ]'
# A lock file left by a killed process holds nothing.
echo "999999@$HOST eldrsim run" >"$TMP/.r.lock"
"$ELDRSIM" run configs/default.json --requests 50 --set workload.warmup_requests=0 -q --out "$TMP/r"
rc=$?
check "a lock file nobody holds is taken over" '[ $rc = 0 ] && [ ! -e "$TMP/.r.lock" ]'
# One more of its kind: a trace written into a directory another process is writing.
# (This shell holds the lock, as another host's process would, on its own open file.)
exec {held}>"$TMP/.t.lock"
echo '4242@elsewhere eldrsim trace' >&$held
flock -x "$held"
expect_error "trace gen into a directory being written is refused, naming the holder" \
  "$TMP/t: --out: being written by eldrsim trace (pid 4242 on elsewhere)" -- \
  trace gen configs/default.json --set workload.measured_requests=20 --out "$TMP/t"
exec {held}>&-

# 2. Two sweeps into one OUT: the second is refused while the first runs; the first completes whole.
SMALL='"workload.measured_requests": 150, "workload.warmup_requests": 0'
cat >"$TMP/s.json" <<JSON
{ "name": "s", "base": "configs/default.json", "set": { $SMALL },
  "grid": { "router": ["round_robin", "jsq", "p2c", "random"], "workload.rate_rps": [20, 40, 60] } }
JSON
"$ELDRSIM" sweep "$TMP/s.json" --out "$TMP/o" -j 1 -q &
BG=$!
wait_for_holder "$TMP/.o.lock" "$BG"
expect_error "a second sweep into the same OUT is refused, naming the first" \
  "$TMP/o: --out: being written by eldrsim sweep (pid $BG on $HOST)" -- sweep "$TMP/s.json" --out "$TMP/o" -q
expect_error "... and so is a run into it" "$TMP/o: --out: being written by eldrsim sweep (pid $BG" -- \
  run configs/default.json --requests 50 -q --out "$TMP/o"
expect_error "... and a Slurm array task of it" "being written by eldrsim sweep (pid $BG" -- \
  sweep "$TMP/s.json" --out "$TMP/o" --point 1 -q
wait "$BG"
rc=$?
BG=
check "the first sweep completes (exit 0, 12 rows), and lets go" \
  '[ $rc = 0 ] && [ $(wc -l <"$TMP/o/combined.csv") = 13 ] && [ ! -e "$TMP/.o.lock" ]'

# 3. A Slurm array's tasks share OUT; a whole sweep waits for none of them: it is refused.
exec {held}>"$TMP/.p.lock"
flock -s "$held"
"$ELDRSIM" sweep "$TMP/s.json" --out "$TMP/p" --point 0 -q
rc=$?
check "an array task runs beside another task (a shared lock)" '[ $rc = 0 ] && [ $(ls -d "$TMP"/p/s/*=* | wc -l) = 1 ]'
expect_error "a whole sweep into the array's OUT is refused" \
  "$TMP/p: --out: being written by the tasks of an \`eldrsim sweep\` job array (--point)" -- \
  sweep "$TMP/s.json" --out "$TMP/p" -q
exec {held}>&-

finish
