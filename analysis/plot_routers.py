#!/usr/bin/python3
"""Plot one experiment's routers side by side.

Usage: /usr/bin/python3 analysis/plot_routers.py RESULTS_DIR

RESULTS_DIR holds one subdirectory per router (as written by `eldrsim run --out RESULTS_DIR/<router>`),
each with summary.json and requests.csv. Writes into RESULTS_DIR:

  tpot_cdf.png / .svg           empirical CDF of the measured requests' TPOT, one line per router
  latency_by_router.png / .svg  bars of TPOT P50 and P99 and of TTFT P50 per router

Only measured requests (requests.csv column measured == 1) count, as in summary.json. Percentiles use
numpy's default (linear interpolation between order statistics), the same definition as the simulator
(sim/common/percentiles.cpp), so the bars match summary.json (a mismatch is reported as a warning).
Silent on success (-v lists the files written); exits 2 with a one-line message on bad input.
"""
import argparse
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

# Routers in this order when present; others follow alphabetically.
ROUTER_ORDER = ["random", "round_robin", "jsq", "p2c", "oracle", "domain_oracle", "eldr"]


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import eldr_common as ec  # noqa: E402

InputProblem = ec.Fatal


def load_router(path):
    summary_path = os.path.join(path, "summary.json")
    requests_path = os.path.join(path, "requests.csv")
    for p in (summary_path, requests_path):
        ec.check_input_file(p)  # a FIFO or a device would block the reader
    try:
        with open(summary_path) as f:
            summary = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise InputProblem(f"{summary_path}: not readable JSON ({e})")
    try:
        df = pd.read_csv(requests_path)
    except Exception as e:  # pandas raises several types for bad CSV
        raise InputProblem(f"{requests_path}: not a readable CSV ({e})")
    for col in ("measured", "tpot_ms", "ttft_ms"):
        if col not in df.columns:
            raise InputProblem(f"{requests_path}: column '{col}' missing")
    m = df[df["measured"] == 1]
    tpot = pd.to_numeric(m["tpot_ms"], errors="coerce").dropna().to_numpy(float)
    ttft = pd.to_numeric(m["ttft_ms"], errors="coerce").dropna().to_numpy(float)
    if tpot.size == 0:
        raise InputProblem(f"{requests_path}: no measured requests with a TPOT")
    name = summary.get("router") or os.path.basename(os.path.normpath(path))
    return {"name": name, "dir": os.path.basename(os.path.normpath(path)), "summary": summary,
            "tpot": np.sort(tpot), "ttft": np.sort(ttft)}


def find_routers(results_dir):
    if not os.path.isdir(results_dir):
        raise InputProblem(f"not a directory: {results_dir}")
    subdirs = sorted(d for d in os.listdir(results_dir) if os.path.isdir(os.path.join(results_dir, d)))
    # A subdirectory counts as a router run if it has either result file; then it must have both.
    runs = [d for d in subdirs
            if any(os.path.exists(os.path.join(results_dir, d, f)) for f in ("summary.json", "requests.csv"))]
    if not runs:
        raise InputProblem(f"{results_dir}: no router subdirectories with summary.json and requests.csv")
    routers = [load_router(os.path.join(results_dir, d)) for d in runs]

    def key(r):
        n = r["name"]
        return (ROUTER_ORDER.index(n) if n in ROUTER_ORDER else len(ROUTER_ORDER), n, r["dir"])
    routers.sort(key=key)
    names = [r["name"] for r in routers]
    if len(set(names)) != len(names):  # same router twice (e.g. two tau values): label by directory
        for r in routers:
            r["name"] = r["dir"]
    return routers


def check_against_summary(r):
    """Warn (stderr) if our percentiles disagree with the simulator's summary.json."""
    s = r["summary"]
    for metric, values in (("tpot_ms", r["tpot"]), ("ttft_ms", r["ttft"])):
        ref = s.get(metric, {})
        for q in (50, 99):
            key = f"p{q}"
            if key in ref and values.size:
                ours = float(np.percentile(values, q))
                if abs(ours - ref[key]) > 1e-6 * max(1.0, abs(ref[key])):
                    print(f"plot_routers: warning: {r['dir']}: {metric} {key} from requests.csv {ours:.4f} "
                          f"!= summary.json {ref[key]:.4f}", file=sys.stderr)


