#!/usr/bin/python3
"""Fit the cost model's free coefficients per model to the measured round-robin curves.

For each model, finds calibration.<hardware> = (decode_bw_efficiency, step_overhead_ms,
prefill_overhead_ms, step_jump_ms where the block sets step_jump_batch, moe_config_scale where
it sets moe_config_from_tokens, and step_per_sequence_us where it sets that key, from its value;
the first three are what --start gives) of models/<model>.json
(see sim/cost/cost_model.cpp and docs/calibration.md) that best reproduce the measured round-robin curves, by default both shipped ones: traces/calibration/rr_task_tpot.csv and
rr_language_tpot.csv (8P16D MI300X, TPOT P50 and TTFT P50 at 20, 40, 60, 80 and 100 req/s, so 10
cells per model). --data KIND=PATH names a file and the workload kind it was measured on; a plain
PATH runs the config's own workload.

Objective (per model): sum over the cells of
    ((sim TPOT P50 - measured) / measured)^2 + W * ((sim TTFT P50 - measured) / measured)^2
with W = --ttft-weight (0.25), plus a penalty when a run leaves requests unfinished. Each evaluation
runs `eldrsim run CONFIG --router round_robin --rate R --set model=<temporary model file>` for every
cell, --jobs at a time, with a fixed seed, so a fit is deterministic for a given binary.

Leave-one-rate-out (--loro): for each rate, the coefficients are refitted to the other four rates
(least_squares from the all-rate optimum, reusing its evaluations, at most --loro-evals new ones), and
the held-out rate's cells are then simulated at them: prediction, not interpolation.

Runs are as long as the measurement by default: --duration 120 s of measured traffic after a
--warmup of 3840 requests (about 1 min per model on 2 cores). Shorter runs (e.g. --duration 60
--warmup 1000, about 20 s per model) are fine for exploring, but over-weight the start-up ramp and
shift the coefficients by 5-20 %.

Without --write nothing outside the report and a temporary directory is touched. With --write the
calibration block of each fitted models/<model>.json is updated in place (other content and key order
kept) and its "source" records this fit.

`eldrsim calibrate MEASURED.csv --model M --hardware H --out FILE` (README, "Bring your own cluster")
runs this script on a user's own measurements with --calibration-out FILE: the fitted block goes to
FILE and models/*.json stay unchanged. Without a calibration.<hardware> block to start from, give --start.

Examples:
  /usr/bin/python3 analysis/fit_cost.py                                  # fit all three, report only
  /usr/bin/python3 analysis/fit_cost.py --write                          # update models/*.json
  /usr/bin/python3 analysis/fit_cost.py --models gpt-oss-120b --max-evals 3 --duration 20 --warmup 200
"""
import argparse
import copy
import datetime
import json
import math
import os
import sys
import time

import numpy as np
from scipy import optimize

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import eldr_common as ec  # noqa: E402

PROG = "fit_cost"
# The fitted coefficients: calibration key -> (scale, lower, upper, decimals). Optimiser coordinates
# are the coefficients divided by their scales, so that one unit is a comparable change of each (and
# finite-difference steps are meaningful). Candidates are rounded to `decimals`, what --write stores,
# so the written file reproduces the reported fit exactly. A cost-model mechanism with a coefficient of
# its own adds a line here (docs/calibration.md section 4 lists the ones tried).
PARAMS = {
    "decode_bw_efficiency": (1.0, 0.05, 1.0, 4),
    "step_overhead_ms": (10.0, 0.0, np.inf, 3),
    "prefill_overhead_ms": (100.0, 0.0, np.inf, 3),
    "step_jump_ms": (10.0, 0.0, np.inf, 3),
    "moe_config_scale": (1.0, 0.2, 2.0, 4),
    "step_per_sequence_us": (100.0, 0.0, np.inf, 1),
}
CORE = ["decode_bw_efficiency", "step_overhead_ms", "prefill_overhead_ms"]  # what --start gives
# A coefficient that only acts with another key of the block is fitted where that key is set, from
# the block's value (else the default here).
OPTIONAL = {"step_jump_ms": ("step_jump_batch", 0.0), "moe_config_scale": ("moe_config_from_tokens", 1.0),
            "step_per_sequence_us": ("step_per_sequence_us", 0.0)}
UNFINISHED_PENALTY = 10.0  # residual per fraction of measured requests left unfinished


class BudgetExhausted(Exception):
    pass


