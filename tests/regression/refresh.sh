#!/usr/bin/env bash
# Refreshes the committed regression baseline (tests/regression/baseline/) from this build: runs
# tests/regression/sweep.json and keeps, per router, summary.json and the measured requests' TPOT
# (requests.csv cut to the measured rows and to id, label, measured, tpot_ms: all `eldrsim compare` reads).
# Usage: refresh.sh PATH/TO/eldrsim   (or `make regression-baseline`)
set -eu
ELDRSIM=${1:?usage: refresh.sh PATH/TO/eldrsim}
HERE=$(cd "$(dirname "$0")" && pwd)
TMP=$(mktemp -d "${TMPDIR:-/tmp}/eldr-regression.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
"$ELDRSIM" sweep "$HERE/sweep.json" --out "$TMP/run" -q
rm -rf "$HERE/baseline.new"
for d in "$TMP"/run/gate/*/; do
  n=$(basename "$d")
  mkdir -p "$HERE/baseline.new/gate/$n"
  /usr/bin/python3 - "$d/summary.json" "$HERE/baseline.new/gate/$n/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
s.pop("config", None)  # the resolved config holds absolute paths of this machine
s.pop("files", None)   # the checksums are of the whole requests.csv, which is cut below (compare counts rows)
json.dump(s, open(sys.argv[2], "w"), indent=2, sort_keys=True)
open(sys.argv[2], "a").write("\n")
PY
  awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i }
           NR == 1 || $c["measured"] == "1" { print $c["id"] "," $c["label"] "," $c["measured"] "," $c["tpot_ms"] }' "$d/requests.csv" \
    >"$HERE/baseline.new/gate/$n/requests.csv"
done
rm -rf "$HERE/baseline"
mv "$HERE/baseline.new" "$HERE/baseline"
echo "refreshed $HERE/baseline ($(ls "$HERE/baseline/gate" | wc -l) routers); commit it with the change that moved TPOT"
