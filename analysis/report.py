#!/usr/bin/python3
"""A sweep's report: plots and tables from `eldrsim sweep` results, as Markdown and HTML.

Usage: /usr/bin/python3 analysis/report.py RESULTS_DIR [--out DIR]     (or `eldrsim report RESULTS_DIR`)

RESULTS_DIR is a sweep's output (combined.csv, <sweep>/<point>/requests.csv). Writes into DIR
(default RESULTS_DIR/report): report.md, report.html and the figures (PNG and SVG):

  tpot_cdf_<rate>.png   main study: TPOT CDF per router, one panel per model and workload, at the
                        rate nearest 60 req/s (measured requests, as summary.json)
  tpot_vs_rate.png      main study: TPOT P50 (solid) and P99 (dashed) against the arrival rate, one
                        line per router, one panel per model and workload
  tau.png               ELDR's locality band: TPOT P50/P99 against tau
  kmeans.png            balanced against vanilla K-means: TPOT P50/P99
  signature.png         signature variants: TPOT P50/P99
  scaling.png           decode pool scaling: TPOT P50/P99 against the decode count (= ELDR's K)
  tpot_vs_<KEY>.png     any sweep whose points differ in a numeric grid key without a column of its own
                        above (say composed.scorers.expert-locality-scorer.weight): TPOT P50 and P99
                        against it, one line per value of the other keys that vary, with a table and
                        where P50 stops improving and P99 regresses

Sections appear for the sweeps present (by the sweep names of configs/paper/: main, tau, kmeans,
signature, scaling); every other sweep gets a table. With several seeds (combined_seeds.csv), the
tables give the mean and the 95% interval. Exits 2 with a one-line message on bad input.
"""
import argparse
import html
import math
import os
import re
import sys
import tempfile

# First: its signal handlers then cover the second that matplotlib and pandas take to import.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import eldr_common as ec  # noqa: E402

ec.quiet_matplotlib_cache()
import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

ROUTER_ORDER = ["random", "round_robin", "jsq", "p2c", "domain", "eldr"]
COLORS = {"random": "tab:gray", "round_robin": "tab:blue", "jsq": "tab:orange", "p2c": "tab:purple",
          "domain": "tab:green", "eldr": "tab:red"}
MODEL_ORDER = ["qwen3-30b-a3b", "gpt-oss-120b", "gemma-4-26b-a4b"]
METRICS = [("tpot_p50_ms", "TPOT P50 (ms)"), ("tpot_p95_ms", "TPOT P95 (ms)"), ("tpot_p99_ms", "TPOT P99 (ms)"),
           ("ttft_p50_ms", "TTFT P50 (ms)"), ("throughput_tok_s", "throughput (tok/s)"),
           ("distinct_experts_mean", "distinct experts/layer")]


InputProblem = ec.Fatal
# combined.csv: the point's keys, then its metrics from this column on (sim/app/sweep_command.cpp).
FIRST_METRIC = "requests"
NUMERIC_KEYS = ["rate_rps", "prefill", "decode", "seed"]  # always written
OPTIONAL_NUMBERS = ["tau"]  # empty where not set
# The point keys with a column of their own in combined.csv; any other grid key follows them (its dotted name).
STANDARD_KEYS = ["sweep", "point", "config", "model", "workload", "router", "rate_rps", "prefill", "decode", "tau",
                 "kmeans", "variant", "seed"]
# A number as the sweep writes one (JSON): "1.5e3" is, "inf", "nan", "1_000" and " 2" are not.
NUMBER = re.compile(r"-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")
P50_WITHIN = 0.01  # P50 stops improving at the first value within 1% of the best P50
P99_RISE = 0.05    # P99 regresses at the first value more than 5% above its lowest at smaller values


def ordered(values, order):
    values = list(dict.fromkeys(values))
    return sorted(values, key=lambda v: (order.index(v) if v in order else len(order), str(v)))