def rounded(x, names):
    return tuple(round(float(v), PARAMS[n][3]) for v, n in zip(x, names))


def parse_hold(spec, ap):
    """--hold KEY or KEY=VALUE -> (KEY, VALUE or None: the block's)."""
    key, eq, value = spec.partition("=")
    if key not in PARAMS:
        ap.error(f"--hold {spec}: unknown coefficient '{key}' (one of {', '.join(PARAMS)})")
    if not eq:
        return key, None
    try:
        v = float(value)
    except ValueError:
        ap.error(f"--hold {spec}: '{value}' is not a number")
    lo, hi = PARAMS[key][1], PARAMS[key][2]
    if not lo <= v <= hi:
        ap.error(f"--hold {spec}: outside the coefficient's range [{lo:g}, {hi:g}]")
    return key, v


def bounds_of(names):
    return (np.array([PARAMS[n][1] for n in names]), np.array([PARAMS[n][2] for n in names]))


def scales_of(names):
    return np.array([PARAMS[n][0] for n in names])


class ModelFit:
    """Evaluates candidate coefficients of one model by simulation; caches by rounded coefficients."""

    def __init__(self, name, args, measured, scratch, fingerprint):
        self.name = name
        self.args = args
        self.measured = measured  # rows sorted by (kind, rate)
        self.scratch = scratch
        self.doc = ec.load_model(name)
        self.doc.setdefault("calibration", {})
        cal = self.doc["calibration"].get(args.hardware)
        # --hold: those coefficients stay at the block's value (or the one given) and are not fitted.
        held = dict(args.hold)
        if held:
            cal = dict(cal or {}, **{n: v for n, v in held.items() if v is not None})
            self.doc["calibration"][args.hardware] = cal
        optional = [n for n, (needs, _) in OPTIONAL.items() if cal and needs in cal]
        for n, v in held.items():
            if n not in CORE + optional:
                raise ec.Fatal(f"{ec.model_file(name)}: calibration.{args.hardware}: --hold {n}: not a coefficient of "
                               f"this block ({OPTIONAL[n][0]} is not set), so holding it would change nothing")
            if v is None and n not in cal:
                raise ec.Fatal(f"{ec.model_file(name)}: calibration.{args.hardware}: --hold {n}: no value in the "
                               f"block to hold (give --hold {n}=VALUE)")
        self.held = {n: cal[n] for n in held}
        self.names = [n for n in CORE + optional if n not in held]
        if args.start:
            start = list(args.start)
        elif cal is None:
            raise ec.Fatal(f"{ec.model_file(name)}: no calibration.{args.hardware} block to start from (give --start)")
        else:
            missing = [n for n in CORE if n not in cal]
            if missing:
                raise ec.Fatal(f"{ec.model_file(name)}: calibration.{args.hardware}: no {missing[0]} (give --start)")
            start = [cal[n] for n in CORE]
        start += [cal.get(n, OPTIONAL[n][1]) for n in optional]
        start = [v for n, v in zip(CORE + optional, start) if n not in held]
        if not self.names:
            raise ec.Fatal(f"{ec.model_file(name)}: calibration.{args.hardware}: --hold leaves no coefficient to fit")
        self.scale = scales_of(self.names)
        self.lower, self.upper = bounds_of(self.names)
        self.start = np.clip(np.array(start, float), self.lower, self.upper)
        self.cache = {}
        self.evals = 0
        self.budget = args.max_evals
        self.prefix = ""  # of the evaluation directories
        self.fingerprint = fingerprint
        self.t0 = time.time()

    def model_file_for(self, key, tag):
        doc = copy.deepcopy(self.doc)
        block = dict(doc["calibration"].get(self.args.hardware, {}))  # other keys (moe_layer_overhead_us) kept
        block.update(dict(zip(self.names, key)))
        block["source"] = f"fit_cost.py candidate {tag}"
        doc["calibration"][self.args.hardware] = block
        model = self.doc.get("name", "model")
        edir = os.path.join(self.scratch, model, tag)
        os.makedirs(edir, exist_ok=True)
        mpath = os.path.join(edir, f"{model}.json")
        with open(mpath, "w") as f:
            json.dump(doc, f, indent=2)
        return edir, mpath

    def simulate(self, key, rows, tag):
        """The cells of `rows` at coefficients `key`: one run each, --jobs at a time."""
        a = self.args
        edir, mpath = self.model_file_for(key, tag)
        order = sorted(rows, key=lambda r: -r["rate_rps"])  # longest runs first packs the pool best
        dirs = [os.path.join(edir, ec.cell_label(r).replace(" ", "-")) for r in order]
        tasks = [(lambda r=r, d=d: ec.run_eldrsim(a.eldrsim, a.config, d, r["rate_rps"], mpath, a.duration,
                                                   a.warmup, a.seed, extra_sets=ec.kind_sets(r)))
                 for r, d in zip(order, dirs)]
        summaries = ec.run_many(tasks, a.jobs)
        if not a.keep_runs:
            for d in dirs:
                for f in ("requests.csv", "steps.csv"):
                    p = os.path.join(d, f)
                    if os.path.exists(p):
                        os.remove(p)
        by_cell = {ec.cell_label(r): s for r, s in zip(order, summaries)}
        cells = []
        for r in rows:
            s = by_cell[ec.cell_label(r)]
            cells.append({
                "kind": r["kind"], "rate": r["rate_rps"], "label": ec.cell_label(r),
                "tpot_meas": r["tpot_p50_ms"], "tpot_sim": s["tpot_ms"]["p50"],
                "ttft_meas": r["ttft_p50_ms"], "ttft_sim": s["ttft_ms"]["p50"],
                "tpot_p99_meas": r["tpot_p99_ms"], "tpot_p99_sim": s["tpot_ms"]["p99"],
                "unfinished": s.get("unfinished", 0), "requests": s.get("requests", 0),
                "distinct": s.get("distinct_experts_per_layer_mean", float("nan")),
                "batch": s.get("decode_batch_mean", float("nan")),
            })
        return cells

    def residuals(self, cells):
        """Per cell: TPOT P50 relative error, then sqrt(W) x TTFT P50's; then unfinished penalties."""
        w = math.sqrt(self.args.ttft_weight)
        res = [(c["tpot_sim"] - c["tpot_meas"]) / c["tpot_meas"] for c in cells]
        res += [w * (c["ttft_sim"] - c["ttft_meas"]) / c["ttft_meas"] for c in cells]
        res += [UNFINISHED_PENALTY * c["unfinished"] / max(1, c["requests"]) for c in cells]
        return np.array(res, float)

    # ---- one evaluation ------------------------------------------------------------------------
    def evaluate(self, x):
        key = rounded(np.clip(x, self.lower, self.upper), self.names)
        if key in self.cache:
            return self.cache[key]
        if self.evals >= self.budget:
            raise BudgetExhausted()
        self.evals += 1
        n = self.evals
        t = time.time()
        cells = self.simulate(key, self.measured, f"{self.prefix}eval{n:03d}")
        residuals = self.residuals(cells)
        result = {"x": key, "cells": cells, "residuals": residuals,
                  "objective": float(np.sum(residuals ** 2)), "eval": n}
        self.cache[key] = result
        self.progress(result, time.time() - t)
        return result

    def describe(self, key):
        return ", ".join(f"{n} {v:g}" for n, v in zip(self.names, key))

    def progress(self, r, wall):
        tp = " ".join(f"{ec.rel_err_pct(c['tpot_sim'], c['tpot_meas']):+5.1f}" for c in r["cells"])
        tt = " ".join(f"{ec.rel_err_pct(c['ttft_sim'], c['ttft_meas']):+5.1f}" for c in r["cells"])
        unf = sum(c["unfinished"] for c in r["cells"])
        best = min(v["objective"] for v in self.cache.values())
        print(f"[{self.name}] eval {r['eval']:>3}/{self.budget}  {self.describe(r['x'])}  "
              f"obj {r['objective']:.5f} (best {best:.5f})  TPOT err% [{tp}]  TTFT err% [{tt}]"
              + (f"  UNFINISHED {unf}" if unf else "")
              + f"  {wall:.1f}s", file=sys.stderr, flush=True)

    def best(self):
        return min(self.cache.values(), key=lambda v: (v["objective"], v["eval"]))

    # ---- optimisers ----------------------------------------------------------------------------
    def jacobian(self, z):
        """Forward differences with a fixed step in scaled coordinates (scipy's relative steps would be
        far too small for a near-zero overhead, and a simulated response is only piecewise smooth)."""
        hi = self.upper / self.scale
        f0 = self.evaluate(z * self.scale)["residuals"]
        J = np.empty((f0.size, z.size))
        for i in range(z.size):
            h = self.args.diff_step
            zi = z.copy()
            zi[i] = z[i] + h if z[i] + h <= hi[i] else z[i] - h
            # Take the difference between the rounded points actually simulated.
            xi = np.array(rounded(zi * self.scale, self.names))
            x0 = np.array(rounded(z * self.scale, self.names))
            dz = (xi[i] - x0[i]) / self.scale[i]
            J[:, i] = (self.evaluate(zi * self.scale)["residuals"] - f0) / dz
        return J

    def fit(self):
        z0 = self.start / self.scale
        lo, hi = self.lower / self.scale, self.upper / self.scale
        a = self.args
        print(f"[{self.name}] start {self.describe(rounded(self.start, self.names))}; {a.method}, at most "
              f"{a.max_evals} evaluations of {len(self.measured)} runs", file=sys.stderr, flush=True)
        try:
            if a.method == "least_squares":
                self.least_squares()
            else:
                simplex = [z0]
                for i in range(z0.size):
                    # Steps of about 20% (at least 0.05 scaled units), into the box.
                    step = max(0.2 * abs(z0[i]), 0.05)
                    z = z0.copy()
                    z[i] = z0[i] + step if z0[i] + step <= hi[i] else z0[i] - step
                    simplex.append(z)
                optimize.minimize(lambda z: self.evaluate(z * self.scale)["objective"], z0, method="Nelder-Mead",
                                  bounds=list(zip(lo, hi)),
                                  options={"maxfev": 10 * a.max_evals, "initial_simplex": np.array(simplex),
                                           "xatol": 1e-3, "fatol": 1e-5})
            stop = "converged"
        except BudgetExhausted:
            stop = "evaluation budget reached"
        b = self.best()
        print(f"[{self.name}] {stop} after {self.evals} evaluations, {time.time() - self.t0:.0f} s: "
              f"{self.describe(b['x'])}, objective {b['objective']:.5f}", file=sys.stderr, flush=True)
        out = {"model": self.name, "names": self.names, "held": self.held, "best": b, "start": rounded(self.start, self.names),
               "evals": self.evals, "stop": stop}
        if a.loro:
            out["loro"] = self.leave_one_rate_out(b)
        out["seconds"] = time.time() - self.t0
        return out

    def leave_one_rate_out(self, best):
        """Per rate: a refit on the other rates, started at the all-rate optimum (its evaluations, and so
        its Jacobian, are reused), then that rate's cells simulated at the refit's coefficients."""
        # The Jacobian's points at the optimum, simulated once for every fold (usually cached already).
        self.budget = self.evals + len(self.names)
        self.jacobian(np.array(best["x"], float) / self.scale)
        folds = []
        for rate in sorted({c["rate"] for c in best["cells"]}):
            fold = self.without_rate(rate)
            fold.start = np.array(best["x"], float)
            fold.budget = fold.evals + self.args.loro_evals
            try:
                fold.least_squares()
            except BudgetExhausted:
                pass
            key = fold.best()["x"]
            rows = [r for r in self.measured if r["rate_rps"] == rate]
            cells = self.simulate(key, rows, f"loro-{rate:g}")
            print(f"[{self.name}] leave out {rate:g} req/s: {self.describe(key)}; predicted TPOT P50 err% "
                  + " ".join(f"{c['label']} {ec.rel_err_pct(c['tpot_sim'], c['tpot_meas']):+.1f}" for c in cells),
                  file=sys.stderr, flush=True)
            folds.append({"rate": rate, "x": key, "cells": cells})
        return folds

    def without_rate(self, rate):
        """The same fit on the cells of the other rates, with this fit's evaluations already known."""
        fold = copy.copy(self)
        fold.name = f"{self.name} without {rate:g}"
        fold.prefix = f"{self.prefix}without{rate:g}-"
        keep = [i for i, r in enumerate(self.measured) if r["rate_rps"] != rate]
        fold.measured = [self.measured[i] for i in keep]
        fold.cache = {}
        for key, r in self.cache.items():
            cells = [r["cells"][i] for i in keep]
            res = fold.residuals(cells)
            fold.cache[key] = dict(r, cells=cells, residuals=res, objective=float(np.sum(res ** 2)))
        fold.evals = 0
        return fold

    def least_squares(self):
        """scipy's bounded least squares from self.start; raises BudgetExhausted past self.budget."""
        optimize.least_squares(lambda z: self.evaluate(z * self.scale)["residuals"], self.start / self.scale,
                               jac=self.jacobian, bounds=(self.lower / self.scale, self.upper / self.scale),
                               method="trf", x_scale=1.0, ftol=1e-4, xtol=1e-3, gtol=1e-6, max_nfev=10 * self.budget)


