#!/usr/bin/python3
"""The generator's gate values against the real ones of Qwen3-30B-A3B.

The real MGSM data (traces/routing/qwen3_30b_a3b_mgsm_*, provenance in traces/README.md) has, per
(language, layer, expert), how many prompt tokens picked the expert and the summed gate values of
those picks. A cell's mean gate value per pick, over the cells with at least 100 picks, is what
`eldrsim trace stats` measures for the generator's gates (RoutingStats::gate_per_pick_*). This prints
the real percentiles, checks that the real values sum to 1 per token and layer (norm_topk_prob), and,
with the JSON of a trace stats run, the simulated ones beside them. docs/routing-model.md reads it.

Usage: /usr/bin/python3 analysis/gate_values.py [STATS.json]
  where STATS.json comes from
  build/eldrsim trace stats configs/default.json --set workload.kind=language --json STATS.json
"""
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "analysis"))
import eldr_common as ec  # noqa: E402
ROUTING = ROOT / "traces/routing"
MIN_PICKS = 100  # RoutingStats::kMinGateCellPicks


def main(argv=None):
    counts = pd.read_csv(ROUTING / "qwen3_30b_a3b_mgsm_expert_token_counts.csv")
    gates = pd.read_csv(ROUTING / "qwen3_30b_a3b_mgsm_expert_gate_sums.csv")
    experts = [c for c in counts.columns if c.startswith("e")]
    if list(counts[["lang", "layer"]].itertuples(index=False)) != list(gates[["lang", "layer"]].itertuples(index=False)):
        print("eldrsim: error: traces/routing/qwen3_30b_a3b_mgsm_*: counts and gate sums cover different rows", file=sys.stderr)
        sys.exit(2)
    n, g = counts[experts].to_numpy(float), gates[experts].to_numpy(float)
    top_k = 8
    per_token = g.sum(axis=1) / (n.sum(axis=1) / top_k)  # gate mass per token and layer
    keep = n >= MIN_PICKS
    per_pick = g[keep] / n[keep]
    p5, p50, p95 = np.percentile(per_pick, [5, 50, 95])
    print(f"real (MGSM, {counts['lang'].nunique()} languages): gate mass per token and layer "
          f"{per_token.min():.4f}-{per_token.max():.4f}; a cell's gate value per pick "
          f"(cells with >= {MIN_PICKS} picks: {keep.sum()}) P5/P50/P95 {p5:.3f} / {p50:.3f} / {p95:.3f}")
    if len(sys.argv) > 1:
        ec.check_input_file(sys.argv[1])  # a FIFO or /dev/zero would block or never end
        try:
            stats = json.loads(Path(sys.argv[1]).read_text())
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ec.Fatal(f"{sys.argv[1]}: not `eldrsim trace stats --json` output ({e})") from None
        sim = stats.get("gate_per_pick")
        if sim is None:
            print(f"eldrsim: error: {sys.argv[1]}: gate_per_pick: absent (the routing source has no gate values)", file=sys.stderr)
            sys.exit(2)
        print(f"simulated ({stats['model']}, {stats['workload']}): P5/P50/P95 "
              f"{sim['p5']:.3f} / {sim['p50']:.3f} / {sim['p95']:.3f}")


if __name__ == "__main__":
    sys.exit(ec.run_main(main))
