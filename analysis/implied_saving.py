#!/usr/bin/python3
"""How much shorter a locality router's decode step must be, at equal batch, for the published gain.

From the measured round-robin curves alone (traces/calibration/), no cost model: Little's law turns
each cell's TPOT P50 into the mean decode batch per worker, B = rate / 16 x 512 x TPOT, which gives
round robin's step time as a function of the batch, T(B) (piecewise linear through the five cells,
flat beyond them). Suppose a locality router's step at equal batch is T(B) x (1 - s): its own batch
is then the fixed point B' = rate / 16 x 512 x (1 - s) T(B'), and its TPOT P50 gain over round robin
is 1 - (1 - s) T(B') / T(B). For each cell this prints the s that gives the published ELDR gains over
the best load balancer, 7.0 / 10.0 / 13.9% (docs/design.md section 9). Where T rises steeply with B the
smaller batch amplifies s; where the measured step falls as the batch grows (80-100 req/s for
Qwen3-30B-A3B and Gemma-4-26B-A4B) a smaller batch is slower and s must exceed the gain.
docs/calibration.md section 4 reads it.

Usage: /usr/bin/python3 analysis/implied_saving.py
"""
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import brentq

ROOT = Path(__file__).resolve().parent.parent
DECODE_WORKERS, OUTPUT_TOKENS = 16, 512
GAINS = (0.07, 0.10, 0.139)


def implied_saving(rates, tpot_ms, gain):
    """Per cell, the step saving s at equal batch that gives `gain` (nan where none in [0, 0.9] does)."""
    per_ms = np.asarray(rates) / DECODE_WORKERS * OUTPUT_TOKENS / 1000.0  # B per ms of TPOT
    batch = per_ms * np.asarray(tpot_ms)
    step = lambda b: np.interp(b, batch, tpot_ms)
    out = []
    for c, t, b in zip(per_ms, tpot_ms, batch):
        def gain_at(s):
            b_own = brentq(lambda x: x / c - (1 - s) * step(x), 1e-9, 2 * b)
            return 1 - b_own / c / t
        try:
            out.append(brentq(lambda s: gain_at(s) - gain, 0.0, 0.9))
        except ValueError:
            out.append(float("nan"))
    return out


def main():
    print("s (%) for a gain of " + " / ".join(f"{100 * g:.1f}%" for g in GAINS) + " per cell (rate: batch B, s)")
    for kind in ("task", "language"):
        meas = pd.read_csv(ROOT / f"traces/calibration/rr_{kind}_tpot.csv")
        for model, m in meas.groupby("model"):
            m = m.sort_values("rate_rps")
            rates, t = m.rate_rps.to_numpy(float), m.tpot_p50_ms.to_numpy(float)
            per_gain = [implied_saving(rates, t, g) for g in GAINS]
            cells = [f"{r:g}: B {r / DECODE_WORKERS * OUTPUT_TOKENS * ti / 1000:.0f}, "
                     + "/".join(f"{100 * s[i]:.1f}" for s in per_gain) for i, (r, ti) in enumerate(zip(rates, t))]
            print(f"{model:16s} {kind:8s} " + " | ".join(cells))


if __name__ == "__main__":
    main()