# ---- output ----------------------------------------------------------------------------------------
def objective_text(args):
    return (f"sum over the cells of (relative error of TPOT P50)^2 + {args.ttft_weight:g} x (relative error of "
            f"TTFT P50)^2")


def optimiser_text(args):
    if args.method == "least_squares":
        return (f"scipy least_squares (trf, bounds; forward-difference Jacobian with a step of {args.diff_step:g} "
                f"in scaled coordinates), at most {args.max_evals} evaluations")
    return f"scipy Nelder-Mead with bounds, at most {args.max_evals} evaluations"


def data_text(args):
    shipped = sorted(map(ec.split_data_spec, args.data)) == sorted(map(ec.split_data_spec, ec.DEFAULT_DATA))
    files = ", ".join(ec.display_path(ec.split_data_spec(d)[1]) for d in args.data)
    what = "ELDR artifact; round-robin, 8P16D, task and language workloads" if shipped else "round-robin measurements"
    return f"{files} ({what})"


def held_text(fit):
    return f" (held: {', '.join(f'{n} {v:g}' for n, v in fit['held'].items())})" if fit["held"] else ""


def source_sentence(fit, args):
    b = fit["best"]
    cells = ", ".join(c["label"] for c in b["cells"])
    return (f"Fitted {datetime.date.today().isoformat()} by analysis/fit_cost.py to {data_text(args)}, cells "
            f"{cells} req/s, hardware {args.hardware}: {args.method} over {', '.join(fit['names'])}{held_text(fit)} minimising "
            f"{objective_text(args)} = {b['objective']:.5f} here; {fit['evals']} of at most {args.max_evals} "
            f"evaluations ({fit['stop']}); runs of {args.duration:g} s measured traffic after a {args.warmup}-request "
            f"warm-up (the measurement: {ec.MEASURED_DURATION_S} s after {ec.MEASURED_WARMUP_REQUESTS}), seed "
            f"{args.seed}, {ec.display_path(args.config)}. Full-length check: eldrsim validate.")


