#!/usr/bin/env bash
# Watching a run (docs/watching-a-run.md): `run --log` shows each step of a request's life in simulated
# time order, two identical runs log identically, logging changes no result, and a bad --log or --cfg
# is one line, exit 2 (SimGrid aborts on several of them). Usage: watch.sh PATH/TO/eldrsim (from the project root).
set -u
ELDRSIM=${1:?usage: watch.sh PATH/TO/eldrsim}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/eldr-watch.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
. "$(dirname "$0")/lib.sh"

SMALL=(run configs/default.json --requests 30 --set workload.warmup_requests=0 -q)

# NAME OUT LOGFILE ARGS...: a small run, its stderr (the log) kept.
small_run() {
  local name=$1 out=$2 log=$3
  shift 3
  if ! "$ELDRSIM" "${SMALL[@]}" --out "$out" "$@" >/dev/null 2>"$log"; then
    bad "$name: run failed: $(tail -n 3 "$log")"
    return 1
  fi
  drop_sanitizer_noise "$log"
}

small_run verbose-1 "$TMP/a" "$TMP/a.log" --log=eldr.thres:verbose
small_run verbose-2 "$TMP/b" "$TMP/b.log" --log=eldr.thres:verbose
small_run plain "$TMP/c" "$TMP/c.log"

check "the log holds every request's arrival and finish" \
  '[ "$(grep -c "request [0-9]*: arrives" "$TMP/a.log")" -eq 30 ] && [ "$(grep -c "request [0-9]*: finishes" "$TMP/a.log")" -eq 30 ]'
check "every line carries the simulated time and its category" \
  '! grep -qvE "^\[ *[0-9]+\.[0-9]{6}\] [^ ]+ \[eldr_[a-z]+/VERBOSE\] " "$TMP/a.log"'

# A request's steps, in this order, at non-decreasing simulated times (arrival strictly before finish).
life_in_order() {
  local id=$1
  grep "request $id: " "$TMP/a.log" | awk -v id="$id" '
    BEGIN { n = split("arrives|prefill starts|prefill ends|picks decode worker|KV transfer starts|KV transfer ends|admitted to decode|finishes", step, "|") }
    {
      match($0, /^\[ *[0-9.]+\]/); t = substr($0, 2, RLENGTH - 2) + 0
      if ($0 !~ step[k + 1]) next
      if (k > 0 && t < last) { print "step " step[k + 1] " at " t " before " last; exit 1 }
      if (k == 0) first = t
      last = t; k++
      if (k == n) exit 0
    }
    END { if (k != n) { print "only " k " of " n " steps, next: " step[k + 1]; exit 1 } if (!(first < last)) { print "arrival not before finish"; exit 1 } }'
}
for id in 0 7 29; do
  check "request $id: arrival < prefill < decision < KV < admission < finish" "life_in_order $id"
done
check "two identical runs log identically" 'diff "$TMP/a.log" "$TMP/b.log" >/dev/null'
check "logging changes no result (requests.csv, summary.json)" 'diff -r "$TMP/a" "$TMP/c" >/dev/null'
check "without --log nothing is logged" '[ ! -s "$TMP/c.log" ]'

# One category to a file; the rest stays quiet. A --cfg SimGrid accepts changes nothing either.
small_run to-file "$TMP/d" "$TMP/d.err" --log=eldr_decode.thres:verbose --log=eldr_decode.app:file:"$TMP/decode.log" \
  --cfg=path:"$TMP"
check "--log=CAT.app:file:PATH writes that category there, nothing on stderr" \
  '[ ! -s "$TMP/d.err" ] && grep -q "admitted to decode" "$TMP/decode.log" && ! grep -q "arrives" "$TMP/decode.log"'
check "a valid --cfg changes no result" 'diff -r "$TMP/c" "$TMP/d" >/dev/null'

# Bad settings: one line, exit 2, nothing written (SimGrid would abort, ignore or crash on these).
for bad_log in "eldr_decod.thres:verbose|unknown category 'eldr_decod'" \
  "eldr.thres:loud|unknown level 'loud'" \
  "eldr.colour:red|unknown setting 'colour'" \
  "eldr.fmt:%d%q|unknown layout sequence %q" \
  "eldr.fmt:%m%|ends with %" \
  "eldr|want CATEGORY.SETTING:VALUE" \
  "eldr.app:tcp:1|unknown appender 'tcp:1'" \
  "eldr.app:file:$TMP|is a directory" \
  "eldr.app:file:$TMP/no/such/run.log|cannot write"; do
  expect_error "--log=${bad_log%%|*}" "--log: " "${bad_log#*|}" -- "${SMALL[@]}" --out "$TMP/bad" "--log=${bad_log%%|*}"
done
for bad_cfg in "no/such/key:1|no config key 'no/such/key'" \
  "contexts/stack-size:big|SimGrid rejects it" \
  "network/model:Foo|Model 'Foo' is invalid" \
  "cpu/optim:x|Invalid value 'x' for option cpu/optim" \
  "contexts/factory:x|Invalid context factory" \
  "network/model|want KEY:VALUE" \
  "network/model:help|help is not available" \
  "path:a,b|one KEY:VALUE per --cfg"; do
  expect_error "--cfg=${bad_cfg%%|*}" "--cfg: " "${bad_cfg#*|}" -- "${SMALL[@]}" --out "$TMP/bad" "--cfg=${bad_cfg%%|*}"
done
# eldr-sim's debug lines exist in a Debug build only: refused (one line, exit 2) where they are compiled out.
"$ELDRSIM" "${SMALL[@]}" --out "$TMP/debug" --log=eldr_decode.thres:debug >/dev/null 2>"$TMP/debug.log"
rc=$?
check "--log=eldr_decode.thres:debug: refused in a Release build, shown in a Debug one" \
  '{ [ $rc -eq 2 ] && [ "$(wc -l <"$TMP/debug.log")" -eq 1 ] && grep -q "^eldrsim: error: --log: .*compiled out" "$TMP/debug.log"; } ||
   { [ $rc -eq 0 ] && grep -q "eldr_decode/DEBUG" "$TMP/debug.log"; }'
check "no output or staging left by a rejected setting" '! ls -A "$TMP" | grep -q bad'

finish