def subtitle(routers):
    s = routers[0]["summary"]
    parts = []
    for key, fmt in (("model", "{}"), ("rate_rps", "{:g} req/s"), ("seed", "seed {}")):
        vals = {json.dumps(r["summary"].get(key)) for r in routers}
        if len(vals) == 1 and s.get(key) is not None:
            parts.append(fmt.format(s[key]))
    return ", ".join(parts)


def save(fig, results_dir, stem):
    paths = []
    for ext in ("png", "svg"):
        p = os.path.join(results_dir, f"{stem}.{ext}")
        fig.savefig(p, dpi=150 if ext == "png" else None, bbox_inches="tight")
        paths.append(p)
    plt.close(fig)
    return paths


def plot_cdf(routers, results_dir):
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for r in routers:
        x = r["tpot"]
        y = np.arange(1, x.size + 1) / x.size
        p50, p99 = np.percentile(x, [50, 99])
        ax.step(x, y, where="post", lw=1.6,
                label=f"{r['name']} (P50 {p50:.2f}, P99 {p99:.2f} ms, n={x.size})")
    # A few requests that ran in a nearly empty cluster (start of the measured window) stretch the left
    # tail; start the axis at the smallest per-router P0.5 so the body of the distributions stays readable.
    lo = min(np.percentile(r["tpot"], 0.5) for r in routers)
    hi = max(r["tpot"][-1] for r in routers)
    clipped = any(r["tpot"][0] < lo for r in routers)
    pad = 0.02 * max(hi - lo, 1e-9)
    ax.set_xlim(lo - pad, hi + pad)
    ax.set_xlabel("TPOT (ms)" + ("  [axis starts at the lowest router P0.5]" if clipped else ""))
    ax.set_ylabel("fraction of measured requests")
    ax.set_ylim(0, 1.005)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    sub = subtitle(routers)
    ax.set_title("TPOT CDF by decode router" + (f"\n{sub}" if sub else ""), fontsize=10)
    return save(fig, results_dir, "tpot_cdf")


def label_bars(ax, bars):
    for b in bars:
        h = b.get_height()
        ax.annotate(f"{h:.1f}", (b.get_x() + b.get_width() / 2, h), ha="center", va="bottom",
                    fontsize=7, xytext=(0, 1), textcoords="offset points")


def plot_bars(routers, results_dir):
    names = [r["name"] for r in routers]
    x = np.arange(len(routers))
    tpot50 = [np.percentile(r["tpot"], 50) for r in routers]
    tpot99 = [np.percentile(r["tpot"], 99) for r in routers]
    ttft50 = [np.percentile(r["ttft"], 50) if r["ttft"].size else np.nan for r in routers]
    width = 0.38
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(max(8, 1.6 * len(routers) + 4), 4.5),
                                 gridspec_kw={"width_ratios": [2, 1.2]})
    label_bars(a1, a1.bar(x - width / 2, tpot50, width, label="TPOT P50", color="tab:blue"))
    label_bars(a1, a1.bar(x + width / 2, tpot99, width, label="TPOT P99", color="tab:orange"))
    a1.set_ylabel("TPOT (ms)")
    a1.set_title("TPOT", fontsize=10)
    a1.legend(fontsize=8, ncol=2, loc="upper left")
    label_bars(a2, a2.bar(x, ttft50, 0.6, label="TTFT P50", color="tab:green"))
    a2.set_ylabel("TTFT (ms)")
    a2.set_title("TTFT P50", fontsize=10)
    for a in (a1, a2):
        a.set_xticks(x)
        a.set_xticklabels(names, rotation=20, ha="right")
        a.grid(True, axis="y", alpha=0.3)
        a.margins(y=0.22)
    sub = subtitle(routers)
    fig.suptitle("Latency by decode router" + (f" ({sub})" if sub else ""), fontsize=11)
    fig.tight_layout()
    return save(fig, results_dir, "latency_by_router")


def main(argv=None):
    ap = ec.ArgumentParser(prog="plot_routers.py", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results_dir", metavar="RESULTS_DIR",
                    help="directory with one subdirectory per router (summary.json + requests.csv)")
    ap.add_argument("-v", "--verbose", action="store_true", help="list the files written")
    args = ap.parse_args(argv)
    routers = find_routers(args.results_dir)
    for r in routers:
        check_against_summary(r)
    written = plot_cdf(routers, args.results_dir) + plot_bars(routers, args.results_dir)
    if args.verbose:
        for p in written:
            print(p)
    return 0


if __name__ == "__main__":
    sys.exit(ec.run_main(main))