def report_tables(fits):
    header = ["model", "cell (req/s)", "TPOT P50 meas (ms)", "TPOT P50 sim (ms)", "TPOT err %",
              "TTFT P50 meas (ms)", "TTFT P50 sim (ms)", "TTFT err %", "distinct experts/layer", "decode batch"]
    rows = []
    for fit in fits:
        for c in fit["best"]["cells"]:
            rows.append([fit["model"], c["label"], f"{c['tpot_meas']:.2f}", f"{c['tpot_sim']:.2f}",
                         f"{ec.rel_err_pct(c['tpot_sim'], c['tpot_meas']):+.1f}", f"{c['ttft_meas']:.1f}",
                         f"{c['ttft_sim']:.1f}", f"{ec.rel_err_pct(c['ttft_sim'], c['ttft_meas']):+.1f}",
                         f"{c['distinct']:.1f}", f"{c['batch']:.1f}"])
    return header, rows


def error_summary(cells):
    """Mean and max absolute TPOT P50 error, mean absolute P99 and TTFT P50 error (percent)."""
    e50 = [abs(ec.rel_err_pct(c["tpot_sim"], c["tpot_meas"])) for c in cells]
    e99 = [abs(ec.rel_err_pct(c["tpot_p99_sim"], c["tpot_p99_meas"])) for c in cells]
    ettft = [abs(ec.rel_err_pct(c["ttft_sim"], c["ttft_meas"])) for c in cells]
    return {"tpot_p50_mean": float(np.mean(e50)), "tpot_p50_max": float(np.max(e50)),
            "tpot_p99_mean": float(np.mean(e99)), "ttft_p50_mean": float(np.mean(ettft))}


