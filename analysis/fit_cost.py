#!/usr/bin/python3
"""Fit the cost model's three free coefficients per model to the measured round-robin curve.

For each model, finds calibration.<hardware> = (decode_bw_efficiency, step_overhead_ms,
prefill_overhead_ms) of models/<model>.json (see sim/cost/cost_model.cpp and docs/calibration.md)
that best reproduce traces/calibration/rr_task_tpot.csv: round-robin decode routing, 8P16D
MI300X, task workload, TPOT P50 and TTFT P50 at 20, 40, 60, 80 and 100 req/s.

Objective (per model): sum over the rates of
    ((sim TPOT P50 - measured) / measured)^2 + W * ((sim TTFT P50 - measured) / measured)^2
with W = --ttft-weight (0.25), plus a penalty when a run leaves requests unfinished. Each evaluation
runs `eldrsim run CONFIG --router round_robin --rate R --set model=<temporary model file>` for the
five rates, --jobs at a time, with a fixed seed, so a fit is deterministic for a given binary.

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
# Optimiser coordinates are the coefficients divided by these scales, so that one unit is a comparable
# change of each (and finite-difference steps are meaningful): efficiency, step ms, prefill ms.
SCALE = np.array([1.0, 10.0, 100.0])
LOWER = np.array([0.05, 0.0, 0.0])
UPPER = np.array([1.0, np.inf, np.inf])
# Candidates are rounded to what --write stores, so the written file reproduces the reported fit exactly.
DECIMALS = (4, 3, 3)
UNFINISHED_PENALTY = 10.0  # residual per fraction of measured requests left unfinished


class BudgetExhausted(Exception):
    pass


def rounded(x):
    return tuple(round(float(v), d) for v, d in zip(x, DECIMALS))


class ModelFit:
    """Evaluates candidate coefficients of one model by simulation; caches by rounded coefficients."""

    def __init__(self, name, args, measured, scratch, fingerprint):
        self.name = name
        self.args = args
        self.measured = measured  # rows sorted by rate
        self.scratch = scratch
        self.doc = ec.load_model(name)
        self.doc.setdefault("calibration", {})
        cal = self.doc["calibration"].get(args.hardware)
        if args.start:
            self.start = np.array(args.start, float)
        elif cal is None:
            raise ec.Fatal(f"{ec.model_file(name)}: no calibration.{args.hardware} block to start from (give --start)")
        else:
            self.start = np.array([cal["decode_bw_efficiency"], cal["step_overhead_ms"], cal["prefill_overhead_ms"]],
                                  float)
        self.start = np.clip(self.start, LOWER, UPPER)
        self.cache = {}
        self.evals = 0
        self.fingerprint = fingerprint
        self.t0 = time.time()

    # ---- one evaluation ------------------------------------------------------------------------
    def evaluate(self, x):
        key = rounded(np.clip(x, LOWER, UPPER))
        if key in self.cache:
            return self.cache[key]
        if self.evals >= self.args.max_evals:
            raise BudgetExhausted()
        self.evals += 1
        n = self.evals
        eff, step_ms, prefill_ms = key
        doc = copy.deepcopy(self.doc)
        block = dict(doc["calibration"].get(self.args.hardware, {}))  # other keys (moe_layer_overhead_us) kept
        block.update({"decode_bw_efficiency": eff, "step_overhead_ms": step_ms, "prefill_overhead_ms": prefill_ms,
                      "source": f"fit_cost.py candidate {n}"})
        doc["calibration"][self.args.hardware] = block
        edir = os.path.join(self.scratch, self.name, f"eval{n:03d}")
        os.makedirs(edir, exist_ok=True)
        mpath = os.path.join(edir, f"{self.name}.json")
        with open(mpath, "w") as f:
            json.dump(doc, f, indent=2)
        a = self.args
        rows = sorted(self.measured, key=lambda r: -r["rate_rps"])  # longest runs first packs the pool best
        tasks = [
            (lambda r=r: ec.run_eldrsim(a.eldrsim, a.config, os.path.join(edir, f"rate{r['rate_rps']:g}"),
                                        r["rate_rps"], mpath, a.duration, a.warmup, a.seed))
            for r in rows]
        t = time.time()
        summaries = ec.run_many(tasks, a.jobs)
        wall = time.time() - t
        by_rate = {r["rate_rps"]: s for r, s in zip(rows, summaries)}
        cells, res_tpot, res_ttft, penalty = [], [], [], []
        for r in self.measured:
            s = by_rate[r["rate_rps"]]
            cell = {
                "rate": r["rate_rps"],
                "tpot_meas": r["tpot_p50_ms"], "tpot_sim": s["tpot_ms"]["p50"],
                "ttft_meas": r["ttft_p50_ms"], "ttft_sim": s["ttft_ms"]["p50"],
                "tpot_p99_sim": s["tpot_ms"]["p99"],
                "unfinished": s.get("unfinished", 0), "requests": s.get("requests", 0),
                "distinct": s.get("distinct_experts_per_layer_mean", float("nan")),
                "batch": s.get("decode_batch_mean", float("nan")),
            }
            cells.append(cell)
            res_tpot.append((cell["tpot_sim"] - cell["tpot_meas"]) / cell["tpot_meas"])
            res_ttft.append(math.sqrt(a.ttft_weight) * (cell["ttft_sim"] - cell["ttft_meas"]) / cell["ttft_meas"])
            if cell["unfinished"]:
                penalty.append(UNFINISHED_PENALTY * cell["unfinished"] / max(1, cell["requests"]))
        residuals = np.array(res_tpot + res_ttft + penalty, float)
        result = {"x": key, "cells": cells, "residuals": residuals,
                  "objective": float(np.sum(residuals ** 2)), "eval": n}
        self.cache[key] = result
        if not a.keep_runs:
            for r in rows:
                d = os.path.join(edir, f"rate{r['rate_rps']:g}")
                for f in ("requests.csv", "steps.csv"):
                    p = os.path.join(d, f)
                    if os.path.exists(p):
                        os.remove(p)
        self.progress(result, wall)
        return result

    def progress(self, r, wall):
        eff, step_ms, prefill_ms = r["x"]
        tp = " ".join(f"{ec.rel_err_pct(c['tpot_sim'], c['tpot_meas']):+5.1f}" for c in r["cells"])
        tt = " ".join(f"{ec.rel_err_pct(c['ttft_sim'], c['ttft_meas']):+5.1f}" for c in r["cells"])
        unf = sum(c["unfinished"] for c in r["cells"])
        best = min(v["objective"] for v in self.cache.values())
        print(f"[{self.name}] eval {r['eval']:>3}/{self.args.max_evals}  eff {eff:.4f}  step {step_ms:7.3f} ms  "
              f"prefill {prefill_ms:8.3f} ms  obj {r['objective']:.5f} (best {best:.5f})  "
              f"TPOT err% [{tp}]  TTFT err% [{tt}]"
              + (f"  UNFINISHED {unf}" if unf else "")
              + f"  {wall:.1f}s", file=sys.stderr, flush=True)

    def best(self):
        return min(self.cache.values(), key=lambda v: (v["objective"], v["eval"]))

    # ---- optimisers ----------------------------------------------------------------------------
    def jacobian(self, z):
        """Forward differences with a fixed step in scaled coordinates (scipy's relative steps would be
        far too small for a near-zero overhead, and a simulated response is only piecewise smooth)."""
        lo, hi = LOWER / SCALE, UPPER / SCALE
        f0 = self.evaluate(z * SCALE)["residuals"]
        J = np.empty((f0.size, z.size))
        for i in range(z.size):
            h = self.args.diff_step
            zi = z.copy()
            zi[i] = z[i] + h if z[i] + h <= hi[i] else z[i] - h
            # Take the difference between the rounded points actually simulated.
            xi, x0 = np.array(rounded(zi * SCALE)), np.array(rounded(z * SCALE))
            dz = (xi[i] - x0[i]) / SCALE[i]
            J[:, i] = (self.evaluate(zi * SCALE)["residuals"] - f0) / dz
        return J

    def fit(self):
        z0 = self.start / SCALE
        lo, hi = LOWER / SCALE, UPPER / SCALE
        a = self.args
        print(f"[{self.name}] start eff {self.start[0]:.4f}, step {self.start[1]:.3f} ms, prefill "
              f"{self.start[2]:.3f} ms; {a.method}, at most {a.max_evals} evaluations of "
              f"{len(self.measured)} runs", file=sys.stderr, flush=True)
        try:
            if a.method == "least_squares":
                optimize.least_squares(lambda z: self.evaluate(z * SCALE)["residuals"], z0, jac=self.jacobian,
                                       bounds=(lo, hi), method="trf", x_scale=1.0, ftol=1e-4, xtol=1e-3,
                                       gtol=1e-6, max_nfev=10 * a.max_evals)
            else:
                simplex = [z0]
                for i in range(3):
                    # Steps of about 20% (efficiency 0.05, step 0.5 ms, prefill 10 ms at least), into the box.
                    step = max(0.2 * abs(z0[i]), [0.05, 0.05, 0.1][i])
                    z = z0.copy()
                    z[i] = z0[i] + step if z0[i] + step <= hi[i] else z0[i] - step
                    simplex.append(z)
                optimize.minimize(lambda z: self.evaluate(z * SCALE)["objective"], z0, method="Nelder-Mead",
                                  bounds=list(zip(lo, hi)),
                                  options={"maxfev": 10 * a.max_evals, "initial_simplex": np.array(simplex),
                                           "xatol": 1e-3, "fatol": 1e-5})
            stop = "converged"
        except BudgetExhausted:
            stop = "evaluation budget reached"
        b = self.best()
        print(f"[{self.name}] {stop} after {self.evals} evaluations, {time.time() - self.t0:.0f} s: "
              f"eff {b['x'][0]:.4f}, step {b['x'][1]:.3f} ms, prefill {b['x'][2]:.3f} ms, objective "
              f"{b['objective']:.5f}", file=sys.stderr, flush=True)
        return {"model": self.name, "best": b, "start": rounded(self.start), "evals": self.evals, "stop": stop,
                "seconds": time.time() - self.t0}


# ---- output ----------------------------------------------------------------------------------------
def objective_text(args):
    return (f"sum over the rates of (relative error of TPOT P50)^2 + {args.ttft_weight:g} x (relative error of "
            f"TTFT P50)^2")


def optimiser_text(args):
    if args.method == "least_squares":
        return (f"scipy least_squares (trf, bounds; forward-difference Jacobian with steps "
                f"{', '.join(f'{args.diff_step * v:g}' for v in SCALE)} in efficiency, step ms, prefill ms), "
                f"at most {args.max_evals} evaluations")
    return f"scipy Nelder-Mead with bounds, at most {args.max_evals} evaluations"


def source_sentence(fit, args):
    b = fit["best"]
    rates = ", ".join(f"{c['rate']:g}" for c in b["cells"])
    shipped = os.path.abspath(args.data) == os.path.abspath(ec.DEFAULT_DATA)
    what = "ELDR artifact; round-robin, 8P16D, task workload" if shipped else "round-robin measurements"
    return (f"Fitted {datetime.date.today().isoformat()} by analysis/fit_cost.py to "
            f"{ec.display_path(args.data)} ({what}, {rates} req/s, hardware {args.hardware}): {args.method} minimising "
            f"{objective_text(args)} = {b['objective']:.5f} here; {fit['evals']} of at most {args.max_evals} "
            f"evaluations ({fit['stop']}); runs of {args.duration:g} s measured traffic after a {args.warmup}-request "
            f"warm-up (the measurement: {ec.MEASURED_DURATION_S} s after {ec.MEASURED_WARMUP_REQUESTS}), seed "
            f"{args.seed}, {ec.display_path(args.config)}. Full-length check: analysis/calibration_table.py.")


def cell_rows(fits):
    rows = []
    for fit in fits:
        for c in fit["best"]["cells"]:
            rows.append((fit["model"], c))
    return rows


def report_tables(fits):
    header = ["model", "rate (req/s)", "TPOT P50 meas (ms)", "TPOT P50 sim (ms)", "TPOT err %",
              "TTFT P50 meas (ms)", "TTFT P50 sim (ms)", "TTFT err %", "distinct experts/layer", "decode batch"]
    rows = []
    for m, c in cell_rows(fits):
        rows.append([m, f"{c['rate']:g}", f"{c['tpot_meas']:.2f}", f"{c['tpot_sim']:.2f}",
                     f"{ec.rel_err_pct(c['tpot_sim'], c['tpot_meas']):+.1f}", f"{c['ttft_meas']:.1f}",
                     f"{c['ttft_sim']:.1f}", f"{ec.rel_err_pct(c['ttft_sim'], c['ttft_meas']):+.1f}",
                     f"{c['distinct']:.1f}", f"{c['batch']:.1f}"])
    return header, rows


def write_report(fits, args, fingerprint):
    header, rows = report_tables(fits)
    coef_header = ["model", "decode_bw_efficiency", "step_overhead_ms", "prefill_overhead_ms", "start",
                   "objective", "evaluations", "stop", "wall (s)"]
    coef_rows = [[f["model"], f"{f['best']['x'][0]:.4f}", f"{f['best']['x'][1]:.3f}", f"{f['best']['x'][2]:.3f}",
                  f"({f['start'][0]:g}, {f['start'][1]:g}, {f['start'][2]:g})", f"{f['best']['objective']:.5f}",
                  str(f["evals"]), f["stop"], f"{f['seconds']:.0f}"] for f in fits]
    md = [
        "# Cost-model calibration fit",
        "",
        f"Written by `analysis/fit_cost.py` on {datetime.datetime.now().strftime('%Y-%m-%d %H:%M')}"
        f" ({'models/*.json updated' if args.write else 'report only; models/*.json not changed'}).",
        "",
        f"- data: `{ec.display_path(args.data)}` (round-robin, 8P16D MI300X, task workload; single measurements)",
        f"- objective per model: {objective_text(args)}; penalty {UNFINISHED_PENALTY:g} x unfinished fraction",
        f"- optimiser: {optimiser_text(args)}",
        f"- runs: {args.duration:g} s measured traffic after {args.warmup} warm-up requests "
        f"(measurement: {ec.MEASURED_DURATION_S} s after {ec.MEASURED_WARMUP_REQUESTS}); seed {args.seed}; "
        f"config `{ec.display_path(args.config)}`; hardware `{args.hardware}`; {args.jobs} parallel runs",
        f"- eldrsim: `{ec.display_path(args.eldrsim)}` (sha256 {fingerprint})",
        "",
        "## Fitted coefficients",
        "",
        ec.md_table(coef_header, coef_rows, ["---"] + ["---:"] * 8),
        "",
        "## Simulated vs measured at the fitted coefficients (fit-length runs)",
        "",
        ec.md_table(header, rows, ["---"] + ["---:"] * (len(header) - 1)),
        "",
    ]
    ec.write_atomic(args.report, "\n".join(md))
    csv_path = os.path.splitext(args.report)[0] + ".csv"
    lines = ["model,rate_rps,tpot_p50_meas_ms,tpot_p50_sim_ms,tpot_err_pct,ttft_p50_meas_ms,ttft_p50_sim_ms,"
             "ttft_err_pct,tpot_p99_sim_ms,distinct_experts_per_layer,decode_batch_mean,unfinished,"
             "decode_bw_efficiency,step_overhead_ms,prefill_overhead_ms"]
    for fit in fits:
        x = fit["best"]["x"]
        for c in fit["best"]["cells"]:
            lines.append(",".join(str(v) for v in [
                fit["model"], f"{c['rate']:g}", c["tpot_meas"], f"{c['tpot_sim']:.4f}",
                f"{ec.rel_err_pct(c['tpot_sim'], c['tpot_meas']):.2f}", c["ttft_meas"], f"{c['ttft_sim']:.3f}",
                f"{ec.rel_err_pct(c['ttft_sim'], c['ttft_meas']):.2f}", f"{c['tpot_p99_sim']:.4f}",
                f"{c['distinct']:.2f}", f"{c['batch']:.2f}", c["unfinished"], x[0], x[1], x[2]]))
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
    eff, step_ms, prefill_ms = fit["best"]["x"]
    cal.update({"decode_bw_efficiency": eff, "step_overhead_ms": step_ms, "prefill_overhead_ms": prefill_ms,
                "source": source_sentence(fit, args)})
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
    ap.add_argument("--seed", type=int, default=1, help="simulation seed (default 1)")
    ap.add_argument("--config", default=ec.DEFAULT_CONFIG, help="experiment config (default configs/default.json)")
    ap.add_argument("--hardware", default="mi300x", help="calibration block to fit (default mi300x)")
    ap.add_argument("--data", default=ec.DEFAULT_DATA, help="measured curve (default traces/calibration/"
                                                            "rr_task_tpot.csv)")
    ap.add_argument("--report", default=os.path.join(ec.REPO, "results", "calibration", "fit_report.md"),
                    help="markdown report; a .csv with the same stem is written beside it "
                         "(default results/calibration/fit_report.md)")
    ap.add_argument("--keep-runs", metavar="DIR", help="keep every evaluation's model file and run outputs here")
    ap.add_argument("--calibration-out", metavar="FILE",
                    help="write the fitted calibration block of the (one) model to FILE as JSON "
                         "(model, hardware, calibration: {hardware: block}); models/*.json stay unchanged")
    args = ap.parse_args(argv)

    for p in ("eldrsim", "config", "data", "report"):
        setattr(args, p, os.path.abspath(getattr(args, p)))
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
                raise ec.Fatal(f"model '{m}' has no rows in {args.data} (has: {', '.join(sorted(measured))})")
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
        x = f["best"]["x"]
        print(f"{f['model']}: decode_bw_efficiency {x[0]:.4f}, step_overhead_ms {x[1]:.3f}, prefill_overhead_ms "
              f"{x[2]:.3f} (objective {f['best']['objective']:.5f}, {f['evals']} evaluations, {f['stop']}, "
              f"{f['seconds']:.0f} s)")
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
