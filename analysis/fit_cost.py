#!/usr/bin/python3
"""Fit the cost model's free coefficients per model to the measured round-robin curves.

For each model, finds calibration.<hardware> = (decode_bw_efficiency, step_overhead_ms,
prefill_overhead_ms, step_jump_ms where the block sets step_jump_batch, and the fused-MoE
configurations' times (moe_time_*) and step_per_sequence_us where the block sets them, from its value;
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
kept) and its "source" records this fit. Every output is checked before the first run and all are written
together at the end (the report, --calibration-out, --write's files): an error, a full disk or a signal
leaves the old ones, and no temporary file.

`eldrsim calibrate MEASURED.csv --model M --hardware H --out FILE` (docs/calibration.md section 3a)
runs this script on a user's own measurements with --calibration-out FILE: the fitted block goes to
FILE and models/*.json stay unchanged. Without a calibration.<hardware> block to start from, give --start.

Examples:
  /usr/bin/python3 analysis/fit_cost.py                                  # fit all three, report only
  /usr/bin/python3 analysis/fit_cost.py --write                          # update models/*.json
  /usr/bin/python3 analysis/fit_cost.py --routers --ablations           # also the task ablations' changes
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

# First: its signal handlers then cover the second that numpy and scipy take to import.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import eldr_common as ec  # noqa: E402

import numpy as np  # noqa: E402
from scipy import optimize  # noqa: E402

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
    # The fused-MoE kernel's configurations past 32 tokens, relative to the first one's streaming time
    # (docs/calibration.md, "Kernel configurations"): at most 2x slower or 30% faster. BLOCK_SIZE_M 64
    # (above 96 tokens) is held at 1 by the measured MoE layer (batch 32 and 128 barely differ).
    "moe_time_m32_n64_k128": (1.0, 0.7, 2.0, 4),
    "moe_time_m32_n128_k64": (1.0, 0.7, 2.0, 4),
    "step_per_sequence_us": (100.0, 0.0, np.inf, 1),
}
# The routing generator's locality inputs of the task kind (models/routing/<model>.json, kinds.task;
# docs/routing-model.md): how strongly a task label and a sub-topic steer the model's gate, and how
# much one request mixes two sub-topics. Round robin's curves cannot identify them; the main study of
# every router can, so they are fitted only with --routers.
ROUTING = {
    "task.label_strength": (5.0, 0.25, 5.0, 3),
    "task.subtopic_strength": (5.0, 0.25, 5.0, 3),
    "task.request_mix_max": (2.5, 0.0, 1.0, 3),
    # How unequal a label's sub-topics are in traffic (Zipf exponent): what makes pure locality overload
    # the popular topics' workers, which the task ablations' tau = 0 cells show (docs/log/calibration.md).
    "task.subtopic_zipf": (2.0, 0.0, 3.0, 2),
}
ROUTING_DEFAULTS = {"task.subtopic_zipf": 0.0}  # a profile without the key: its meaning when absent
PARAMS.update(ROUTING)
CORE = ["decode_bw_efficiency", "step_overhead_ms", "prefill_overhead_ms"]  # what --start gives
# A coefficient that only acts with another key of the block is fitted where that key is set, from
# the block's value (else the default here).
OPTIONAL = {"step_jump_ms": ("step_jump_batch", 0.0),
            "moe_time_m32_n64_k128": ("moe_time_m32_n64_k128", 1.0),
            "moe_time_m32_n128_k64": ("moe_time_m32_n128_k64", 1.0),
            "step_per_sequence_us": ("step_per_sequence_us", 0.0)}
UNFINISHED_PENALTY = 10.0  # residual per fraction of measured requests left unfinished


class BudgetExhausted(Exception):
    pass


def router_groups(cells):
    """The cells of each (kind, rate) that has more than round robin: one main-study cell each."""
    groups = {}
    for c in cells:
        groups.setdefault((c["kind"] or "", c["rate"]), []).append(c)
    return [g for _, g in sorted(groups.items()) if len(g) > 1]


def with_routing_inputs(profile, values):
    """A copy of a routing profile with the task kind's fitted inputs. The language kind's shared
    topics take the task kind's label strength (docs/routing-model.md, calibration step 8: a chat
    turn's topic steers the model as a task does), so it follows."""
    out = copy.deepcopy(profile)
    for name, v in values.items():
        kind, key = name.split(".")
        out["kinds"][kind][key] = v
    language = out["kinds"].get("language", {})
    if language.get("shared_subtopics"):
        language["subtopic_strength"] = out["kinds"]["task"]["label_strength"]
    return out


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
        ap.error(f"--hold {spec}: outside the coefficient's range [{lo!r}, {hi!r}], got {v!r}")
    return key, v