def summary_rows(fits):
    header = ["model", "TPOT P50 mean abs err %", "max %", "P99 mean %", "TTFT P50 mean %", "LORO TPOT P50 mean %",
              "LORO max %"]
    rows = []
    groups = [(f["model"], [f]) for f in fits] + ([("all", fits)] if len(fits) > 1 else [])
    for name, fs in groups:
        s = error_summary([c for f in fs for c in f["best"]["cells"]])
        row = [name, f"{s['tpot_p50_mean']:.2f}", f"{s['tpot_p50_max']:.2f}", f"{s['tpot_p99_mean']:.2f}",
               f"{s['ttft_p50_mean']:.2f}"]
        held = [c for f in fs for fold in f.get("loro", []) for c in fold["cells"]]
        if held:
            lo = error_summary(held)
            row += [f"{lo['tpot_p50_mean']:.2f}", f"{lo['tpot_p50_max']:.2f}"]
        else:
            row += ["", ""]
        rows.append(row)
    return header, rows


def write_report(fits, args, fingerprint):
    header, rows = report_tables(fits)
    coef_header = ["model"] + sorted({n for f in fits for n in f["names"]}, key=list(PARAMS).index) + \
        ["objective", "evaluations", "stop", "wall (s)"]
    coef_rows = []
    for f in fits:
        x = dict(zip(f["names"], f["best"]["x"]))
        coef_rows.append([f["model"]] + [f"{x[n]:g}" if n in x else "" for n in coef_header[1:-4]] +
                         [f"{f['best']['objective']:.5f}", str(f["evals"]), f["stop"], f"{f['seconds']:.0f}"])
    sum_header, sum_rows = summary_rows(fits)
    md = [
        "# Cost-model calibration fit",
        "",
        f"Written by `analysis/fit_cost.py` on {datetime.datetime.now().strftime('%Y-%m-%d %H:%M')}"
        f" ({'models/*.json updated' if args.write else 'report only; models/*.json not changed'}).",
        "",
        f"- data: {data_text(args)}; single measurements",
        f"- objective per model: {objective_text(args)}; penalty {UNFINISHED_PENALTY:g} x unfinished fraction",
        f"- optimiser: {optimiser_text(args)}",
        f"- runs: {args.duration:g} s measured traffic after {args.warmup} warm-up requests "
        f"(measurement: {ec.MEASURED_DURATION_S} s after {ec.MEASURED_WARMUP_REQUESTS}); seed {args.seed}; "
        f"config `{ec.display_path(args.config)}`; hardware `{args.hardware}`; {args.jobs} parallel runs",
        f"- eldrsim: `{ec.display_path(args.eldrsim)}` (sha256 {fingerprint})",
        "",
        "## Fitted coefficients",
        "",
        ec.md_table(coef_header, coef_rows, ["---"] + ["---:"] * (len(coef_header) - 1)),
        "",
        "## Errors (LORO: each rate predicted from a fit to the other four)",
        "",
        ec.md_table(sum_header, sum_rows, ["---"] + ["---:"] * (len(sum_header) - 1)),
        "",
        "## Simulated vs measured at the fitted coefficients (fit-length runs)",
        "",
        ec.md_table(header, rows, ["---"] + ["---:"] * (len(header) - 1)),
        "",
    ]
    if any(f.get("loro") for f in fits):
        lh = ["model", "held-out cell (req/s)", "coefficients of the other rates' fit", "TPOT P50 meas (ms)",
              "predicted (ms)", "err %"]
        lr = []
        for f in fits:
            for fold in f.get("loro", []):
                for c in fold["cells"]:
                    lr.append([f["model"], c["label"], ", ".join(f"{v:g}" for v in fold["x"]), f"{c['tpot_meas']:.2f}",
                               f"{c['tpot_sim']:.2f}", f"{ec.rel_err_pct(c['tpot_sim'], c['tpot_meas']):+.1f}"])
        md += ["## Leave-one-rate-out predictions", "", ec.md_table(lh, lr, ["---", "---", "---"] + ["---:"] * 3), ""]
    ec.write_atomic(args.report, "\n".join(md))
    csv_path = os.path.splitext(args.report)[0] + ".csv"
    lines = ["model,kind,rate_rps,tpot_p50_meas_ms,tpot_p50_sim_ms,tpot_err_pct,ttft_p50_meas_ms,ttft_p50_sim_ms,"
             "ttft_err_pct,tpot_p99_meas_ms,tpot_p99_sim_ms,distinct_experts_per_layer,decode_batch_mean,unfinished,"
             "coefficients"]
    for fit in fits:
        coefs = ";".join(f"{n}={v:g}" for n, v in zip(fit["names"], fit["best"]["x"]))
        for c in fit["best"]["cells"]:
            lines.append(",".join(str(v) for v in [
                fit["model"], c["kind"] or "", f"{c['rate']:g}", c["tpot_meas"], f"{c['tpot_sim']:.4f}",
                f"{ec.rel_err_pct(c['tpot_sim'], c['tpot_meas']):.2f}", c["ttft_meas"], f"{c['ttft_sim']:.3f}",
                f"{ec.rel_err_pct(c['ttft_sim'], c['ttft_meas']):.2f}", c["tpot_p99_meas"], f"{c['tpot_p99_sim']:.4f}",
                f"{c['distinct']:.2f}", f"{c['batch']:.2f}", c["unfinished"], coefs]))
    ec.write_atomic(csv_path, "\n".join(lines) + "\n")
    return csv_path