def read_table(path, need, seeds_file=False):
    """A sweep's CSV read as `table` and `compare` read it: every row has every column (a cut row or file is
    an error), numbers parse; -> DataFrame with the numeric columns as floats, the others as text."""
    header, rows = ec.read_csv_rows(path, "", "not the results of `eldrsim sweep`")
    missing = [c for c in need if c not in header]
    if missing:
        raise InputProblem(f"{path}: header: columns missing: {', '.join(sorted(missing))}")
    if not rows:
        raise InputProblem(f"{path}: no points")
    if FIRST_METRIC in header:
        metrics = header[header.index(FIRST_METRIC):]
    else:  # combined_seeds.csv: "seeds", then each metric's mean and interval
        metrics = header[header.index("seeds"):] if "seeds" in header else []
    required = [c for c in NUMERIC_KEYS if c in header and not (seeds_file and c == "seed")]
    optional = [c for c in OPTIONAL_NUMBERS + metrics if c in header and c not in required]
    records = []
    for line, r in rows:
        for c in required:
            r[c] = ec.number_cell(path, line, c, r[c])
        for c in optional:
            r[c] = float("nan") if r[c] == "" else ec.number_cell(path, line, c, r[c])
        records.append(r)
    return pd.DataFrame.from_records(records, columns=header), header


def load(results):
    path = os.path.join(results, "combined.csv")
    need = ["sweep", "point", "model", "workload", "router", "rate_rps", "decode", "tau", "kmeans", "variant", "seed",
            "tpot_p50_ms", "tpot_p99_ms"]
    df, header = read_table(path, need)
    if FIRST_METRIC not in header:
        raise InputProblem(f"{path}: header: columns missing: {FIRST_METRIC}")
    df.attrs["keys"] = header[:header.index(FIRST_METRIC)]
    check_points(results, df, path)
    seeds = None
    spath = os.path.join(results, "combined_seeds.csv")
    if os.path.lexists(spath):
        seeds, _ = read_table(spath, ["sweep", "point", "seeds"], seeds_file=True)
    return df, seeds


def check_points(results, df, path):
    """Every point with results in the sweep's directories is a row of combined.csv (a file cut at a line's
    end loses points silently otherwise), and no point is there twice."""
    dup = df["point"][df.duplicated(["sweep", "point"], keep=False)]
    if len(dup):
        raise InputProblem(f"{path}: point: {dup.iloc[0]} appears twice (rerun `eldrsim sweep` with the same --out "
                           f"to merge the results again)")
    have = set(zip(df["sweep"], df["point"]))
    lost = []
    for sweep in dict.fromkeys(df["sweep"]):
        d = os.path.join(results, sweep)
        if not os.path.isdir(d):
            continue
        for point in sorted(os.listdir(d)):
            done = all(os.path.isfile(os.path.join(d, point, f)) for f in ("summary.json", "point.json"))
            if done and (sweep, point) not in have:
                lost.append(f"{sweep}/{point}")
    if lost:
        raise InputProblem(f"{path}: rows: {ec.count(len(lost), 'point')} with results missing from it (first: {lost[0]}): "
                           f"the file is cut or stale; rerun `eldrsim sweep` with the same --out to merge it again")


def tpot_of(results, sweep, point):
    """Measured requests' TPOT of one point (as summary.json counts them)."""
    p = os.path.join(results, sweep, point, "requests.csv")
    if not os.path.lexists(p):
        raise InputProblem(f"{p}: No such file or directory (the point's run is incomplete: rerun `eldrsim sweep` "
                           f"with the same --out)")
    ec.check_input_file(p)
    r = pd.read_csv(p, usecols=["measured", "tpot_ms"])
    return np.sort(pd.to_numeric(r[r["measured"] == 1]["tpot_ms"], errors="coerce").dropna().to_numpy(float))


def save(fig, out, stem):
    for ext in ("png", "svg"):
        fig.savefig(os.path.join(out, f"{stem}.{ext}"), dpi=130 if ext == "png" else None, bbox_inches="tight")
    plt.close(fig)
    return f"{stem}.png"


def panels(df):
    """Panel rows: the workload and every other varying key (the "facet" column, see with_facets)."""
    models = ordered(df["model"], MODEL_ORDER)
    workloads = ordered(df["facet"], ["task", "language"])
    return models, workloads


