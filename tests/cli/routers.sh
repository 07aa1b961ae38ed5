#!/usr/bin/env bash
# The decode router table (sim/routing/registry/router_registry.cpp): `eldrsim routers`, --router's help and the
# config's valid names all come from it; a router's own config section is read and checked through its
# entry (eldr.*, jsq_of_d.*) whichever router runs; the worked examples (examples/routers/) run the
# default config to valid results: jsq_of_d with d = the decode workers always takes a least-loaded
# worker, prefix_affinity never one more than its slack (4) above the least loaded.
# Usage: routers.sh PATH/TO/eldrsim   (run from the project root)
set -u
ELDRSIM=${1:?usage: routers.sh PATH/TO/eldrsim}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/eldr-routers.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3

check "routers lists the studied routers, in table order (what make run loops over)" \
  '[ "$(echo $("$ELDRSIM" routers))" = "random round_robin jsq p2c domain eldr" ]'
names=$("$ELDRSIM" routers --all)
check "routers --all adds composed and the worked examples" \
  '[ "$(echo $names)" = "random round_robin jsq p2c domain eldr composed jsq_of_d prefix_affinity" ]'
"$ELDRSIM" routers --all --describe >"$TMP/describe"
check "routers --describe: one line per router, its name then a description" \
  '[ "$(awk "{print \$1}" "$TMP/describe" | tr "\n" " ")" = "$(echo $names) " ] && ! grep -qvE "^[a-z0-9_]+ +[a-z].{10,}$" "$TMP/describe"'
"$ELDRSIM" run --help >"$TMP/help"
check "run --help names every router" \
  'for n in $names; do grep -q "$n" "$TMP/help" || exit 1; done'

expect_error "an unknown router lists the table's names" "router" "jsq_of_d" "prefix_affinity" \
  -- run configs/default.json --router jsq_of_e -q --out "$TMP/x"
expect_error "jsq_of_d.d out of range" "jsq_of_d.d" -- run configs/default.json --router jsq_of_d --set jsq_of_d.d=0 -q --out "$TMP/x"
expect_error "an unknown key in jsq_of_d's section" "jsq_of_d.dd" -- run configs/default.json --router jsq_of_d --set jsq_of_d.dd=2 -q --out "$TMP/x"
expect_error "jsq_of_d's section is checked under another router" "jsq_of_d.d" -- run configs/default.json --router jsq --set jsq_of_d.d=x -q --out "$TMP/x"
expect_error "eldr's section is read through its entry, under any router" "eldr.tau" -- run configs/default.json --router jsq --set eldr.tau=5 -q --out "$TMP/x"
expect_error "an unknown key in eldr's section" "eldr.taux" -- run configs/default.json --router eldr --set eldr.taux=0.1 -q --out "$TMP/x"
check "no result directory left by the rejected runs" '[ ! -e "$TMP/x" ]'

workers=$($PY -c "import json; print(json.load(open('configs/default.json'))['topology']['decode']['instances'])" 2>/dev/null)
[ -n "$workers" ] || workers=$("$ELDRSIM" run configs/default.json --router round_robin -q --out "$TMP/rr" >/dev/null 2>&1 &&
  $PY -c "import json,sys; print(json.load(open(sys.argv[1]))['decode_instances'])" "$TMP/rr/summary.json")

# Valid results: exit 0, every measured request finished, the decision log agrees with requests.csv.
valid() {
  $PY - "$1" <<'PYEOF'
import csv, json, sys
d = sys.argv[1]
s = json.load(open(d + "/summary.json"))
assert s["requests"] > 0 and s["unfinished"] == 0, (s["requests"], s["unfinished"])
chosen = {r["id"]: int(r["chosen"]) for r in csv.DictReader(open(d + "/decisions.csv"))}
reqs = list(csv.DictReader(open(d + "/requests.csv")))
assert all(chosen[r["id"]] == int(r["decode_worker"]) for r in reqs), "decisions.csv disagrees with requests.csv"
PYEOF
}
# The most in-flight requests the chosen worker held above the least loaded, over all decisions.
max_excess() {
  $PY - "$1" <<'PYEOF'
import csv, sys
worst = 0
for r in csv.DictReader(open(sys.argv[1] + "/decisions.csv")):
    loads = [int(v) for v in r["in_flight"].split(";")]
    worst = max(worst, loads[int(r["chosen"])] - min(loads))
print(worst)
PYEOF
}

"$ELDRSIM" run configs/default.json --router jsq_of_d --set jsq_of_d.d="$workers" --decisions -q --out "$TMP/jsq_of_d" >/dev/null 2>"$TMP/err"
check "jsq_of_d (d = $workers) runs the default config to valid results" 'valid "$TMP/jsq_of_d"'
check "jsq_of_d with d = the decode workers always takes a least-loaded worker" '[ "$(max_excess "$TMP/jsq_of_d")" = 0 ]'
"$ELDRSIM" run configs/default.json --router jsq --decisions -q --out "$TMP/jsq" >/dev/null 2>&1
check "jsq always takes a least-loaded worker too (the two differ only in tie-breaks)" '[ "$(max_excess "$TMP/jsq")" = 0 ]'
"$ELDRSIM" run configs/default.json --router jsq_of_d --set jsq_of_d.d=1 --decisions -q --out "$TMP/jsq_of_1" >/dev/null 2>&1
check "jsq_of_d with d = 1 runs, and ignores load (some choice above the least loaded)" \
  'valid "$TMP/jsq_of_1" && [ "$(max_excess "$TMP/jsq_of_1")" -gt 0 ]'

"$ELDRSIM" run configs/default.json --router prefix_affinity --decisions -q --out "$TMP/prefix_affinity" >/dev/null 2>"$TMP/err"
check "prefix_affinity runs the default config to valid results" 'valid "$TMP/prefix_affinity"'
check "prefix_affinity never takes a worker more than 4 above the least loaded" \
  '[ "$(max_excess "$TMP/prefix_affinity")" -le 4 ]'
"$ELDRSIM" run configs/default.json --router prefix_affinity --decisions -q --out "$TMP/prefix_affinity2" >/dev/null 2>&1
check "prefix_affinity: same config, byte-identical results" \
  'cmp -s "$TMP/prefix_affinity/requests.csv" "$TMP/prefix_affinity2/requests.csv" && cmp -s "$TMP/prefix_affinity/decisions.csv" "$TMP/prefix_affinity2/decisions.csv"'
finish
