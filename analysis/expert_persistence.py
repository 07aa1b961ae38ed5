#!/usr/bin/python3
"""How often consecutive tokens of one sequence pick the same experts, from real routing in token order.

Reads traces/routing/esft_deepseek_v2_lite (DeepSeek-V2-Lite architecture: 26 MoE layers, 64
experts, top-6; per-token ids in sequence order) and prints, per layer and overall:
  rho      the fraction of a token's top-k experts that the next token of its sequence also picks;
  k/E      the same fraction for two tokens drawn uniformly at random (the random-pair baseline);
  seq      the same fraction for two tokens of one sequence 64 or more positions apart;
and the mean distinct experts of n = 2, 3, 4 consecutive tokens (what a decode step that verifies
n - 1 speculative tokens adds per sequence), next to two models that take p[e] = the sequence's own
frequency of expert e at that layer (as the generator's per-request token law) and rho:
  markov   an expert of the previous token is kept with probability rho, an expert it lacks is picked
           with p(1 - rho) / (1 - p) (stationary): P(e in none of n) = (1 - p)(1 - p(1-rho)/(1-p))^(n-1);
  copy     a token repeats the previous token's whole layer choice with probability c, else draws
           afresh from p; c = (rho - r0) / (1 - r0), r0 = sum_e p[e]^2 / k the overlap of two
           independent draws: P(e in none of n) = (1 - p)(1 - (1 - c) p)^(n-1);
  indep    tokens independent given p: (1 - p)^n.
docs/speculative.md reads it. Usage: /usr/bin/python3 analysis/expert_persistence.py [DIR]
"""
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DOMAINS = ("law", "intent", "summary", "translation")
LAYERS, EXPERTS, TOP_K = 26, 64, 6
FAR = 64  # "far apart" within a sequence


def load(directory, domain):
    ids = np.fromfile(directory / f"esft_{domain}_top6_u8.bin", dtype=np.uint8).reshape(-1, LAYERS, TOP_K)
    lens = np.loadtxt(directory / f"esft_{domain}_seqlens.csv", delimiter=",", skiprows=1, dtype=np.int64)
    masks = np.zeros((ids.shape[0], LAYERS, EXPERTS), dtype=bool)
    t, l = np.meshgrid(np.arange(ids.shape[0]), np.arange(LAYERS), indexing="ij")
    for j in range(TOP_K):
        masks[t, l, ids[:, :, j]] = True
    return [masks[off : off + n] for _, n, off in lens.reshape(-1, 3)]


def overlap(a, b):
    """Per layer: mean fraction of a's top-k that b also picks."""
    return (a & b).sum(axis=2).mean(axis=0) / TOP_K


def main():
    directory = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "traces/routing/esft_deepseek_v2_lite"
    seqs = [s for d in DOMAINS for s in load(directory, d)]
    pairs = np.concatenate([s[:-1] & s[1:] for s in seqs]).sum(axis=2) / TOP_K
    rho = pairs.mean(axis=0)
    far = np.concatenate([s[:-FAR] & s[FAR:] for s in seqs if len(s) > FAR]).sum(axis=2).mean(axis=0) / TOP_K
    print(f"sequences {len(seqs)}, tokens {sum(len(s) for s in seqs)}")
    print("layer  rho    k/E    seq(>=64 apart)")
    for layer in range(LAYERS):
        print(f"{layer:5d}  {rho[layer]:.3f}  {TOP_K / EXPERTS:.3f}  {far[layer]:.3f}")
    print(f"all    {rho.mean():.3f}  {TOP_K / EXPERTS:.3f}  {far.mean():.3f}")

    print("\nmean distinct experts per layer of n consecutive tokens (all layers)")
    print("n  measured  markov  copy    indep")
    for n in (2, 3, 4):
        measured, markov, copy, indep, weight = 0.0, 0.0, 0.0, 0.0, 0
        for s in seqs:
            if len(s) < n:
                continue
            window = s[: len(s) - n + 1].copy()
            for j in range(1, n):
                window |= s[j : len(s) - n + 1 + j]
            w = len(window)
            p = s.mean(axis=0)  # [layer][expert] the sequence's own law
            r0 = (p * p).sum(axis=1) / TOP_K
            c = np.clip((rho - r0) / (1 - r0), 0, 1)[:, None]
            q = np.minimum(1.0, p * (1 - rho[:, None]) / np.maximum(1e-12, 1 - p))
            measured += window.sum(axis=2).mean() * w
            markov += (EXPERTS - ((1 - p) * (1 - q) ** (n - 1)).sum(axis=1)).mean() * w
            copy += (EXPERTS - ((1 - p) * (1 - (1 - c) * p) ** (n - 1)).sum(axis=1)).mean() * w
            indep += (EXPERTS - ((1 - p) ** n).sum(axis=1)).mean() * w
            weight += w
        print(f"{n}  {measured / weight:8.3f}  {markov / weight:6.3f}  {copy / weight:6.3f}  {indep / weight:6.3f}")


if __name__ == "__main__":
    main()
