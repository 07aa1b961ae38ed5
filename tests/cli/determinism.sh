#!/usr/bin/env bash
# Same config, trace and seed: byte-identical result files, for the routers and features with the
# most state (ELDR's fit and online refit, prefix caching with signature and decode caches, a
# replayed trace with shared prefixes). Usage: determinism.sh PATH/TO/eldrsim (from the project root).
set -u
ELDRSIM=${1:?usage: determinism.sh PATH/TO/eldrsim}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/eldr-det.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
. "$(dirname "$0")/lib.sh"

same_twice() {  # NAME ARGS...: run twice, compare every file written
  local name=$1
  shift
  for k in 1 2; do
    "$ELDRSIM" "$@" -q --steps --out "$TMP/$name-$k" >/dev/null 2>"$TMP/$name-$k.err" ||
      { bad "$name: run $k failed: $(cat "$TMP/$name-$k.err")"; return; }
  done
  if diff -r "$TMP/$name-1" "$TMP/$name-2" >/dev/null; then
    ok "$name: byte-identical ($(ls "$TMP/$name-1" | tr '\n' ' '))"
  else
    bad "$name: results differ"
  fi
}

same_twice eldr run configs/default.json --router eldr --requests 400 --set workload.warmup_requests=100
same_twice p2c run configs/default.json --router p2c --requests 400 --set workload.warmup_requests=100 --seed 5
same_twice prefix-cache run configs/prefix_cache.json --router eldr --requests 600 --set workload.distinct_prompts=100 \
  --set workload.calibration_requests=200
same_twice system-prompts run configs/default.json --router eldr --requests 400 --set workload.warmup_requests=0 \
  --set serving.prefix_cache=true --set workload.system_prompts=3 --set workload.system_prompt_tokens=100
"$ELDRSIM" trace import mooncake --out "$TMP/moon" --limit 300 --max-prompt 8192 -q
same_twice mooncake run configs/mooncake.json --set workload.trace="$TMP/moon" --set workload.calibration_requests=50

finish