def varying_keys(d):
    """The point keys of combined.csv (its columns before the metrics) whose value differs between rows,
    but for the sweep, the point's name and the seed (which tables average and say so). An empty cell is no
    value (ELDR's tau in another router's run): a key varies when its values do."""
    keys = d.attrs.get("keys") or [c for c in d.columns if c in ("config", "model", "workload", "router", "rate_rps",
                                                               "prefill", "decode", "tau", "kmeans", "variant")]
    given = {k: d[k].map(label_of) for k in keys if k not in ("sweep", "point", "seed")}
    return [k for k, v in given.items() if v[v != ""].nunique() > 1]


def label_of(v):
    """A key's value as text, exact (two decimals would make 0.125 and 0.12 one row); empty for none."""
    if isinstance(v, (float, np.floating)):
        return "" if np.isnan(v) else str(int(v)) if float(v).is_integer() else repr(float(v))
    return str(v)


def with_facets(d, shown):
    """`d` with a "facet" column: the workload, and each varying key not in `shown` as KEY=VALUE, so that
    points differing in such a key get panels (and table rows) of their own instead of being merged."""
    d = d.copy()
    d.attrs = dict(d.attrs)
    extra = [k for k in varying_keys(d) if k not in shown and k != "workload"]
    d["facet"] = d["workload"].astype(str)
    for k in extra:
        d["facet"] = d["facet"] + ", " + k + "=" + d[k].map(label_of)
        d[k] = d[k].map(label_of)  # a key with empty cells (NaN) would drop out of groupby and pivots
    d.attrs["extra"] = extra
    return d


def seeds_note(d, by):
    """'' when each group of `by` is one run, else the sentence that says its values are means."""
    n = d.groupby(by, dropna=False)["seed"].nunique().max()
    dup = d[d.duplicated(by + ["seed"], keep=False)]
    if len(dup):
        raise InputProblem(f"combined.csv: points {', '.join(dup['point'].head(2))} differ in no key "
                           f"({', '.join(by)}, seed): rerun `eldrsim sweep` with the same --out")
    return f"Mean of {n} seeds." if n > 1 else ""


def first_seed(df):
    """One row per point without its seed (the lowest seed) for plots that need one run."""
    return df.sort_values("seed").drop_duplicates(
        [c for c in df.columns if c not in ("seed", "point") and not c.endswith(("_ms", "_s", "_mean")) and c not in
         ("requests", "unfinished")])


def fig_cdf(results, main, out):
    rates = sorted(main["rate_rps"].unique())
    rate = min(rates, key=lambda r: abs(r - 60))
    sub = main[main["rate_rps"] == rate]
    seed = sub["seed"].min()
    sub = sub[sub["seed"] == seed]  # one run per curve: the lowest seed's (the title says which)
    seeds_note(sub, ["model", "facet", "router"])
    models, workloads = panels(sub)
    fig, axes = plt.subplots(len(workloads), len(models), figsize=(4.6 * len(models), 3.4 * len(workloads)),
                             squeeze=False)
    for i, w in enumerate(workloads):
        for j, m in enumerate(models):
            ax = axes[i][j]
            cell = sub[(sub["model"] == m) & (sub["facet"] == w)]
            lo = []
            for router in ordered(cell["router"], ROUTER_ORDER):
                row = cell[cell["router"] == router].iloc[0]
                x = tpot_of(results, row["sweep"], row["point"])
                if x.size == 0:
                    continue
                lo.append(np.percentile(x, 0.5))
                ax.step(x, np.arange(1, x.size + 1) / x.size, where="post", lw=1.4, color=COLORS.get(router),
                        label=router)
            if lo:
                ax.set_xlim(left=min(lo))
            ax.set_title(f"{m}, {w}", fontsize=9)
            ax.grid(True, alpha=0.3)
            ax.set_xlabel("TPOT (ms)", fontsize=8)
            if j == 0:
                ax.set_ylabel("fraction of requests", fontsize=8)
    axes[0][0].legend(fontsize=7, loc="upper left")
    several = main["seed"].nunique() > 1
    fig.suptitle(f"TPOT CDF per decode router at {rate:g} req/s" + (f", seed {seed:g}" if several else ""), fontsize=11)
    fig.tight_layout()
    return save(fig, out, f"tpot_cdf_{rate:g}"), rate


