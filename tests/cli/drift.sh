#!/usr/bin/env bash
# ELDR under drift through the CLI: the triggered policy refits on the burst config (after the burst
# starts, never before) and not on the stationary default config of the same length; static never
# refits; `run --decisions` writes decisions.csv with one row per request whose choice equals
# requests.csv's decode_worker, and windows.csv.
# Usage: drift.sh PATH/TO/eldrsim   (run from the project root)
set -u
ELDRSIM=${1:?usage: drift.sh PATH/TO/eldrsim}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/eldr-drift.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
. "$(dirname "$0")/lib.sh"
py() { /usr/bin/python3 -c "$1"; }

"$ELDRSIM" run configs/whatif/drift-burst.json --router eldr --set eldr.refit=triggered -q --out "$TMP/burst" >/dev/null 2>&1
check "triggered refits on the burst, first after it starts (30 s)" \
  'py "import json; d=json.load(open(\"$TMP/burst/summary.json\"))[\"drift\"]; t=[x for x in d[\"refit_times_s\"]]; exit(0 if t and min(t) >= 30 and d[\"refits_measured\"] == len(t) else 1)"'
"$ELDRSIM" run configs/default.json --router eldr --set eldr.refit=triggered -q --out "$TMP/stationary" >/dev/null 2>&1
check "triggered does not fire on the stationary default config" \
  'py "import json; s=json.load(open(\"$TMP/stationary/summary.json\")); exit(0 if s[\"router_stats\"][\"drift_fires\"] == 0 and s[\"drift\"][\"refit_times_s\"] == [] else 1)"'
"$ELDRSIM" run configs/whatif/drift-burst.json --router eldr --set eldr.refit=static --decisions -q --out "$TMP/static" >/dev/null 2>&1
check "static never refits" \
  'py "import json; s=json.load(open(\"$TMP/static/summary.json\")); exit(0 if s[\"router_stats\"][\"refits\"] == 0 and s[\"drift\"][\"refit_times_s\"] == [] else 1)"'
check "decisions.csv: one row per request, the choice is requests.csv's decode_worker" 'py "
import csv
req = {r[\"id\"]: r[\"decode_worker\"] for r in csv.DictReader(open(\"$TMP/static/requests.csv\"))}
dec = list(csv.DictReader(open(\"$TMP/static/decisions.csv\")))
ok = len(dec) == len(req) and sorted(d[\"id\"] for d in dec) == sorted(req) and all(d[\"chosen\"] == req[d[\"id\"]] for d in dec)
for d in dec:
    load = [int(x) for x in d[\"in_flight\"].split(\";\")]
    cands = [tuple(int(y) for y in c.split(\":\")) for c in d[\"candidates\"].split(\";\")]
    best = min(cands, key=lambda c: (c[1], c[0]))
    ok = ok and best[0] == int(d[\"chosen\"]) and all(load[w] == l for w, l in cands)
exit(0 if ok else 1)"'
check "windows.csv is written, and no decisions.csv without the flag" \
  '[ -s "$TMP/burst/windows.csv" ] && [ ! -e "$TMP/burst/decisions.csv" ]'
finish
