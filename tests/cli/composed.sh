#!/usr/bin/env bash
# Composed routers (sim/routing/compose/) through the CLI. Each built-in router, written by hand as a
# composition in the config's composed section (named after it, so it draws from its random stream),
# gives byte-identical requests.csv on the default scenario (eldr: decisions.csv too). Bad sections are
# one line and exit 2; a filter that empties the candidate set at run time falls back and is counted
# in summary.json.
# Usage: composed.sh PATH/TO/eldrsim   (run from the project root)
set -u
ELDRSIM=${1:?usage: composed.sh PATH/TO/eldrsim}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/eldr-composed.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
CFG=configs/default.json
# Short runs: the default config at 60 req/s for 20 s after its warm-up.
RUN=(run "$CFG" --set workload.duration_s=20 -q)

declare -A COMPOSITION=(
  [random]='{"name": "random", "picker": {"random-picker": {}}}'
  [round_robin]='{"name": "round_robin", "picker": {"round-robin-picker": {}}}'
  [jsq]='{"name": "jsq", "scorers": {"queue-scorer": {"weight": 1}}, "picker": {"max-score-picker": {}}}'
  [p2c]='{"name": "p2c", "scorers": {"queue-scorer": {"weight": 1}}, "picker": {"p2c-picker": {}}}'
  [domain]='{"name": "domain", "filters": {"label-pool-filter": {}}, "scorers": {"queue-scorer": {}}}'
  [eldr]='{"name": "eldr", "filters": {"locality-band-filter": {}}, "scorers": {"queue-scorer": {}},
           "picker": {"max-score-picker": {"tie_break": "lowest-index"}}}'
)
for r in random round_robin jsq p2c domain eldr; do
  "$ELDRSIM" "${RUN[@]}" --router "$r" --decisions --out "$TMP/builtin-$r"
  "$ELDRSIM" "${RUN[@]}" --router composed --set "composed=${COMPOSITION[$r]}" --decisions --out "$TMP/composed-$r"
  check "$r as a composition: byte-identical requests.csv" \
    "cmp -s '$TMP/builtin-$r/requests.csv' '$TMP/composed-$r/requests.csv'"
done
check "eldr as a composition: byte-identical decisions.csv (similarities, band)" \
  "cmp -s '$TMP/builtin-eldr/decisions.csv' '$TMP/composed-eldr/decisions.csv'"
check "eldr as a composition: the same router_stats (refits, mask, mean similarity)" \
  "$PY -c 'import json,sys; a,b=(json.load(open(f))[\"router_stats\"] for f in sys.argv[1:]); sys.exit(a!=b)' \
     '$TMP/builtin-eldr/summary.json' '$TMP/composed-eldr/summary.json'"
check "another name draws other numbers (jsq under its own name differs)" \
  "\"\$ELDRSIM\" \"\${RUN[@]}\" --router composed --set 'composed={\"scorers\": {\"queue-scorer\": {}}}' \
     --out '$TMP/jsq-other' && ! cmp -s '$TMP/builtin-jsq/requests.csv' '$TMP/jsq-other/requests.csv'"
check "summary.json's config holds the composition as run, defaults included" \
  "$PY -c 'import json,sys; c=json.load(open(sys.argv[1]))[\"config\"][\"composed\"]; \
     sys.exit(c[\"scorers\"] != {\"queue-scorer\": {\"weight\": 1}} or c[\"picker\"] != {\"max-score-picker\": {\"tie_break\": \"random\"}})' \
     '$TMP/composed-jsq/summary.json'"

# A weighted mix on the default scenario: queue and expert locality (its state from the eldr section).
"$ELDRSIM" "${RUN[@]}" --router composed \
  --set 'composed={"scorers": {"queue-scorer": {}, "expert-locality-scorer": {"weight": 2}, "kv-cache-utilization-scorer": {}}}' \
  --out "$TMP/mix"
check "queue + expert locality + KV utilisation runs, with ELDR's statistics" \
  "$PY -c 'import json,sys; s=json.load(open(sys.argv[1])); st=s[\"router_stats\"]; \
     sys.exit(not (st[\"mean_best_similarity\"] > 0.5 and s[\"requests\"] > 1000))' '$TMP/mix/summary.json'"

