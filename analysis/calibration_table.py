#!/usr/bin/python3
"""Simulated vs measured round-robin latency, 15 cells, at full measurement length.

Runs `eldrsim run CONFIG --router round_robin --rate R` for each calibrated model (qwen3-30b-a3b,
gpt-oss-120b, gemma-4-26b-a4b) at each measured rate (20..100 req/s) with the model files as they are
now (models/<model>.json, calibration.<hardware>), --jobs runs at a time, and compares TPOT P50, P95,
P99 and TTFT P50 with traces/calibration/rr_task_tpot.csv. Runs are as long as the
measurement: 120 s of Poisson traffic after a 3840-request warm-up at 64 req/s (passed explicitly, so
the table does not depend on what configs/default.json happens to say). Fixed seed: deterministic.

Prints the table and writes it as markdown to --out (default results/calibration/table.md) and as CSV
beside it (same stem, .csv). Run after `analysis/fit_cost.py --write`.

Example:
  /usr/bin/python3 analysis/calibration_table.py
  /usr/bin/python3 analysis/calibration_table.py --models gpt-oss-120b --keep-runs results/calibration/runs
"""
import argparse
import datetime
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import eldr_common as ec  # noqa: E402

PROG = "calibration_table"
METRICS = [("TPOT P50", "tpot_ms", "p50", "tpot_p50_ms"), ("TPOT P95", "tpot_ms", "p95", "tpot_p95_ms"),
           ("TPOT P99", "tpot_ms", "p99", "tpot_p99_ms"), ("TTFT P50", "ttft_ms", "p50", "ttft_p50_ms")]


