#!/usr/bin/env bash
# The scale benchmark's configs (configs/scale/, timed by bench/scale_runs.sh): the default scenario
# scaled 4x and 16x. Each cluster file is the shipped mi300x-5node.json with only its name, source and
# node count changed; each config keeps the default's warm-up per prefill worker, and runs with every
# studied router (a short run: 0.5 s of traffic, no warm-up) to a summary whose prefill and decode
# instances, rate and cluster are 4x / 16x the default's run's.
# Usage: scale.sh PATH/TO/eldrsim   (run from the project root)
set -u
ELDRSIM=${1:?usage: scale.sh PATH/TO/eldrsim}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/eldr-scale.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
SHORT=(--set workload.duration_s=0.5 --set workload.warmup_requests=0 -q)

for f in 4 16; do
  check "configs/scale/${f}x.json: its cluster is mi300x-5node.json with ${f}x the nodes, the same warm-up per prefill worker" \
    "$PY - $f <<'PYEOF'
import json, sys
f = int(sys.argv[1])
base, cfg = json.load(open('configs/default.json')), json.load(open(f'configs/scale/{f}x.json'))
c5 = json.load(open('configs/cluster/mi300x-5node.json'))
cl = json.load(open(f'configs/cluster/{cfg[\"cluster\"]}.json'))
assert cl['nodes'] == f * c5['nodes'], cl['nodes']
assert {k: v for k, v in cl.items() if k not in ('name', 'source', 'nodes')} == \
       {k: v for k, v in c5.items() if k not in ('name', 'source', 'nodes')}
bw, w = base['workload'], cfg['workload']
per_worker = lambda c, w: w['warmup_requests'] / c['topology']['prefill']['instances']
assert per_worker(cfg, w) == per_worker(base, bw) == 480, per_worker(cfg, w)
assert w['warmup_rate_rps'] == f * bw['warmup_rate_rps'] and w['duration_s'] == bw['duration_s']
PYEOF"
done

"$ELDRSIM" run configs/default.json --rate 100 --router round_robin "${SHORT[@]}" --out "$TMP/1x" >/dev/null 2>"$TMP/err"
check "the default scenario runs short" '[ -s "$TMP/1x/summary.json" ] || { cat "$TMP/err"; false; }'
for f in 4 16; do
  for r in $("$ELDRSIM" routers); do
    out="$TMP/${f}x-$r"
    "$ELDRSIM" run "configs/scale/${f}x.json" --router "$r" "${SHORT[@]}" --out "$out" >/dev/null 2>"$TMP/err"
    check "configs/scale/${f}x.json runs with $r: ${f}x the default's instances and rate, every request finished" \
      "$PY - $f '$TMP/1x/summary.json' '$out/summary.json' <<'PYEOF'
import json, sys
f, one, s = int(sys.argv[1]), json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
for k in ('prefill_instances', 'decode_instances', 'rate_rps', 'requests'):
    assert s[k] == f * one[k], (k, s[k], one[k])
assert s['unfinished'] == 0 and s['config']['cluster'] == f'mi300x-{5 * f}node'
PYEOF
[ \$? -eq 0 ] || { cat '$TMP/err'; false; }"
  done
done

echo "$pass passed, $failures failed"
[ "$failures" -eq 0 ]