def write_model(fit, args):
    """Update calibration.<hardware> of models/<model>.json in place, keeping everything else."""
    path = ec.model_file(fit["model"])
    with open(path) as f:
        original = f.read()
    doc = json.loads(original)
    reformat = json.dumps(doc, indent=2, ensure_ascii=False) + "\n" != original
    # Existing keys keep their place; missing ones are appended.
    doc.setdefault("calibration", {})[args.hardware] = fitted_block(fit, args)
    ec.write_atomic(path, json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    if reformat:
        print(f"{PROG}: note: {path} was not in json.dumps(indent=2) layout; it was re-indented", file=sys.stderr)
    return path


def fitted_block(fit, args):
    """The model file's calibration.<hardware> block with the fitted coefficients and this fit's source."""
    doc = ec.load_model(fit["model"])
    cal = dict(doc.get("calibration", {}).get(args.hardware, {}))
    cal.update(fit["held"])
    cal.update(dict(zip(fit["names"], fit["best"]["x"])))
    cal["source"] = source_sentence(fit, args)
    return cal


def write_calibration_out(fits, args):
    """--calibration-out: {"model", "hardware", "calibration": {hardware: block}} of one fitted model, the
    block to paste into models/<model>.json's "calibration" (eldrsim calibrate writes it)."""
    f = fits[0]
    doc = {"model": f["model"], "hardware": args.hardware, "calibration": {args.hardware: fitted_block(f, args)}}
    ec.write_atomic(args.calibration_out, json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    return args.calibration_out


def main(argv=None):
    ap = argparse.ArgumentParser(prog="fit_cost.py", description=__doc__.split("\n\n")[0],
                                 epilog="\n\n".join(__doc__.split("\n\n")[1:]),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", default=[",".join(ec.CALIBRATED_MODELS)],
                    help=f"models to fit, comma- or space-separated (default: {','.join(ec.CALIBRATED_MODELS)})")
    ap.add_argument("--write", action="store_true",
                    help="update the calibration block of models/<model>.json in place")
    ap.add_argument("--eldrsim", default=ec.DEFAULT_ELDRSIM, help="simulator binary (default: build/eldrsim)")
    ap.add_argument("--jobs", type=int, default=ec.default_jobs(), help="parallel simulator runs (default: 2)")
    ap.add_argument("--duration", type=float, default=120,
                    help="seconds of measured traffic per run (default 120, as measured)")
    ap.add_argument("--warmup", type=int, default=3840,
                    help="warm-up requests per run (default 3840, as measured)")
    ap.add_argument("--max-evals", type=int, default=40,
                    help="simulated evaluations per model, each = one run per rate (default 40)")
    ap.add_argument("--method", choices=["least_squares", "nelder-mead"], default="least_squares",
                    help="scipy optimiser (default least_squares, trust-region reflective with bounds)")
    ap.add_argument("--diff-step", type=float, default=0.02,
                    help="least_squares forward-difference step in scaled coordinates (default 0.02 = "
                         "efficiency 0.02, step overhead 0.2 ms, prefill overhead 2 ms)")
    ap.add_argument("--ttft-weight", type=float, default=0.25, help="weight of TTFT P50 errors (default 0.25)")
    ap.add_argument("--start", type=float, nargs=3, metavar=("EFF", "STEP_MS", "PREFILL_MS"),
                    help="starting point (default: the model file's current calibration)")
    ap.add_argument("--hold", nargs="+", default=[], metavar="KEY[=VALUE]",
                    help="keep these coefficients at the block's value (or at VALUE) instead of fitting them: "
                         "an ablation's fixed size, e.g. --hold step_per_sequence_us=50")
    ap.add_argument("--seed", type=int, default=1, help="simulation seed (default 1)")
    ap.add_argument("--config", default=ec.DEFAULT_CONFIG, help="experiment config (default configs/default.json)")
    ap.add_argument("--hardware", default="mi300x", help="calibration block to fit (default mi300x)")
    ap.add_argument("--data", nargs="+", default=ec.DEFAULT_DATA, metavar="[KIND=]PATH",
                    help="measured curves, one file per workload kind (task= or language=; a plain PATH runs the "
                         "config's own workload); default task=traces/calibration/rr_task_tpot.csv "
                         "language=traces/calibration/rr_language_tpot.csv")
    ap.add_argument("--loro", action="store_true",
                    help="also report leave-one-rate-out predictions: per rate, a refit on the other rates from "
                         "the all-rate optimum, then the held-out cells simulated")
    ap.add_argument("--loro-evals", type=int, default=4,
                    help="new evaluations a leave-one-rate-out refit may make (default 4; the all-rate fit's are "
                         "reused)")
    ap.add_argument("--report", default=os.path.join(ec.REPO, "results", "calibration", "fit_report.md"),
                    help="markdown report; a .csv with the same stem is written beside it "
                         "(default results/calibration/fit_report.md)")
    ap.add_argument("--keep-runs", metavar="DIR", help="keep every evaluation's model file and run outputs here")
    ap.add_argument("--calibration-out", metavar="FILE",
                    help="write the fitted calibration block of the (one) model to FILE as JSON "
                         "(model, hardware, calibration: {hardware: block}); models/*.json stay unchanged")
    args = ap.parse_args(argv)

    for p in ("eldrsim", "config", "report"):
        setattr(args, p, os.path.abspath(getattr(args, p)))
    args.data = [(f"{k}={p}" if k else p) for k, p in map(ec.split_data_spec, args.data)]
    args.hold = [parse_hold(h, ap) for h in args.hold]
    if args.jobs < 1 or args.max_evals < 1 or args.duration <= 0 or args.warmup < 0 or args.ttft_weight < 0:
        ap.error("--jobs and --max-evals must be >= 1, --duration > 0, --warmup and --ttft-weight >= 0")
    models = ec.parse_models(args.models)
    if args.calibration_out:
        args.calibration_out = os.path.abspath(args.calibration_out)
        if len(models) != 1:
            ap.error("--calibration-out needs exactly one model in --models")
    try:
        if not os.path.isfile(args.config):
            raise ec.Fatal(f"config not found: {args.config}")
        measured = ec.load_measured(args.data)
        for m in models:
            if m not in measured:
                raise ec.Fatal(f"model '{m}' has no rows in {' '.join(args.data)} (has: {', '.join(sorted(measured))})")
            ec.load_model(m)
        ec.wait_for_binary(args.eldrsim, prog=PROG)
        fingerprint = ec.binary_fingerprint(args.eldrsim)
        fits = []
        with ec.ScratchDir(args.keep_runs, prefix="eldr-fit-") as scratch:
            for m in models:
                fits.append(ModelFit(m, args, measured[m], scratch, fingerprint).fit())
        now = ec.binary_fingerprint(args.eldrsim) if os.path.isfile(args.eldrsim) else "missing"
        if now != fingerprint:
            print(f"{PROG}: warning: {args.eldrsim} changed during the fit ({fingerprint} -> {now}); "
                  f"rerun for a consistent result", file=sys.stderr)
    except ec.Fatal as e:
        ec.die(PROG, e, e.code)
    except KeyboardInterrupt:
        ec.die(PROG, "interrupted; no model file was changed", 130)

    header, rows = report_tables(fits)
    print()
    print(ec.text_table(header, rows))
    print()
    for f in fits:
        x = ", ".join(f"{n} {v:g}" for n, v in zip(f["names"], f["best"]["x"]))
        print(f"{f['model']}: {x}{held_text(f)} (objective {f['best']['objective']:.5f}, {f['evals']} evaluations, {f['stop']}, "
              f"{f['seconds']:.0f} s)")
    print()
    print(ec.text_table(*summary_rows(fits)))
    csv_path = write_report(fits, args, fingerprint)
    print(f"report: {args.report} and {csv_path}")
    if args.calibration_out:
        print(f"calibration block: {write_calibration_out(fits, args)}")
    if args.write:
        for f in fits:
            print(f"updated {write_model(f, args)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
