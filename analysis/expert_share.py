#!/usr/bin/python3
"""How much of a decode step the round-robin curve lets depend on the experts, per model and workload.

Fits the measured round-robin TPOT P50 (traces/calibration/) at the five rates as
    step = C + c x B + k x D
with B the mean decode batch and D the mean distinct experts per layer that the simulator gives at
those rates (the round-robin rows of `eldrsim validate`'s results/validate/combined.csv), for a range
of fixed per-sequence costs c >= 0: a cost that grows with the batch but not with its experts (a
slower attention path, per-request host work). For each c it prints the fit's RMS error, the experts'
share k x D / step at 40 req/s, and the step saved by the domain oracle's batches at the same rate,
k x (D_rr - D_oracle) / step, before the feedback through the batch size (a faster step empties the
workers faster, which lowers B and D again). docs/calibration.md section 4 reads it.

Usage: /usr/bin/python3 analysis/expert_share.py [results/validate/combined.csv]
"""
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "analysis"))
import eldr_common as ec  # noqa: E402


def main(argv=None):
    combined = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "results/validate/combined.csv"
    ec.check_input_file(str(combined), "", "run `build/eldrsim validate` first")
    sim = pd.read_csv(combined)
    if not {"sweep", "model", "workload", "router", "rate_rps", "decode_batch_mean", "distinct_experts_mean"} <= set(sim.columns):
        print(f"eldrsim: error: {combined}: not a validate combined.csv (columns missing)", file=sys.stderr)
        sys.exit(2)
    sim = sim[sim.sweep == "main"]
    meas = pd.concat(
        [pd.read_csv(ROOT / f"traces/calibration/rr_{kind}_tpot.csv").assign(workload=kind) for kind in ("task", "language")]
    )
    print("model workload   c(ms/seq)  rms(ms)  expert share @40  oracle saving @40")
    for (model, kind), m in meas.groupby(["model", "workload"]):
        s = sim[(sim.model == model) & (sim.workload == kind)]
        rr = s[s.router == "round_robin"].set_index("rate_rps").loc[m.rate_rps]
        dom = s[s.router == "domain"].set_index("rate_rps")
        if len(rr) != len(m) or 40 not in dom.index:
            continue
        T, B, D = m.tpot_p50_ms.to_numpy(), rr.decode_batch_mean.to_numpy(), rr.distinct_experts_mean.to_numpy()
        i40 = list(m.rate_rps).index(40)
        dD = D[i40] - dom.loc[40, "distinct_experts_mean"]
        for c in (0.0, 0.02, 0.05, 0.1):
            A = np.c_[np.ones_like(D), D]
            (C, k), *_ = np.linalg.lstsq(A, T - c * B, rcond=None)
            rms = np.sqrt(np.mean((A @ [C, k] + c * B - T) ** 2))
            print(f"{model:16s} {kind:9s} {c:8.2f} {rms:8.2f} {k * D[i40] / T[i40]:14.2f} {k * dD / T[i40]:17.3f}")


if __name__ == "__main__":
    sys.exit(ec.run_main(main))