def bounds_of(names):
    return (np.array([PARAMS[n][1] for n in names]), np.array([PARAMS[n][2] for n in names]))


def scales_of(names):
    return np.array([PARAMS[n][0] for n in names])


class ModelFit:
    """Evaluates candidate coefficients of one model by simulation; caches by rounded coefficients."""

    def __init__(self, name, args, measured, scratch, fingerprint, ablations=()):
        self.name = name
        self.args = args
        self.measured = measured  # rows sorted by (kind, rate)
        # Ablation cells (eldr_common.load_ablations): run with their overrides beside the measured rows;
        # their changes from round robin, not their latencies, enter the objective.
        self.ablations = list(ablations)
        self.scratch = scratch
        self.doc = ec.load_model(name)
        self.doc.setdefault("calibration", {})
        cal = self.doc["calibration"].get(args.hardware)
        # --hold: those coefficients stay at the block's value (or the one given) and are not fitted.
        held = dict(args.hold)
        if held:
            cal = dict(cal or {}, **{n: v for n, v in held.items() if v is not None and n not in ROUTING})
            self.doc["calibration"][args.hardware] = cal
        optional = [n for n, (needs, _) in OPTIONAL.items() if cal and needs in cal]
        # The routing inputs are fitted with the main study of every router; held at a value (an
        # ablation, or a model predicted from the others' inputs) they apply to round robin's cells too.
        self.profile = None
        routing = list(ROUTING) if any(r.get("policy", "round_robin") != "round_robin" for r in measured) else []
        if routing or any(n in ROUTING for n in held):
            with open(ec.routing_profile_file(name)) as f:
                self.profile = json.load(f)
        for n, v in held.items():
            if n in ROUTING and not routing and v is None:
                raise ec.Fatal(f"--hold {n}: without --routers a routing input is held only at a value given")
            if n not in CORE + optional + list(ROUTING):
                raise ec.Fatal(f"{ec.model_file(name)}: calibration.{args.hardware}: --hold {n}: not a coefficient of "
                               f"this block ({OPTIONAL[n][0]} is not set), so holding it would change nothing")
            if v is None and n not in cal and n not in ROUTING:
                raise ec.Fatal(f"{ec.model_file(name)}: calibration.{args.hardware}: --hold {n}: no value in the "
                               f"block to hold (give --hold {n}=VALUE)")
        self.held = {n: (v if v is not None else self.routing_value(n)) if n in ROUTING else cal[n]
                     for n, v in held.items()}
        self.names = [n for n in CORE + optional + routing if n not in held]
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
        start += [self.routing_value(n) for n in routing]
        start = [v for n, v in zip(CORE + optional + routing, start) if n not in held]
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

    def routing_value(self, name):
        """A routing input's value in the model's profile (a kind's own, else the profile's)."""
        kind, key = name.split(".")
        return float(self.profile["kinds"][kind].get(key, self.profile.get(key, ROUTING_DEFAULTS.get(name, 1.0))))

    def model_file_for(self, key, tag):
        """The candidate's model file and, when routing inputs are fitted, its routing profile."""
        values = dict(self.held, **dict(zip(self.names, key)))
        doc = copy.deepcopy(self.doc)
        block = dict(doc["calibration"].get(self.args.hardware, {}))  # other keys (moe_layer_overhead_us) kept
        block.update({n: v for n, v in values.items() if n not in ROUTING})
        block["source"] = f"fit_cost.py candidate {tag}"
        doc["calibration"][self.args.hardware] = block
        model = self.doc.get("name", "model")
        edir = os.path.join(self.scratch, model, tag)
        os.makedirs(edir, exist_ok=True)
        mpath = os.path.join(edir, f"{model}.json")
        with open(mpath, "w") as f:
            json.dump(doc, f, indent=2)
        ppath = None
        if self.profile is not None:
            profile = with_routing_inputs(self.profile, {n: v for n, v in values.items() if n in ROUTING})
            counts = profile.get("language_counts_file")
            if counts and not os.path.isabs(counts):
                profile["language_counts_file"] = os.path.join(ec.REPO, counts)
            ppath = os.path.join(edir, f"{model}-routing.json")
            with open(ppath, "w") as f:
                json.dump(profile, f, indent=2)
        return edir, mpath, ppath

    def simulate(self, key, rows, tag):
        """The cells of `rows` at coefficients `key`: one run each, --jobs at a time."""
        a = self.args
        edir, mpath, ppath = self.model_file_for(key, tag)
        order = sorted(rows, key=lambda r: -r["rate_rps"])  # longest runs first packs the pool best
        dirs = [os.path.join(edir, ec.cell_label(r).replace(" ", "-")) for r in order]
        sets = [f"workload.routing_profile={ppath}"] if ppath else []
        tasks = [(lambda r=r, d=d: ec.run_eldrsim(a.eldrsim, a.config, d, r["rate_rps"], mpath, a.duration,
                                                   a.warmup, a.seed, router=r.get("policy", "round_robin"),
                                                   extra_sets=ec.kind_sets(r) + sets + r.get("overrides", [])))
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
                "router": r.get("policy", "round_robin"),
                "tpot_meas": r["tpot_p50_ms"], "tpot_sim": s["tpot_ms"]["p50"],
                "ttft_meas": r["ttft_p50_ms"], "ttft_sim": s["ttft_ms"]["p50"],
                "tpot_p99_meas": r["tpot_p99_ms"], "tpot_p99_sim": s["tpot_ms"]["p99"],
                "unfinished": s.get("unfinished", 0), "requests": s.get("requests", 0),
                "distinct": s.get("distinct_experts_per_layer_mean", float("nan")),
                "batch": s.get("decode_batch_mean", float("nan")),
            })
            if r.get("overrides"):
                cells[-1].update({k: r[k] for k in ("ablation", "setting", "baseline") if k in r})
        return cells

    def residuals(self, cells, ablation_cells=()):
        """Per cell: TPOT P50 relative error, then sqrt(W) x TTFT P50's (round robin's); then, per kind and rate of the
        main study, sqrt(G) x the error of ELDR's and the domain oracle's gain over the best load
        balancer and of ELDR's lead over the oracle (points / 100); then unfinished penalties; then, per
        ablation cell, sqrt(G) x the error of its TPOT P50 change from round robin and sqrt(P) x its P99
        change's (points / 100), and its unfinished penalty."""
        w = math.sqrt(self.args.ttft_weight)
        res = [(c["tpot_sim"] - c["tpot_meas"]) / c["tpot_meas"] for c in cells]
        # TTFT is the prefill side's, which decode routers do not change: round robin's cells carry it.
        res += [w * (c["ttft_sim"] - c["ttft_meas"]) / c["ttft_meas"] for c in cells if c["router"] == "round_robin"]
        g = math.sqrt(self.args.gain_weight)
        for group in router_groups(cells):
            for router in ("eldr", "domain"):
                sim, meas = ec.gain_pct(group, router), ec.gain_pct(group, router, "tpot_meas")
                if sim is not None and meas is not None:
                    res.append(g * (sim - meas) / 100)
            # Which locality router leads: ELDR's P50 against the domain oracle's.
            by = {c["router"]: c for c in group}
            if "eldr" in by and "domain" in by:
                lead = lambda k: (by["domain"][k] - by["eldr"][k]) / by["domain"][k]  # noqa: E731
                res.append(g * (lead("tpot_sim") - lead("tpot_meas")))
        res += [UNFINISHED_PENALTY * c["unfinished"] / max(1, c["requests"]) for c in cells]
        if ablation_cells:  # last, so that a fit without ablations has the same residuals as before
            p = math.sqrt(self.args.ablation_p99_weight)
            for c in ablation_changes(cells, ablation_cells):
                res += [g * (c["p50_sim"] - c["p50_meas"]) / 100, p * (c["p99_sim"] - c["p99_meas"]) / 100]
            res += [UNFINISHED_PENALTY * c["unfinished"] / max(1, c["requests"]) for c in ablation_cells]
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
        # One pool for both: the ablation cells' runs fill the gaps the measured cells leave.
        cells = self.simulate(key, self.measured + self.ablations, f"{self.prefix}eval{n:03d}")
        cells, ablation_cells = cells[:len(self.measured)], cells[len(self.measured):]
        residuals = self.residuals(cells, ablation_cells)
        result = {"x": key, "cells": cells, "residuals": residuals,
                  "objective": float(np.sum(residuals ** 2)), "eval": n}
        if self.ablations:
            result["ablation_cells"] = ablation_cells
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
        # An ablation cell leaves with its rate: its round robin is held out too.
        keep_ablations = [i for i, r in enumerate(self.ablations) if r["rate_rps"] != rate]
        fold.ablations = [self.ablations[i] for i in keep_ablations]
        fold.cache = {}
        for key, r in self.cache.items():
            cells = [r["cells"][i] for i in keep]
            ablation_cells = [r["ablation_cells"][i] for i in keep_ablations] if fold.ablations else []
            res = fold.residuals(cells, ablation_cells)
            fold.cache[key] = dict(r, cells=cells, residuals=res, objective=float(np.sum(res ** 2)))
            if self.ablations:
                fold.cache[key]["ablation_cells"] = ablation_cells
        fold.evals = 0
        return fold

    def least_squares(self):
        """scipy's bounded least squares from self.start; raises BudgetExhausted past self.budget."""
        optimize.least_squares(lambda z: self.evaluate(z * self.scale)["residuals"], self.start / self.scale,
                               jac=self.jacobian, bounds=(self.lower / self.scale, self.upper / self.scale),
                               method="trf", x_scale=1.0, ftol=1e-4, xtol=1e-3, gtol=1e-6, max_nfev=10 * self.budget)