# The run-time fallback: a load threshold of 0 in flight leaves nobody once every worker is busy.
"$ELDRSIM" "${RUN[@]}" --router composed \
  --set 'composed={"filters": {"load-threshold-filter": {"max_in_flight": 0}}, "scorers": {"queue-scorer": {}}}' \
  --out "$TMP/fallback"
check "a filter that empties the candidates falls back, counted in summary.json" \
  "$PY -c 'import json,sys; s=json.load(open(sys.argv[1])); n=s[\"router_stats\"][\"filter_fallbacks\"]; \
     sys.exit(not (0 < n))' '$TMP/fallback/summary.json'"
"$ELDRSIM" "${RUN[@]}" --router composed \
  --set 'composed={"filters": {"load-threshold-filter": {"max_in_flight": 100000}}, "scorers": {"queue-scorer": {}}}' \
  --out "$TMP/nofallback"
check "a threshold nobody reaches never falls back, and routes as without it" \
  "$PY -c 'import json,sys; sys.exit(json.load(open(sys.argv[1]))[\"router_stats\"][\"filter_fallbacks\"] != 0)' \
     '$TMP/nofallback/summary.json'"

# The prefill router as a composition (prefill_router): with prefix caching and shared system prompts,
# llm-d's prefill profile (prefix cache 2, queue 1) spreads prompts over the prefill workers, where the
# hash ring sends each system prompt's requests to its owner.
PC=(--router jsq --set serving.prefix_cache=true --set workload.system_prompts=8 --set workload.system_prompt_tokens=512)
"$ELDRSIM" "${RUN[@]}" "${PC[@]}" --out "$TMP/ring"
"$ELDRSIM" "${RUN[@]}" "${PC[@]}" --set 'prefill_router={"name": "ring"}' --out "$TMP/ring-named"
check "a prefill_router section without plugins is the hash ring (and leaves the resolved config alone)" \
  "cmp -s '$TMP/ring/requests.csv' '$TMP/ring-named/requests.csv' && ! grep -q prefill_router '$TMP/ring/summary.json'"
"$ELDRSIM" "${RUN[@]}" "${PC[@]}" --set 'prefill_router={"scorers": {"prefix-cache-scorer": {"weight": 2}, "queue-scorer": {}}}' \
  --out "$TMP/prefill"
check "llm-d's prefill profile as the prefill router: prompts spread wider than the ring's, recorded in the config" \
  "$PY -c 'import csv,json,sys,collections
def spread(d):
    n = collections.Counter(r[\"prefill_worker\"] for r in csv.DictReader(open(d + \"/requests.csv\")))
    return max(n.values()) / min(n.values())
c = json.load(open(sys.argv[2] + \"/summary.json\"))[\"config\"][\"prefill_router\"]
sys.exit(not (spread(sys.argv[2]) < spread(sys.argv[1]) and c[\"scorers\"][\"queue-scorer\"] == {\"weight\": 1}))' '$TMP/ring' '$TMP/prefill'"
expect_error "the prefill router cannot use expert locality" "prefill_router.scorers.expert-locality-scorer" "known only once it is prefilled" \
  -- "${RUN[@]}" --set 'prefill_router={"scorers": {"expert-locality-scorer": {}}}' --out "$TMP/x"

expect_error "an unknown scorer suggests the closest" "composed.scorers.queue_scorer" "did you mean 'queue-scorer'" \
  -- "${RUN[@]}" --router composed --set 'composed={"scorers": {"queue_scorer": {}}}' --out "$TMP/x"
expect_error "a negative weight" "composed.scorers.expert-locality-scorer.weight" "must be between 0" \
  -- "${RUN[@]}" --router composed --set composed.scorers.expert-locality-scorer.weight=-1 --out "$TMP/x"
expect_error "two pickers" "composed.picker" "give exactly one" \
  -- "${RUN[@]}" --router composed --set 'composed.picker={"p2c-picker": {}, "random-picker": {}}' --out "$TMP/x"
expect_error "a composed section is checked under another router too" "composed.filters.load-threshold-filter.max_in_flight" \
  -- "${RUN[@]}" --router jsq --set composed.filters.load-threshold-filter.max_in_flight=-3 --out "$TMP/x"
check "no results directory is left by the errors" "[ ! -e '$TMP/x' ]"

finish