def fig_vs_rate(main, out):
    models, workloads = panels(main)
    agg = main.groupby(["model", "facet", "router", "rate_rps"], as_index=False)[["tpot_p50_ms", "tpot_p99_ms"]].mean()
    fig, axes = plt.subplots(len(workloads), len(models), figsize=(4.6 * len(models), 3.4 * len(workloads)),
                             squeeze=False)
    for i, w in enumerate(workloads):
        for j, m in enumerate(models):
            ax = axes[i][j]
            cell = agg[(agg["model"] == m) & (agg["facet"] == w)]
            for router in ordered(cell["router"], ROUTER_ORDER):
                r = cell[cell["router"] == router].sort_values("rate_rps")
                ax.plot(r["rate_rps"], r["tpot_p50_ms"], "-o", ms=3, color=COLORS.get(router), label=router)
                ax.plot(r["rate_rps"], r["tpot_p99_ms"], "--", lw=1, color=COLORS.get(router))
            ax.set_title(f"{m}, {w}", fontsize=9)
            ax.set_xlabel("arrival rate (req/s)", fontsize=8)
            if j == 0:
                ax.set_ylabel("TPOT (ms): P50 solid, P99 dashed", fontsize=8)
            ax.grid(True, alpha=0.3)
    axes[0][0].legend(fontsize=7, loc="upper left")
    n = main.groupby(["model", "facet", "router", "rate_rps"])["seed"].nunique().max()
    fig.suptitle("TPOT P50 and P99 against load" + (f" (mean of {n} seeds)" if n > 1 else ""), fontsize=11)
    fig.tight_layout()
    return save(fig, out, "tpot_vs_rate")


def fig_param(df, column, label, out, stem, title, categorical=False):
    """TPOT P50 (solid) / P99 (dashed) against one parameter, one line per model and workload (or router)."""
    by = "router" if df["router"].nunique() > 1 else None
    groups = ["model", "facet"] + ([by] if by else [])
    agg = df.groupby(groups + [column], as_index=False)[["tpot_p50_ms", "tpot_p99_ms"]].mean()
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    keys = agg[groups].drop_duplicates().itertuples(index=False)
    cats = list(dict.fromkeys(df[column])) if categorical else None
    for n, key in enumerate(keys):
        sel = np.logical_and.reduce([agg[g] == v for g, v in zip(groups, key)])
        r = agg[sel]
        xs = [cats.index(v) for v in r[column]] if categorical else r[column]
        name = ", ".join(str(v) for v in key)
        color = COLORS.get(key[-1]) if by else f"C{n % 10}"
        ax.plot(xs, r["tpot_p50_ms"], "-o", ms=3, color=color, label=name)
        ax.plot(xs, r["tpot_p99_ms"], "--", lw=1, color=color)
    if categorical:
        ax.set_xticks(range(len(cats)))
        ax.set_xticklabels(cats, rotation=15)
    ax.set_xlabel(label)
    ax.set_ylabel("TPOT (ms): P50 solid, P99 dashed")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=6.5, loc="center left", bbox_to_anchor=(1.01, 0.5))
    n = df.groupby(groups + [column])["seed"].nunique().max()
    ax.set_title(title + (f" (mean of {n} seeds)" if n > 1 else ""), fontsize=10)
    return save(fig, out, stem)


def numeric_keys(d):
    """The grid keys without a standard column whose values in `d` differ and are all numbers: each gets
    TPOT plotted against it (numeric_section). Text, a JSON object or an empty cell keeps the key a facet."""
    out = []
    for k in d.attrs.get("keys", []):
        if k in STANDARD_KEYS:
            continue
        cells = d[k].astype(str)
        if cells.nunique() > 1 and all(NUMBER.fullmatch(c) and math.isfinite(float(c)) for c in cells):
            out.append(k)
    return out


def knees(xs, p50, p99):
    """(the x where P50 stops improving, the x where P99 regresses or None) by the rules P50_WITHIN and
    P99_RISE, over the points with a value; xs ascending."""
    best = min(v for v in p50 if not np.isnan(v))
    stop = next(x for x, v in zip(xs, p50) if v <= best * (1 + P50_WITHIN))
    low = math.inf
    for x, v in zip(xs, p99):
        if np.isnan(v):
            continue
        if v > low * (1 + P99_RISE):
            return stop, x
        low = min(low, v)
    return stop, None