# ---- output ----------------------------------------------------------------------------------------
def objective_text(args):
    text = (f"sum over the cells of (relative error of TPOT P50)^2 + {args.ttft_weight:g} x (relative error of "
            f"TTFT P50{' of the round-robin cells' if getattr(args, 'routers', None) else ''})^2")
    if getattr(args, "routers", None):
        text += (f" + {args.gain_weight:g} x per main-study rate (error of ELDR's and the domain oracle's gain over "
                 f"the best load balancer, and of ELDR's lead over the oracle, in points / 100)^2")
    if getattr(args, "ablations", None):
        text += (f" + per ablation cell {args.gain_weight:g} x (error of its TPOT P50 change from its own round "
                 f"robin, in points / 100)^2 + {args.ablation_p99_weight:g} x (the same of TPOT P99)^2")
    return text


def optimiser_text(args):
    if args.method == "least_squares":
        return (f"scipy least_squares (trf, bounds; forward-difference Jacobian with a step of {args.diff_step:g} "
                f"in scaled coordinates), at most {args.max_evals} evaluations")
    return f"scipy Nelder-Mead with bounds, at most {args.max_evals} evaluations"


def data_text(args):
    shipped = sorted(map(ec.split_data_spec, args.data)) == sorted(map(ec.split_data_spec, ec.DEFAULT_DATA))
    files = ", ".join(ec.display_path(ec.split_data_spec(d)[1]) for d in args.data)
    what = "ELDR artifact; round-robin, 8P16D, task and language workloads" if shipped else "round-robin measurements"
    text = f"{files} ({what})"
    if getattr(args, "routers", None):
        kind, path = ec.split_data_spec(args.routers)
        text += (f" with {ec.display_path(path)} (the {kind + ' ' if kind else ''}main study of every router) in "
                 f"place of its round-robin rows")
    if getattr(args, "ablations", None):
        path = ec.split_data_spec(args.ablations)[1]
        text += f" and {ec.display_path(path)} (ELDR ablations, each against its own round robin)"
    return text


