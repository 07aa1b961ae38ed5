#!/usr/bin/env bash
# `eldrsim fit`: writes a router model that `eldrsim run --router eldr` uses exactly as a fit on the fly,
# and a model that does not fit the cluster is refused with exit 2 and a one-line error.
# Usage: fit.sh PATH/TO/eldrsim   (run from the project root)
set -u
ELDRSIM=${1:?usage: fit.sh PATH/TO/eldrsim}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/eldr-fit.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
. "$(dirname "$0")/lib.sh"

small=(--set workload.measured_requests=200 --set workload.warmup_requests=0 --set workload.calibration_requests=300
       --set eldr.mask_pairs=3000)
"$ELDRSIM" fit configs/default.json --out "$TMP/model.json" "${small[@]}" >"$TMP/fit.out" 2>&1
check "fit writes a model" 'grep -q "16 balanced centroids" "$TMP/fit.out" && grep -q "eldr-router-model" "$TMP/model.json"'
"$ELDRSIM" run configs/default.json --router eldr "${small[@]}" -q --out "$TMP/onthefly" >/dev/null 2>&1
"$ELDRSIM" run configs/default.json --router eldr "${small[@]}" --set eldr.model_file="$TMP/model.json" -q --out "$TMP/file" >/dev/null 2>&1
check "a run from the model file equals a fit on the fly" 'cmp -s "$TMP/onthefly/requests.csv" "$TMP/file/requests.csv"'
"$ELDRSIM" run configs/default.json --router eldr "${small[@]}" --set eldr.model_file="$TMP/model.json" \
  --set topology.decode.instances=8 --set 'topology.decode.nodes=[1]' -q --out "$TMP/bad" >"$TMP/bad.out" 2>&1
rc=$?
check "a model for 16 workers on 8 is refused" '[ $rc = 2 ] && grep -q "model.json: centroids: 16 centroids for 8 decode workers" "$TMP/bad.out"'
# Which fit: the config's router's (here round robin's: none, so the table's only one), or --fit by name.
"$ELDRSIM" fit configs/default.json --fit eldr --out "$TMP/named.json" "${small[@]}" -q >"$TMP/named.out" 2>&1
check "--fit eldr writes the same model as the default choice" 'cmp -s "$TMP/model.json" "$TMP/named.json" && [ ! -s "$TMP/named.out" ]'
"$ELDRSIM" fit configs/default.json --set router=composed --set composed.scorers.expert-locality-scorer.weight=1 \
  --out "$TMP/composed.json" "${small[@]}" -q >/dev/null 2>&1
check "a composition with an expert-locality scorer fits the same model" 'cmp -s "$TMP/model.json" "$TMP/composed.json"'
"$ELDRSIM" fit configs/default.json --fit nope --out "$TMP/nope.json" "${small[@]}" >"$TMP/nope.out" 2>&1
rc=$?
check "an unknown --fit: exit 2, one line naming the fits, nothing written" \
  '[ $rc = 2 ] && [ $(wc -l <"$TMP/nope.out") = 1 ] && grep -q "eldrsim: error: --fit: no router fit .nope. (there are: eldr)" "$TMP/nope.out" && [ ! -e "$TMP/nope.json" ]'
finish
