#!/usr/bin/env bash
# Every config key declared once (sim/config/experiment_keys.cpp and the routers' sections):
# `eldrsim config keys` prints them, docs/config-reference.md is that table and must not be stale, an
# unknown key suggests the closest one, and summary.json records every value a run used with the build
# that ran it. Usage: config_keys.sh PATH/TO/eldrsim (from the project root).
set -u
ELDRSIM=${1:?usage: config_keys.sh PATH/TO/eldrsim}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/eldr-config-keys.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
. "$(dirname "$0")/lib.sh"

"$ELDRSIM" config keys >"$TMP/keys.txt"
"$ELDRSIM" config keys --markdown >"$TMP/keys.md"
check "config keys lists the keys with their defaults and ranges" \
  'grep -qxF "workload.rate_rps  (number; default 60; req/s, between 1e-06 and 1e+07)" "$TMP/keys.txt" &&
   grep -qxF "eldr.tau  (number; default 0.1; cosine, between 0 and 2)" "$TMP/keys.txt" &&
   grep -qxF "    - generated: the calibrated generator of models/routing/<model>.json: per-domain locality" "$TMP/keys.txt"'
check "every router is a choice of the router key" \
  'for r in $("$ELDRSIM" routers --all); do grep -qxF "    - $r: $("$ELDRSIM" routers --all --describe | awk -v r="$r" '"'"'$1 == r { $1 = ""; sub(/^ +/, ""); print }'"'"')" "$TMP/keys.txt" || exit 1; done'
if cmp -s "$TMP/keys.md" docs/config-reference.md; then
  ok "docs/config-reference.md is the generated table"
else
  bad "docs/config-reference.md is stale: run \`make docs\` (or $ELDRSIM config keys --markdown >docs/config-reference.md)"
  diff "$TMP/keys.md" docs/config-reference.md | head -n 10 | sed 's/^/     /'
fi
check "the README's key table is a link to the reference" 'grep -q "docs/config-reference.md" README.md'
# The keys the user guide explains are declared keys (a renamed key cannot linger there).
grep '^| `' docs/configuration.md | cut -d'|' -f2 | grep -oE '`[a-z_.*]+`' | tr -d '`' | sort -u >"$TMP/guide-keys"
: >"$TMP/undeclared"
while IFS= read -r k; do
  pattern=$(echo "$k" | sed -E 's/^topology\.(prefill|decode)\./topology.*./')
  grep -qF "$pattern  (" "$TMP/keys.txt" || echo "$k" >>"$TMP/undeclared"
done <"$TMP/guide-keys"
check "every key docs/configuration.md explains is declared ($(wc -l <"$TMP/guide-keys") keys)" \
  '[ -s "$TMP/guide-keys" ] && [ ! -s "$TMP/undeclared" ]'

expect_error "an unknown key names the closest one" "workload.duration: unknown key (did you mean 'duration_s'?); keys here: kind," -- \
  run configs/default.json --set workload.duration=3 -q --out "$TMP/x"
expect_error "... in a router's section too" "eldr.refit_windows: unknown key (did you mean 'refit_window_s'?)" -- \
  run configs/default.json --set eldr.refit_windows=3 -q --out "$TMP/x"
expect_error "config without a subcommand is a usage error" -- config

# A config written from scratch: the smallest valid one, every other value a default.
cat >"$TMP/scratch.json" <<'JSON'
{"topology": {"prefill": {"instances": 1}, "decode": {"instances": 2}},
 "workload": {"measured_requests": 20, "warmup_requests": 0, "calibration_requests": 40}}
JSON
if "$ELDRSIM" run "$TMP/scratch.json" -q --out "$TMP/scratch" 2>"$TMP/scratch.err"; then
  j() { /usr/bin/python3 -c 'import json, sys; print(json.dumps(eval("s" + sys.argv[1], {"s": json.load(open(sys.argv[2]))})))' "$1" "$TMP/scratch/summary.json"; }
  check "summary.json records defaults the config left out" \
    '[ "$(j "[\"config\"][\"serving\"][\"max_decode_seqs\"]")" = 1024 ] && [ "$(j "[\"config\"][\"workload\"][\"rate_rps\"]")" = 60.0 ] && [ "$(j "[\"config\"][\"model\"]")" = "\"qwen3-30b-a3b\"" ]'
  check "... computed ones too" '[ "$(j "[\"config\"][\"topology\"][\"decode\"][\"tensor_parallel\"]")" = 1 ] && [ "$(j "[\"config\"][\"workload\"][\"union\"]")" = "\"expected\"" ]'
  check "a config from scratch gets the calibrated routing generator, as the reference says" \
    '[ "$(j "[\"config\"][\"workload\"][\"routing\"]")" = "\"generated\"" ] && grep -q "^| \`workload.routing\` | choice | generated; kind trace: trace |" docs/config-reference.md'
  check "summary.json names the build that ran it" \
    '[ "eldrsim $(j "[\"build\"][\"version\"]" | tr -d \")" = "$("$ELDRSIM" --version)" ] && [ "$(j "[\"build\"][\"build_id\"]" | tr -d \" | wc -c)" -gt 16 ]'
  check "only the run's router's section is recorded" '[ "$(j "[\"config\"].get(\"eldr\")")" = null ]'
  # The resolved config is itself a config that resolves to the same values.
  /usr/bin/python3 -c 'import json, sys; json.dump(json.load(open(sys.argv[1]))["config"], open(sys.argv[2], "w"))' \
    "$TMP/scratch/summary.json" "$TMP/resolved.json"
  if "$ELDRSIM" run "$TMP/resolved.json" -q --out "$TMP/again" 2>"$TMP/again.err"; then
    check "the resolved config runs the same experiment" 'cmp -s "$TMP/scratch/requests.csv" "$TMP/again/requests.csv"'
  else
    bad "the resolved config does not run: $(head -n 2 "$TMP/again.err")"
  fi
else
  bad "a config from scratch does not run: $(head -n 3 "$TMP/scratch.err")"
fi
finish