def held_text(fit):
    return f" (held: {', '.join(f'{n} {v:g}' for n, v in fit['held'].items())})" if fit["held"] else ""


def source_sentence(fit, args):
    b = fit["best"]
    groups = router_groups(b["cells"])
    if groups:  # 35 labels would drown the sentence: say which
        rr = [c["label"] for c in b["cells"] if c["router"] == "round_robin" and not any(c in g for g in groups)]
        cells = (f"{len(b['cells'])}: round robin at " + ", ".join(rr) + " and every router at " +
                 ", ".join(g[0]["label"] for g in groups))
    else:
        cells = ", ".join(c["label"] for c in b["cells"])
    if b.get("ablation_cells"):
        cells += f" and {len(b['ablation_cells'])} ablation cells at " + ", ".join(
            dict.fromkeys(f"{c['kind'] or ''} {c['rate']:g}".strip() for c in b["ablation_cells"]))
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


def fmt_gain(v):
    return "" if v is None else f"{v:+.1f}"


def router_table(fits, source="best"):
    """Per model and main-study (kind, rate): ELDR's and the domain oracle's gain over the best load
    balancer, simulated and measured, and the fastest router; then the summary of the gain errors.
    source "loro": the held-out rate's cells of each leave-one-rate-out fold."""
    header = ["model", "cell (req/s)", "ELDR gain sim %", "meas %", "err (points)", "domain gain sim %", "meas %",
              "fastest sim", "fastest meas"]
    rows, errors, right, cells_n = [], [], 0, 0
    for f in fits:
        cells = f["best"]["cells"] if source == "best" else [c for fold in f.get("loro", []) for c in fold["cells"]]
        for group in router_groups(cells):
            e_sim, e_meas = ec.gain_pct(group, "eldr"), ec.gain_pct(group, "eldr", "tpot_meas")
            d_sim, d_meas = ec.gain_pct(group, "domain"), ec.gain_pct(group, "domain", "tpot_meas")
            f_sim, f_meas = ec.fastest(group), fastest_measured(group)
            err = None if e_sim is None or e_meas is None else e_sim - e_meas
            if err is not None:
                errors.append(err)
            cells_n += 1
            right += f_sim in f_meas
            label = f"{group[0]['kind'] or ''} {group[0]['rate']:g}".strip()
            rows.append([f["model"], label, fmt_gain(e_sim), fmt_gain(e_meas), fmt_gain(err), fmt_gain(d_sim),
                         fmt_gain(d_meas), f_sim, "/".join(f_meas)])
    summary = None
    if errors:
        summary = {"gain_err_mean": float(np.mean(np.abs(errors))), "gain_err_max": float(np.max(np.abs(errors))),
                   "fastest_right": right, "cells": cells_n}
    return header, rows, summary