def main(argv=None):
    ap = argparse.ArgumentParser(prog="calibration_table.py", description=__doc__.split("\n\n")[0],
                                 epilog="\n\n".join(__doc__.split("\n\n")[1:]),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", default=[",".join(ec.CALIBRATED_MODELS)],
                    help=f"models, comma- or space-separated (default: {','.join(ec.CALIBRATED_MODELS)})")
    ap.add_argument("--eldrsim", default=ec.DEFAULT_ELDRSIM, help="simulator binary (default: build/eldrsim)")
    ap.add_argument("--jobs", type=int, default=ec.default_jobs(), help="parallel simulator runs (default: 2)")
    ap.add_argument("--duration", type=float, default=ec.MEASURED_DURATION_S,
                    help=f"seconds of measured traffic (default {ec.MEASURED_DURATION_S}, as measured)")
    ap.add_argument("--warmup", type=int, default=ec.MEASURED_WARMUP_REQUESTS,
                    help=f"warm-up requests (default {ec.MEASURED_WARMUP_REQUESTS}, as measured)")
    ap.add_argument("--seed", type=int, default=1, help="simulation seed (default 1)")
    ap.add_argument("--config", default=ec.DEFAULT_CONFIG, help="experiment config (default configs/default.json)")
    ap.add_argument("--hardware", default="mi300x", help="calibration block to report (default mi300x)")
    ap.add_argument("--data", default=ec.DEFAULT_DATA,
                    help="measured curve (default traces/calibration/rr_task_tpot.csv)")
    ap.add_argument("--out", default=os.path.join(ec.REPO, "results", "calibration", "table.md"),
                    help="markdown output; a .csv with the same stem is written beside it "
                         "(default results/calibration/table.md)")
    ap.add_argument("--keep-runs", metavar="DIR",
                    help="keep the runs' summary.json and requests.csv in DIR/<model>/rate<R>")
    args = ap.parse_args(argv)
    for p in ("eldrsim", "config", "data", "out"):
        setattr(args, p, os.path.abspath(getattr(args, p)))
    if args.jobs < 1 or args.duration <= 0 or args.warmup < 0:
        ap.error("--jobs must be >= 1, --duration > 0, --warmup >= 0")
    models = ec.parse_models(args.models)

    t0 = time.time()
    try:
        if not os.path.isfile(args.config):
            raise ec.Fatal(f"config not found: {args.config}")
        measured = ec.load_measured(args.data)
        cal = {}
        for m in models:
            if m not in measured:
                raise ec.Fatal(f"model '{m}' has no rows in {args.data} (has: {', '.join(sorted(measured))})")
            c = ec.load_model(m).get("calibration", {}).get(args.hardware)
            if c is None:
                raise ec.Fatal(f"{ec.model_file(m)}: no calibration.{args.hardware} block")
            cal[m] = c
        ec.wait_for_binary(args.eldrsim, prog=PROG)
        fingerprint = ec.binary_fingerprint(args.eldrsim)
        cells = [(m, r) for m in models for r in measured[m]]
        done = [0]

        def task(m, r, scratch):
            out = os.path.join(scratch, m, f"rate{r['rate_rps']:g}")
            t = time.time()
            s = ec.run_eldrsim(args.eldrsim, args.config, out, r["rate_rps"], m, args.duration, args.warmup,
                               args.seed)
            done[0] += 1
            print(f"[{done[0]:>2}/{len(cells)}] {m} {r['rate_rps']:g} req/s: TPOT P50 {s['tpot_ms']['p50']:.2f} ms "
                  f"(measured {r['tpot_p50_ms']:.2f}), TTFT P50 {s['ttft_ms']['p50']:.1f} ms "
                  f"(measured {r['ttft_p50_ms']:.1f})  {time.time() - t:.1f}s", file=sys.stderr, flush=True)
            return s

        with ec.ScratchDir(args.keep_runs, prefix="eldr-table-") as scratch:
            # Highest rates first: they take longest, so the pool finishes together.
            order = sorted(range(len(cells)), key=lambda i: -cells[i][1]["rate_rps"])
            results = ec.run_many([lambda i=i: task(*cells[i], scratch) for i in order], args.jobs)
            summaries = [None] * len(cells)
            for i, s in zip(order, results):
                summaries[i] = s
        if ec.binary_fingerprint(args.eldrsim) != fingerprint:
            print(f"{PROG}: warning: {args.eldrsim} changed during the runs; rerun for a consistent table",
                  file=sys.stderr)
    except ec.Fatal as e:
        ec.die(PROG, e, e.code)
    except KeyboardInterrupt:
        ec.die(PROG, "interrupted", 130)

    # ---- table -----------------------------------------------------------------------------------
    header = ["model", "rate"]
    for label, *_ in METRICS:
        header += [f"{label} meas", f"{label} sim", "err %"]
    header += ["experts/layer", "batch"]
    rows, csv_lines, errs = [], [], {}
    csv_lines.append("model,rate_rps," + ",".join(
        f"{k}_meas,{k}_sim,{k}_err_pct" for _, _, _, k in METRICS)
        + ",distinct_experts_per_layer,decode_batch_mean,unfinished,measured_requests")
    any_unfinished = False
    for (m, r), s in zip(cells, summaries):
        row = [m, f"{r['rate_rps']:g}"]
        cv = [m, f"{r['rate_rps']:g}"]
        for label, key, q, col in METRICS:
            sim, meas = s[key][q], r[col]
            e = ec.rel_err_pct(sim, meas)
            errs.setdefault((m, label), []).append(e)
            digits = 1 if key == "ttft_ms" else 2
            row += [f"{meas:.{digits}f}", f"{sim:.{digits}f}", f"{e:+.1f}"]
            cv += [f"{meas:g}", f"{sim:.4f}", f"{e:.2f}"]
        unf = s.get("unfinished", 0)
        any_unfinished |= bool(unf)
        row += [f"{s.get('distinct_experts_per_layer_mean', float('nan')):.1f}",
                f"{s.get('decode_batch_mean', float('nan')):.1f}" + (f" ({unf} unfinished)" if unf else "")]
        cv += [f"{s.get('distinct_experts_per_layer_mean', float('nan')):.3f}",
               f"{s.get('decode_batch_mean', float('nan')):.3f}", str(unf), str(s.get("requests", ""))]
        rows.append(row)
        csv_lines.append(",".join(cv))

    sum_header = ["model", "decode_bw_efficiency", "step_overhead_ms", "prefill_overhead_ms"] + \
        [f"{label} mean abs err %" for label, *_ in METRICS] + ["TPOT P50 max abs err %"]
    sum_rows = []
    for m in models:
        c = cal[m]
        sum_rows.append([m, f"{c['decode_bw_efficiency']:g}", f"{c['step_overhead_ms']:g}",
                         f"{c['prefill_overhead_ms']:g}"]
                        + [f"{sum(abs(e) for e in errs[(m, label)]) / len(errs[(m, label)]):.1f}"
                           for label, *_ in METRICS]
                        + [f"{max(abs(e) for e in errs[(m, 'TPOT P50')]):.1f}"])

    print(ec.text_table(header, rows))
    print()
    print(ec.text_table(sum_header, sum_rows))

    md = [
        "# Calibration: simulated vs measured, round-robin, 8P16D",
        "",
        f"Written by `analysis/calibration_table.py` on {datetime.datetime.now().strftime('%Y-%m-%d %H:%M')}.",
        f"Measured: `{ec.display_path(args.data)}` (ELDR artifact, single measurements). Simulated: "
        f"`{ec.display_path(args.eldrsim)}` (sha256 {fingerprint}), `{ec.display_path(args.config)}`, round_robin, "
        f"{args.duration:g} s of Poisson traffic after {args.warmup} warm-up requests, seed {args.seed}. "
        "Errors are (simulated - measured) / measured. 'experts/layer' is the simulated mean number of distinct "
        "experts per layer per decode step; 'batch' the simulated mean decode batch.",
        "",
        ec.md_table(header, rows, ["---"] + ["---:"] * (len(header) - 1)),
        "",
        "Coefficients used (`models/<model>.json`, `calibration." + args.hardware + "`) and mean errors:",
        "",
        ec.md_table(sum_header, sum_rows, ["---"] + ["---:"] * (len(sum_header) - 1)),
        "",
    ]
    for m in models:
        md.append(f"- {m}: {cal[m].get('source', '(no source)')}")
    if any_unfinished:
        md += ["", "**Some runs left requests unfinished; their percentiles cover finished requests only.**"]
    md.append("")
    ec.write_atomic(args.out, "\n".join(md))
    csv_path = os.path.splitext(args.out)[0] + ".csv"
    ec.write_atomic(csv_path, "\n".join(csv_lines) + "\n")
    print(f"\n{len(cells)} runs in {time.time() - t0:.0f} s; wrote {args.out} and {csv_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