def knee_sentence(key, stop, regress, last):
    s = f"P50 stops improving at {key} = {label_of(stop)}"
    if regress is None:
        return s + f" and P99 does not regress up to {key} = {label_of(last)}, the largest value swept."
    if regress > stop:
        return s + (f" and P99 regresses from {key} = {label_of(regress)}: stay below {label_of(regress)}; "
                    f"{label_of(stop)} already has the best P50.")
    return s + (f" but P99 regresses from {key} = {label_of(regress)}, before that: from {label_of(regress)} on, "
                f"P50's gain costs tail latency.")


def numeric_section(rep, d, key, out, stems):
    """TPOT P50 and P99 against the numeric grid key `key` (two panels), one line per value of the other
    keys that vary (seeds averaged), a table of the values and, per line, where P50 stops improving and
    where P99 regresses."""
    d = d.copy()
    seen = {}
    for t in dict.fromkeys(d[key].astype(str)):
        if float(t) in seen:  # the grid [0, 0.0]: two sets of points, one x
            raise InputProblem(f"combined.csv: {key}: {seen[float(t)]} and {t} are the same number: give each "
                               f"value once in the sweep's grid")
        seen[float(t)] = t
    d[key] = d[key].astype(str).map(float)
    lines = [k for k in varying_keys(d) if k != key]
    for k in lines:
        d[k] = d[k].map(label_of)  # an empty cell (NaN) would drop out of groupby
    note = seeds_note(d, lines + [key])
    agg = d.groupby(lines + [key], dropna=False, sort=False, as_index=False)[["tpot_p50_ms", "tpot_p99_ms"]].mean()
    groups = list(dict.fromkeys(agg[lines].itertuples(index=False, name=None))) if lines else [()]
    base = stem = "tpot_vs_" + re.sub(r"[^A-Za-z0-9._-]", "_", key)[:80]
    n = 2
    while stem in stems:  # two sweeps varying the same key, or two keys alike once cleaned
        stem, n = f"{base}_{n}", n + 1
    stems.add(stem)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    rows, sentences = [], []
    for i, g in enumerate(groups):
        sel = np.logical_and.reduce([agg[k] == v for k, v in zip(lines, g)]) if lines else np.full(len(agg), True)
        r = agg[sel].sort_values(key)
        name = ", ".join(f"{k}={v}" for k, v in zip(lines, g)) or "all points"
        for ax, col in zip(axes, ("tpot_p50_ms", "tpot_p99_ms")):
            ax.plot(r[key], r[col], "-o", ms=4, color=f"C{i % 10}", label=name)
        for x, a, b in zip(r[key], r["tpot_p50_ms"], r["tpot_p99_ms"]):
            rows.append(g + (label_of(x), a, b))
        if r["tpot_p50_ms"].notna().any():
            stop, regress = knees(list(r[key]), list(r["tpot_p50_ms"]), list(r["tpot_p99_ms"]))
            sentences.append((f"{name}: " if lines else "") + knee_sentence(key, stop, regress, r[key].max()))
        else:
            sentences.append((f"{name}: " if lines else "") + "no TPOT values in combined.csv.")
    for ax, label in zip(axes, ("TPOT P50 (ms)", "TPOT P99 (ms)")):
        ax.set_xlabel(key)
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
    if lines:
        axes[1].legend(fontsize=6.5, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.suptitle(f"TPOT P50 and P99 against {key}" + (f" ({note[:-1].lower()})" if note else ""), fontsize=11)
    fig.tight_layout()
    rep.heading(f"TPOT against {key} (sweep {d['sweep'].iloc[0]})")
    rep.text(f"P50 stops improving at the smallest {key} whose P50 is within {P50_WITHIN:.0%} of the line's best "
             f"(lowest) P50; P99 regresses at the first {key} whose P99 is more than {P99_RISE:.0%} above the lowest "
             f"P99 at smaller values." + (" Each point is the mean over its seeds." if note else ""))
    rep.image(save(fig, out, stem), " ".join(f"TPOT P50 and P99 against {key}".replace("]", ")").split()))
    p = pd.DataFrame(rows, columns=lines + [key, "TPOT P50 (ms)", "TPOT P99 (ms)"]).set_index(lines + [key])
    rep.table(f"TPOT P50 and P99 (ms) against {key}", p, note)
    for s in sentences:
        rep.text(s)


def numeric_sections(rep, d, out, stems):
    for key in numeric_keys(d):
        numeric_section(rep, d, key, out, stems)


def fmt(v):
    if isinstance(v, (float, np.floating)):
        return "" if np.isnan(v) else f"{v:.2f}"
    return str(v)


def table(df, index, columns, value, seeds=None):
    """A pivot with one value per cell, and the sentence that says what a cell is: a point's value, or the
    mean over its seeds (with combined_seeds.csv, 'mean [lo, hi]'). The varying keys of `df` not shown
    (with_facets) join the index, so that points differing in them are never merged."""
    index = index + [k for k in df.attrs.get("extra", []) if k not in index and k != columns]
    note = seeds_note(df, index + [columns])
    if note and seeds is not None and f"{value}_mean" in seeds.columns:
        s = seeds.copy()
        for k in df.attrs.get("extra", []):
            s[k] = s[k].map(label_of)
        if s.duplicated(index + [columns]).any():
            raise InputProblem(f"combined_seeds.csv: two rows share {', '.join(index + [columns])}: rerun `eldrsim "
                               f"sweep` with the same --out")
        s["cell"] = [f"{m:.2f} [{lo:.2f}, {hi:.2f}]" if n > 1 else f"{m:.2f}"
                     for m, lo, hi, n in zip(s[f"{value}_mean"], s[f"{value}_ci95_lo"], s[f"{value}_ci95_hi"],
                                             s["seeds"])]
        p = s.pivot_table(index=index, columns=columns, values="cell", aggfunc="first")
        note = note[:-1] + " and its 95% interval [lo, hi]."
    else:
        p = df.pivot_table(index=index, columns=columns, values=value, aggfunc="mean")
    return sort_table(p, columns), note


def sort_table(p, columns):
    """Routers as columns in their usual order; rows by model, workload, then value."""
    if columns == "router":
        p = p[[c for c in ordered(p.columns, ROUTER_ORDER)]]
    orders = {"model": MODEL_ORDER, "workload": ["task", "language"], "router": ROUTER_ORDER}

    def rank(name, v):
        o = orders.get(name)
        return (o.index(v) if o and v in o else len(o or []), v)
    keys = sorted(p.index, key=lambda k: tuple(rank(n, v) for n, v in zip(p.index.names, k if isinstance(k, tuple) else (k,))))
    return p.loc[keys]


def md_cell(v):
    """A cell on one line of a Markdown table: a label's newline or bar would break the row."""
    return " ".join(fmt(v).split()).replace("|", "\\|")


def md_table(p):
    idx = p.index.names if isinstance(p.index, pd.MultiIndex) else [p.index.name]
    head = [md_cell(n) for n in idx] + [md_cell(c) for c in p.columns]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for key, row in p.iterrows():
        key = key if isinstance(key, tuple) else (key,)
        lines.append("| " + " | ".join([md_cell(k) for k in key] + [md_cell(v) for v in row]) + " |")
    return "\n".join(lines)


def html_table(p):
    idx = p.index.names if isinstance(p.index, pd.MultiIndex) else [p.index.name]
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in list(idx) + [fmt(c) for c in p.columns])
    rows = []
    for key, row in p.iterrows():
        key = key if isinstance(key, tuple) else (key,)
        cells = "".join(f"<td>{html.escape(fmt(v))}</td>" for v in list(key) + list(row))
        rows.append(f"<tr>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


class Report:
    def __init__(self, title):
        self.md = [f"# {title}", ""]
        self.html = []
        self.title = title

    def text(self, s):
        s = " ".join(s.split())  # a label's newline would end the paragraph
        self.md += [s, ""]
        self.html.append(f"<p>{html.escape(s)}</p>")

    def heading(self, s):
        s = " ".join(s.split())
        self.md += [f"## {s}", ""]
        self.html.append(f"<h2>{html.escape(s)}</h2>")

    def image(self, name, alt):
        self.md += [f"![{alt}]({name})", ""]
        self.html.append(f'<p><img src="{html.escape(name)}" alt="{html.escape(alt)}"></p>')

    def table(self, caption, p, note=""):
        caption = f"{caption}. {note}" if note else caption
        self.md += [f"*{caption}*", "", md_table(p), ""]
        self.html.append(f"<p><em>{html.escape(caption)}</em></p>{html_table(p)}")

    def write(self, out):
        with open(os.path.join(out, "report.md"), "w") as f:
            f.write("\n".join(self.md).rstrip() + "\n")
        style = ("body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}"
                 "table{border-collapse:collapse;margin:0.5em 0 1.5em;font-size:13px}"
                 "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#f3f3f3}"
                 "img{max-width:100%}")
        with open(os.path.join(out, "report.html"), "w") as f:
            f.write(f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{html.escape(self.title)}</title>"
                    f"<style>{style}</style></head><body><h1>{html.escape(self.title)}</h1>\n"
                    + "\n".join(self.html) + "\n</body></html>\n")


def seeds_of(seeds, sweep):
    return None if seeds is None else seeds[seeds["sweep"] == sweep]


def main(argv=None):
    ap = ec.ArgumentParser(prog="report.py", description=__doc__.split("\n\n")[0],
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", metavar="RESULTS_DIR", help="a sweep's results (combined.csv)")
    ap.add_argument("--out", help="report directory (default RESULTS_DIR/report)")
    args = ap.parse_args(argv)
    df, seeds = load(args.results)
    final = os.path.normpath(args.out or os.path.join(args.results, "report"))
    ec.check_replaceable_dir(final, ec.REPORT_MARKER, "a report")
    parent = os.path.dirname(os.path.abspath(final))
    try:
        ec.check_dir_writable(parent, final, "--out")
    except ec.Fatal as e:
        raise InputProblem(f"{final}: cannot write the report here ({str(e).split(': ', 2)[-1]})") from None
    os.makedirs(parent, exist_ok=True)
    # Written into a temporary sibling and renamed into place: the report directory is the old one or the
    # new one, whole; a failure or a signal leaves no temporary behind.
    out = ec.register_temp(tempfile.mkdtemp(dir=parent, prefix=f".{os.path.basename(final)}.tmp-"))
    os.chmod(out, 0o777 & ~ec.current_umask())  # mkdtemp's 0700 would outlive the rename: the umask, as every output
    try:
        build(args, df, seeds, out)
    except ec.Fatal:
        raise
    except OSError as e:  # named by the report's own path: not the temporary one, nor none (a full disk)
        where = str(e.filename).replace(out, final, 1) if e.filename else final
        raise InputProblem(f"{where}: cannot write the report: {e.strerror or e} (the old report, if any, is left "
                           f"as it was)") from None
    except Exception as e:  # noqa: BLE001 (whatever pandas or matplotlib raise: one line, exit 2)
        raise InputProblem(f"{args.results}: {describe(e)}") from None
    ec.publish_dir(out, final, ec.REPORT_MARKER, "a report")
    ec.ignore_signals()  # the report is whole: an interrupt now has nothing left to stop
    print(f"report: {os.path.join(final, 'report.md')} and report.html")
    return 0


def describe(e):
    """An exception as a short phrase: the file and the OS's words, not "[Errno 2] ..."."""
    if isinstance(e, OSError) and e.strerror:
        return f"{e.filename}: {e.strerror}" if e.filename else e.strerror
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__


def build(args, df, seeds, out):
    rep = Report(f"eldr-sim sweep report: {os.path.basename(os.path.normpath(args.results))}")
    nseeds = df["seed"].nunique()
    rep.text(f"{ec.count(len(df), 'run')} in {ec.count(df['sweep'].nunique(), 'sweep')} ({', '.join(dict.fromkeys(df['sweep']))})"
             + (f", {nseeds} seeds per point: tables give the mean and its 95% interval [lo, hi]" if nseeds > 1 else "")
             + ". TPOT is per measured request; P50/P99 as in summary.json.")
    unfinished = df[df.get("unfinished", 0) > 0] if "unfinished" in df else df.iloc[0:0]
    if len(unfinished):
        rep.text(f"Warning: {ec.count(len(unfinished), 'run')} left measured requests unfinished: "
                 + ", ".join(unfinished["sweep"] + "/" + unfinished["point"]))
    done = set()
    stems = {"tpot_vs_rate"}  # the figures' names so far: each numeric key's figure gets one of its own
    if "main" in set(df["sweep"]):
        main_df = with_facets(df[df["sweep"] == "main"], ["model", "workload", "router", "rate_rps"])
        done.add("main")
        rep.heading("Main study: routers across load")
        if main_df.attrs["extra"]:
            rep.text("Points also differ in " + ", ".join(main_df.attrs["extra"]) + ": each value has panels and "
                     "table rows of its own.")
        name, rate = fig_cdf(args.results, main_df, out)
        rep.image(name, f"TPOT CDF per router at {rate:g} req/s")
        rep.image(fig_vs_rate(main_df, out), "TPOT P50 and P99 against load")
        at = main_df[main_df["rate_rps"] == rate]
        p50, note = table(at, ["model", "workload"], "router", "tpot_p50_ms")
        p99 = table(at, ["model", "workload"], "router", "tpot_p99_ms")[0].reindex_like(p50)
        cells = p50.copy().astype(object)
        for r in p50.index:
            for c in p50.columns:
                a_, b_ = p50.loc[r, c], p99.loc[r, c]
                cells.loc[r, c] = "" if np.isnan(a_) else f"{a_:.2f} / {b_:.2f}"
        rep.table(f"TPOT P50 / P99 (ms) by router at {rate:g} req/s", cells, note)
        for metric, label in (("tpot_p50_ms", "TPOT P50 (ms)"), ("tpot_p99_ms", "TPOT P99 (ms)")):
            p, note = table(main_df, ["model", "workload", "rate_rps"], "router", metric, seeds_of(seeds, "main"))
            rep.table(f"{label} by router", p, note)
        p, note = table(main_df, ["model", "workload", "rate_rps"], "router", "distinct_experts_mean")
        rep.table("distinct experts per layer per decode step (mean) by router", p, note)
        numeric_sections(rep, df[df["sweep"] == "main"], out, stems)
    for sweep, column, label, title, cat in (
            ("tau", "tau", "locality band tau", "ELDR's locality band", False),
            ("kmeans", "kmeans", "K-means", "Balanced against vanilla K-means", True),
            ("signature", "variant", "signature variant", "Signature variants", True),
            ("scaling", "decode", "decode instances (= ELDR's K)", "Decode pool scaling", False)):
        if sweep not in set(df["sweep"]):
            continue
        d = df[df["sweep"] == sweep]
        cols = "router" if d["router"].nunique() > 1 else column
        d = with_facets(d, ["model", "workload", "router", column])
        done.add(sweep)
        rep.heading(title)
        if d.attrs["extra"]:
            rep.text("Points also differ in " + ", ".join(d.attrs["extra"]) + ": each value has lines and table rows "
                     "of its own.")
        rep.image(fig_param(d, column, label, out, sweep, title, categorical=cat), title)
        index = ["model", "workload"] + ([column] if cols == "router" else [])
        for metric, mlabel in (("tpot_p50_ms", "TPOT P50 (ms)"), ("tpot_p99_ms", "TPOT P99 (ms)")):
            p, note = table(d, index, cols, metric, seeds_of(seeds, sweep))
            rep.table(f"{mlabel}", p, note)
        numeric_sections(rep, df[df["sweep"] == sweep], out, stems)
    for sweep in dict.fromkeys(df["sweep"]):
        if sweep in done:
            continue
        d = df[df["sweep"] == sweep]
        rep.heading(f"Sweep {sweep}")
        # Every point is a row of its own; every key that varies is a column.
        keep = ["point"] + varying_keys(d) + (["seed"] if d["seed"].nunique() > 1 else [])
        p = d.set_index(keep)[[m for m, _ in METRICS if m in d]]
        rep.table("all points", p)
        numeric_sections(rep, d, out, stems)
    rep.write(out)
    return 0


if __name__ == "__main__":
    sys.exit(ec.run_main(main))