def fastest_measured(group):
    """Every router whose measured TPOT P50 is the lowest of its cell (a tie names both)."""
    best = min(c["tpot_meas"] for c in group)
    return [r for r in ec.ROUTERS for c in group if c["router"] == r and c["tpot_meas"] == best]


def router_summary_text(summary):
    return (f"ELDR's gain over the best load balancer off by {summary['gain_err_mean']:.2f} points on average, "
            f"{summary['gain_err_max']:.2f} at worst; the fastest router right in {summary['fastest_right']} of "
            f"{summary['cells']} cells")


def ablation_changes(cells, ablation_cells):
    """Per ablation cell, its TPOT P50 and P99 change (percent) from round robin: measured against its own
    worker group's round-robin row, simulated against the round-robin cell of its kind and rate among
    `cells` (every group's ran the same settings, so the simulator has one). A cell without that cell is
    left out."""
    rr = {(c["kind"], c["rate"]): c for c in cells if c["router"] == "round_robin"}
    out = []
    for c in ablation_cells:
        base = rr.get((c["kind"], c["rate"]))
        if base is None:
            continue
        out.append(dict(c, rr_tpot_sim=base["tpot_sim"], rr_tpot_p99_sim=base["tpot_p99_sim"],
                        p50_meas=ec.change_pct(c["tpot_meas"], c["baseline"]["tpot_p50_ms"]),
                        p50_sim=ec.change_pct(c["tpot_sim"], base["tpot_sim"]),
                        p99_meas=ec.change_pct(c["tpot_p99_meas"], c["baseline"]["tpot_p99_ms"]),
                        p99_sim=ec.change_pct(c["tpot_p99_sim"], base["tpot_p99_sim"])))
    return out


def ablation_rows(fits):
    """Every fit's ablation changes (ablation_changes) at its best point, each with its "model"."""
    return [dict(c, model=f["model"]) for f in fits
            for c in ablation_changes(f["best"]["cells"], f["best"].get("ablation_cells", []))]


def ablation_table(fits):
    """Per ablation cell: its TPOT P50 and P99 change from round robin, measured and simulated, and the
    errors in points; then their summary (None without ablation cells)."""
    header = ["model", "ablation", "setting", "P50 change meas %", "sim %", "err (points)", "P99 change meas %",
              "sim %", "err (points)"]
    rows, e50, e99 = [], [], []
    for c in ablation_rows(fits):
        e50.append(c["p50_sim"] - c["p50_meas"])
        e99.append(c["p99_sim"] - c["p99_meas"])
        rows.append([c["model"], c["ablation"], c["setting"], f"{c['p50_meas']:+.1f}", f"{c['p50_sim']:+.1f}",
                     f"{e50[-1]:+.1f}", f"{c['p99_meas']:+.1f}", f"{c['p99_sim']:+.1f}", f"{e99[-1]:+.1f}"])
    summary = None
    if rows:
        summary = {"p50_mean": float(np.mean(np.abs(e50))), "p50_max": float(np.max(np.abs(e50))),
                   "p99_mean": float(np.mean(np.abs(e99))), "p99_max": float(np.max(np.abs(e99))), "cells": len(rows)}
    return header, rows, summary


