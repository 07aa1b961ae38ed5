#!/usr/bin/env bash
# workload.union: the expected unions against the sampled ones on the default scenario (docs/design.md
# section 8, docs/model.md section 6), for every router at 20, 60 and 100 req/s: TPOT P50 and the mean
# distinct experts per layer within 1%, P99 within 1.5%, each as the mean of seeds 1 and 2. The
# expectation is the exact mean of the law the sampled mode draws from (the palettes' record
# frequencies), so the two differ only by noise: the sampled mode's step-to-step noise, and the
# different timings it leads to, which change load-aware routers' decisions. A single seed's P99 of
# ELDR at 20 req/s (24 requests above it) moves by about 1% that way; two seeds halve it.
# Usage: expected_union.sh PATH/TO/eldrsim (from the project root).
set -u
ELDRSIM=${1:?usage: expected_union.sh PATH/TO/eldrsim}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/eldr-union.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3

routers=$("$ELDRSIM" routers)
for rate in 20 60 100; do
  for router in $routers; do
    for seed in 1 2; do
      for mode in expected sampled; do
        "$ELDRSIM" run configs/default.json --router "$router" --rate "$rate" --seed $seed --set workload.union=$mode -q \
          --out "$TMP/$router-$rate-$mode-$seed" >/dev/null 2>"$TMP/$router-$rate-$mode-$seed.err" &
      done
      wait || true
    done
  done
done

for rate in 20 60 100; do
  for router in $routers; do
    runs=("$TMP/$router-$rate-"{expected,sampled}-{1,2}/summary.json)
    missing=0
    for f in "${runs[@]}"; do [ -s "$f" ] || missing=1; done
    if [ $missing = 1 ]; then
      bad "$router at $rate req/s: a run failed: $(cat "$TMP/$router-$rate-"*.err)"
      continue
    fi
    out=$($PY - "${runs[@]}" <<'PYEOF'
import json, sys
e1, e2, s1, s2 = (json.load(open(p)) for p in sys.argv[1:5])
assert all(x["expert_union"] == "expected" for x in (e1, e2)), "summary.json names the wrong mode"
assert all(x["expert_union"] == "sampled" for x in (s1, s2)), "summary.json names the wrong mode"
def mean(a, b, get):
    return (get(a) + get(b)) / 2
metrics = [("tpot p50", lambda x: x["tpot_ms"]["p50"]), ("tpot p99", lambda x: x["tpot_ms"]["p99"]),
           ("distinct/layer", lambda x: x["distinct_experts_per_layer_mean"])]
rows = [(n, mean(e1, e2, g), mean(s1, s2, g)) for n, g in metrics]
worst = max(abs(x / y - 1) for _, x, y in rows)
print(" ".join(f"{n} {x:.3f}/{y:.3f}" for n, x, y in rows), f"worst {100 * worst:.2f}%")
# P99 within 1.5%: ELDR's batches follow sub-topics that one request keeps whole (the fitted task
# locality, routing-model.md step 10), so its tail is the noisiest (1.28% at 100 req/s, 2026-12-05).
sys.exit(0 if all(abs(x / y - 1) <= (0.015 if n == "tpot p99" else 0.01) for n, x, y in rows) else 1)
PYEOF
    ) && ok "$router at $rate req/s, expected/sampled: $out" || bad "$router at $rate req/s, expected/sampled: $out"
  done
done

# The steps say which mode ran, and the expected counts are fractional (one token alone picks exactly
# top_k = 8: its probabilities sum to 8 per layer).
"$ELDRSIM" run configs/default.json --requests 200 --set workload.warmup_requests=0 --steps -q --out "$TMP/steps" >/dev/null
steps_ok() {
  head -1 "$TMP/steps/steps.csv" | grep -q ',distinct_experts_mean,expert_union' &&
    awk -F, 'NR > 1 && $4 == 1 && ($6 - 8 > 1e-6 || 8 - $6 > 1e-6) { exit 1 }
             NR > 1 && $4 >= 2 { n++; if ($6 !~ /\./ || $7 != "expected") exit 1 }
             END { exit n > 0 ? 0 : 1 }' "$TMP/steps/steps.csv"
}
check "steps.csv: an expert_union column; one sequence: 8 distinct; several: fractional, expected" steps_ok
"$ELDRSIM" trace gen configs/default.json --out "$TMP/trace" --routing --set workload.measured_requests=40 \
  --set workload.warmup_requests=5 --set workload.calibration_requests=10 --set workload.output_tokens=64 >/dev/null 2>&1
expect_error "union expected for a replayed trace" "workload.union" "sampled" -- \
  run configs/default.json --set workload.kind=trace --set workload.trace="$TMP/trace" --set workload.routing=trace \
  --set workload.union=expected
expect_error "union expected on expert-parallel decode instances" "workload.union" "expert-parallel" -- \
  run configs/tpep.json --set workload.union=expected
expect_error "union of an unknown kind" "workload.union" "expected, sampled" -- \
  run configs/default.json --set workload.union=exact
check "expert-parallel instances default to sampled unions" \
  "'$ELDRSIM' run configs/tpep.json --requests 60 --set workload.warmup_requests=0 -q --out '$TMP/tpep' >/dev/null 2>&1 &&
   grep -q '\"expert_union\": \"sampled\"' '$TMP/tpep/summary.json'"
finish
