#!/usr/bin/env bash
# The language workload's topics (models/routing/*.json, kinds.language.shared_subtopics; routing-model.md
# calibration step 8): a topic is shared by every language, so requests of one topic are alike in any
# language. The domain oracle pools by language and cannot see it; ELDR's signatures can. For each
# measured model at 60 req/s: with shared topics ELDR's decode batches touch at least 2% fewer distinct
# experts per layer than the oracle's, and that lead is more than 1.5 points larger than with each
# language's own sub-topics at the same strength and mix (the profile with shared_subtopics false),
# where only the sub-topics below a language are left for ELDR to find (Qwen3 -4.2% against -1.8%).
# The topics' strength is set to 2.25 in both profiles: this checks the mechanism, not the calibrated
# strength (which follows each model's fitted task label strength, routing-model.md step 10).
# Usage: language_topics.sh PATH/TO/eldrsim (from the project root).
set -u
ELDRSIM=${1:?usage: language_topics.sh PATH/TO/eldrsim}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/eldr-topics.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3

models="qwen3-30b-a3b gpt-oss-120b gemma-4-26b-a4b"
for m in $models; do
  # The profile with topics of strength 2.25, shared and each language's own (relative file paths made
  # absolute).
  $PY - "models/routing/$m.json" "$TMP/$m" "$PWD" <<'PYEOF'
import json, os, sys
p = json.load(open(sys.argv[1]))
p["kinds"]["language"]["subtopic_strength"] = 2.25
if p.get("language_counts_file") and not os.path.isabs(p["language_counts_file"]):
    p["language_counts_file"] = os.path.join(sys.argv[3], p["language_counts_file"])
for shared in (True, False):
    p["kinds"]["language"]["shared_subtopics"] = shared
    json.dump(p, open(sys.argv[2] + ("-shared.json" if shared else "-own.json"), "w"))
PYEOF
  for topics in shared own; do
    profile=(--set "workload.routing_profile=$TMP/$m-$topics.json")
    for router in domain eldr; do
      "$ELDRSIM" run configs/default.json --set model=$m --set workload.kind=language --router $router --rate 60 \
        "${profile[@]}" -q --out "$TMP/$m-$topics-$router" >/dev/null 2>"$TMP/$m-$topics-$router.err" &
    done
    wait || true
  done
done

# ELDR's distinct experts per layer relative to the oracle's, in percent (negative: ELDR touches fewer).
relative() {
  $PY - "$TMP/$1-$2-eldr/summary.json" "$TMP/$1-$2-domain/summary.json" <<'PYEOF'
import json, sys
e, o = (json.load(open(f))["distinct_experts_per_layer_mean"] for f in sys.argv[1:3])
print(f"{100 * (e - o) / o:.2f}")
PYEOF
}
for m in $models; do
  if ! [ -s "$TMP/$m-shared-eldr/summary.json" ] || ! [ -s "$TMP/$m-shared-domain/summary.json" ] ||
    ! [ -s "$TMP/$m-own-eldr/summary.json" ] || ! [ -s "$TMP/$m-own-domain/summary.json" ]; then
    bad "$m: a run failed: $(cat "$TMP/$m"-*.err)"
    continue
  fi
  shared=$(relative $m shared)
  own=$(relative $m own)
  check "$m, shared topics: ELDR's batches touch at least 2% fewer experts than the oracle's ($shared%)" \
    "$PY -c 'import sys; sys.exit(0 if $shared <= -2 else 1)'"
  check "$m: shared topics widen ELDR's lead over the oracle by more than 1.5 points ($shared% against $own%)" \
    "$PY -c 'import sys; sys.exit(0 if $shared < $own - 1.5 else 1)'"
done
finish