def ablation_summary_text(summary):
    return (f"TPOT P50 change from round robin off by {summary['p50_mean']:.2f} points on average over "
            f"{summary['cells']} ablation cells, {summary['p50_max']:.2f} at worst; P99 change by "
            f"{summary['p99_mean']:.2f}, {summary['p99_max']:.2f} at worst")


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


def report_csv_path(args):
    return os.path.splitext(args.report)[0] + ".csv"


def write_report(fits, args, fingerprint, outs):
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
    rh, rr, rs = router_table(fits)
    if rr:
        md += ["## Router gains over the best load balancer (main study)", "", router_summary_text(rs) + ".", "",
               ec.md_table(rh, rr, ["---", "---"] + ["---:"] * 5 + ["---", "---"]), ""]
        lh_, lr_, ls_ = router_table(fits, "loro")
        if lr_:
            md += ["## Router gains, leave one rate out", "", router_summary_text(ls_) + ".", "",
                   ec.md_table(lh_, lr_, ["---", "---"] + ["---:"] * 5 + ["---", "---"]), ""]
    ah, ar, asum = ablation_table(fits)
    if ar:
        md += ["## Ablations: TPOT change from each cell's own round robin", "", ablation_summary_text(asum) + ".", "",
               ec.md_table(ah, ar, ["---", "---", "---"] + ["---:"] * 6), ""]
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
    outs.add(args.report, "\n".join(md))
    csv_path = report_csv_path(args)
    header = ["model", "kind", "rate_rps", "tpot_p50_meas_ms", "tpot_p50_sim_ms", "tpot_err_pct", "ttft_p50_meas_ms",
              "ttft_p50_sim_ms", "ttft_err_pct", "tpot_p99_meas_ms", "tpot_p99_sim_ms", "distinct_experts_per_layer",
              "decode_batch_mean", "unfinished", "coefficients"]
    lines = []
    for fit in fits:
        coefs = ";".join(f"{n}={v!r}" for n, v in zip(fit["names"], fit["best"]["x"]))
        for c in fit["best"]["cells"]:
            lines.append([str(v) for v in [
                fit["model"], c["kind"] or "", f"{c['rate']:g}", c["tpot_meas"], f"{c['tpot_sim']:.4f}",
                f"{ec.rel_err_pct(c['tpot_sim'], c['tpot_meas']):.2f}", c["ttft_meas"], f"{c['ttft_sim']:.3f}",
                f"{ec.rel_err_pct(c['ttft_sim'], c['ttft_meas']):.2f}", c["tpot_p99_meas"], f"{c['tpot_p99_sim']:.4f}",
                f"{c['distinct']:.2f}", f"{c['batch']:.2f}", c["unfinished"], coefs]])
    outs.add_csv(csv_path, header, lines)
    return csv_path


