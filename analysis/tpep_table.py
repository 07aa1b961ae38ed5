#!/usr/bin/env python3
"""Issue 8 table: TPOT P50/P99 per router and expert placement at each rate, and the mean per-rank
load imbalance and all-to-all time, from a finished `eldrsim sweep configs/paper/tpep.json --out OUT`.

usage: analysis/tpep_table.py OUT/tpep
"""
import json
import pathlib
import sys

ROUTERS = ["round_robin", "jsq", "domain", "eldr"]
PLACEMENTS = ["contiguous", "cluster_balanced"]


def main(root):
    rows = {}
    for summary in pathlib.Path(root).glob("*/summary.json"):
        s = json.loads(summary.read_text())
        ep = s.get("expert_parallel", {})
        key = (s["router"], ep.get("placement", "?"), s["rate_rps"])
        rows[key] = (s["tpot_ms"]["p50"], s["tpot_ms"]["p99"], ep.get("rank_imbalance_mean", float("nan")),
                     ep.get("all_to_all_ms_mean", float("nan")), s["ttft_ms"]["p50"], s["unfinished"])
    rates = sorted({k[2] for k in rows})
    print("TPOT P50 / P99 (ms); per-rank imbalance (max/mean of the ranks' MoE time, mean over steps)\n")
    print("| router | placement | " + " | ".join(f"{r:g} req/s" for r in rates) + " |")
    print("| --- | --- | " + " | ".join("---" for _ in rates) + " |")
    for router in ROUTERS:
        for placement in PLACEMENTS:
            cells = []
            for r in rates:
                v = rows.get((router, placement, r))
                cells.append("-" if v is None else f"{v[0]:.2f} / {v[1]:.2f} ({v[2]:.3f})")
            print(f"| {router} | {placement} | " + " | ".join(cells) + " |")
    print("\nMean per-rank imbalance over the rates (and all-to-all ms per step):\n")
    print("| router | contiguous | cluster_balanced |")
    print("| --- | --- | --- |")
    for router in ROUTERS:
        cells = []
        for placement in PLACEMENTS:
            vs = [rows[(router, placement, r)] for r in rates if (router, placement, r) in rows]
            if vs:
                cells.append(f"{sum(v[2] for v in vs) / len(vs):.4f} ({sum(v[3] for v in vs) / len(vs):.3f} ms)")
            else:
                cells.append("-")
        print(f"| {router} | " + " | ".join(cells) + " |")
    unfinished = sum(v[5] for v in rows.values())
    print(f"\n{len(rows)} points; unfinished requests in all: {unfinished}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/tmp/tpep/tpep")