def write_model(fit, args, outs):
    """Update calibration.<hardware> of models/<model>.json in place, keeping everything else."""
    path = ec.model_file(fit["model"])
    with open(path) as f:
        original = f.read()
    doc = json.loads(original)
    reformat = json.dumps(doc, indent=2, ensure_ascii=False) + "\n" != original
    # Existing keys keep their place; missing ones are appended.
    doc.setdefault("calibration", {})[args.hardware] = fitted_block(fit, args)
    outs.add(path, json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    if reformat:
        print(f"{PROG}: note: {path} was not in json.dumps(indent=2) layout; it was re-indented", file=sys.stderr)
    return path


def fitted_block(fit, args):
    """The model file's calibration.<hardware> block with the fitted coefficients and this fit's source."""
    doc = ec.load_model(fit["model"])
    cal = dict(doc.get("calibration", {}).get(args.hardware, {}))
    cal.update({n: v for n, v in fitted_values(fit).items() if n not in ROUTING})
    cal.pop("source", None)  # last, after the coefficients
    cal["source"] = source_sentence(fit, args)
    return cal


def fitted_values(fit):
    return dict(fit["held"], **dict(zip(fit["names"], fit["best"]["x"])))


def write_routing_profile(fit, args, outs):
    """Update the task kind's fitted routing inputs (and the language topics' tied strength) of
    models/routing/<model>.json in place; its source gains a sentence saying so."""
    values = {n: v for n, v in fitted_values(fit).items() if n in ROUTING}
    if not values:
        return None
    path = ec.routing_profile_file(fit["model"])
    with open(path) as f:
        doc = json.load(f)
    doc = with_routing_inputs(doc, values)
    fitted = ", ".join(f"{n} {v:g}" for n, v in values.items())
    note = (f" {datetime.date.today().isoformat()}: the task kind's {', '.join(n.split('.')[1] for n in values)} "
            f"fitted with the cost coefficients to the main study of every router "
            f"(analysis/fit_cost.py --routers, docs/calibration.md section 3): {fitted}; the language "
            f"kind's shared topics take the task label strength.")
    doc["source"] = doc.get("source", "").split(" Router fit ")[0] + " Router fit" + note
    outs.add(path, json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    return path


def write_calibration_out(fits, args, outs):
    """--calibration-out: {"model", "hardware", "calibration": {hardware: block}} of one fitted model, the
    block to paste into models/<model>.json's "calibration" (eldrsim calibrate writes it)."""
    f = fits[0]
    doc = {"model": f["model"], "hardware": args.hardware, "calibration": {args.hardware: fitted_block(f, args)}}
    outs.add(args.calibration_out, json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    return args.calibration_out


def check_ablation_baselines(model, rows, ablations, spec):
    """Each ablation cell's simulated round robin is the measured round-robin cell of its kind and rate
    (the same settings): it must be among the model's measured rows. A model without ablation rows is fitted
    without them (a warning)."""
    path = ec.split_data_spec(spec)[1]
    if not ablations:
        ec.warn(f"{path}: no ablation rows for {model}: it is fitted without them")
    have = {(r["kind"], r["rate_rps"]) for r in rows if r["policy"] == "round_robin"}
    for a in ablations:
        if (a["kind"], a["rate_rps"]) not in have:
            raise ec.Fatal(f"{path}: line {a['line']}: no measured round_robin cell of {model} at "
                           f"{ec.cell_label(dict(a, policy='round_robin', overrides=None))} req/s to simulate this "
                           f"cell's round robin with (add that rate to --data or --routers)")


def with_router_rows(measured, studies):
    """Each model's rows with the main study's kind replaced by its rows of every router."""
    out = {}
    for model, rows in measured.items():
        study = studies.get(model, [])
        kinds = {r["kind"] for r in study}
        out[model] = sorted([r for r in rows if r["kind"] not in kinds] + study,
                            key=lambda d: (d["kind"] or "", d["rate_rps"], d["policy"] != "round_robin", d["policy"]))
    return out


def main(argv=None):
    ap = ec.ArgumentParser(prog="fit_cost.py", description=__doc__.split("\n\n")[0],
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
    ap.add_argument("--routers", nargs="?", const=ec.DEFAULT_ROUTER_DATA, metavar="[KIND=]PATH",
                    help="also fit to the main study of every decode router (default when given without a "
                         "path: task=traces/calibration/main_task_all_routers.csv): its rows replace that "
                         "kind's round-robin rows, the residuals gain ELDR's and the domain oracle's gains over "
                         "the best load balancer, and the task kind's routing inputs (" + ", ".join(ROUTING) +
                         ") are fitted too")
    ap.add_argument("--gain-weight", type=float, default=2.0,
                    help="weight of the router-gain errors (points / 100) with --routers (default 2: a point of "
                         "gain counts as 1.4%% of TPOT)")
    ap.add_argument("--ablations", nargs="?", const=ec.DEFAULT_ABLATION_DATA, metavar="[KIND=]PATH",
                    help="with --routers, also fit to the ELDR ablations (default when given without a path: "
                         "task=traces/calibration/ablations_task.csv): each ELDR cell runs with its setting's "
                         "overrides, and the residuals gain the error of its TPOT P50 change from its own "
                         "round robin (weight --gain-weight) and of its P99 change (--ablation-p99-weight)")
    ap.add_argument("--ablation-p99-weight", type=float, default=0.5,
                    help="weight of the ablation cells' P99-change errors (points / 100) with --ablations "
                         "(default 0.5: a tail is noisier than a median)")
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
    if args.ablation_p99_weight < 0:
        ap.error("--ablation-p99-weight must be >= 0")
    if args.ablations and not args.routers:
        ap.error("--ablations needs --routers (the ablations inform the routing inputs, fitted only with it)")
    models = ec.parse_models(args.models)
    if args.calibration_out:
        args.calibration_out = os.path.abspath(args.calibration_out)
        if len(models) != 1:
            ap.error("--calibration-out needs exactly one model in --models")
    for name, v in zip(CORE, args.start or []):  # the fit's bounds: a start outside would be moved silently
        lo, hi = PARAMS[name][1], PARAMS[name][2]
        if not lo <= v <= hi:
            raise ec.Fatal(f"--start: {name} must be {f'between {lo!r} and {hi!r}' if hi < np.inf else f'at least {lo!r}'}"
                           f", got {v!r}")
    ec.check_input_file(args.config, "config")
    measured = ec.load_measured(args.data)
    if args.routers:
        measured = with_router_rows(measured, ec.load_measured(args.routers, routers=True))
    ablations = ec.load_ablations(args.ablations) if args.ablations else {}
    for m in models:
        for r in measured.get(m, []):  # each evaluation runs rate x --duration requests: checked before the first
            if r["rate_rps"] * args.duration > ec.MAX_RUN_REQUESTS:
                raise ec.Fatal(f"--duration: {args.duration:g} s at {r['rate_rps']:g} req/s ({r['file']}: line "
                               f"{r['line']}) is more than the {ec.MAX_RUN_REQUESTS} requests a run may hold; give a "
                               f"shorter --duration")
        if m not in measured:
            files = " ".join(ec.split_data_spec(d)[1] for d in args.data)
            have = ", ".join(sorted(measured)) or "none"
            raise ec.Fatal(f"{files}: model: no round_robin rows for '{m}' (has: {have})")
        ec.load_model(m)
        ec.warn_single_rate(m, measured[m])
        if args.ablations:
            check_ablation_baselines(m, measured[m], ablations.get(m, []), args.ablations)
    # Every output is checked before the fit, which may take an hour: a fit is never lost at its end.
    outputs = [(args.calibration_out, "calibration block")] if args.calibration_out else []  # --out first
    outputs += [(args.report, "report"), (report_csv_path(args), "report CSV")]
    if args.write:
        outputs += [(ec.model_file(m), "model file") for m in models]
        if args.routers:
            outputs += [(ec.routing_profile_file(m), "routing profile") for m in models]
    for path, what in outputs:
        ec.check_output_path(path, what)
    seen = {}
    for path, what in outputs:
        other = seen.setdefault(os.path.realpath(path), what)
        if other != what:
            raise ec.Fatal(f"{path}: {what}: also the {other}; give the outputs different paths")
    if args.keep_runs:
        ec.set_kept(f"no files written, earlier ones intact; the runs so far are in {args.keep_runs}")
    ec.wait_for_binary(args.eldrsim, prog=PROG)
    fingerprint = ec.binary_fingerprint(args.eldrsim)
    fits = []
    with ec.ScratchDir(args.keep_runs, prefix="eldr-fit-") as scratch:
        for m in models:
            fits.append(ModelFit(m, args, measured[m], scratch, fingerprint, ablations.get(m, [])).fit())
    now = ec.binary_fingerprint(args.eldrsim) if os.path.isfile(args.eldrsim) else "missing"
    if now != fingerprint:
        ec.warn(f"{args.eldrsim} changed during the fit ({fingerprint} -> {now}); rerun for a consistent result")

    # All outputs staged beside their targets, then renamed together: old files or new ones, never a mix.
    outs = ec.OutputSet()
    csv_path = write_report(fits, args, fingerprint, outs)
    written = [f"report: {args.report} and {csv_path}"]
    if args.calibration_out:
        written.append(f"calibration block: {write_calibration_out(fits, args, outs)}")
    if args.write:
        for f in fits:
            written.append(f"updated {write_model(f, args, outs)}")
            profile = write_routing_profile(f, args, outs)
            if profile:
                written.append(f"updated {profile}")
    outs.commit()

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
    rh, rr, rs = router_table(fits)
    if rr:
        print()
        print(ec.text_table(rh, rr))
        print(f"in sample: {router_summary_text(rs)}")
        lh, lr, ls = router_table(fits, "loro")
        if lr:
            print(f"leave one rate out: {router_summary_text(ls)}")
    ah, ar, asum = ablation_table(fits)
    if ar:
        print()
        print(ec.text_table(ah, ar))
        print(f"ablations: {ablation_summary_text(asum)}")
    print("\n".join(written))
    return 0


if __name__ == "__main__":
    sys.exit(ec.run_main(main))
