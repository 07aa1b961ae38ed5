// eldrsim sweep: a grid of experiments, each point its own `eldrsim run` process (SimGrid allows one
// engine per process), N at a time, resumable, with a combined CSV; or a Slurm job array doing the same.
#include "sim/app/commands.hpp"
#include "sim/app/process_pool.hpp"
#include "sim/app/sweep_parts.hpp"
#include "sim/common/output_lock.hpp"
#include "sim/common/result_dir.hpp"

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace eldr::app {

namespace fs = std::filesystem;

namespace {

std::string out_dir(const SweepCli& o)
{
  return o.out.empty() ? "results/" + fs::path(o.file).stem().string() : o.out;
}

int sweep(const SweepCli& o)
{
  install_interrupt_handler();  // until run_tasks takes the signals: one line, exit 128 + the signal
  if (o.report && !o.emit_slurm.empty())
    throw InputError("--report", "", "not with --emit-slurm: run `eldrsim report OUT` after the merge step");
  SweepOptions so;
  so.seeds        = o.seeds;
  so.sets         = parse_sets(o.sets);
  std::string out = out_dir(o);
  if (!o.quiet && !o.list) {
    // The plan at once (checking every point's config can take a while on a large grid).
    SweepOptions quick     = so;
    quick.validate_points  = false;
    const SweepPlan sketch = load_sweep(o.file, quick);
    std::fprintf(stderr, "sweep: %s: %s -> %s; checking their configs\n", o.file.c_str(),
                 count_of(sketch.points.size(), "point").c_str(), (o.emit_slurm.empty() ? out : o.emit_slurm).c_str());
  }
  SweepPlan plan = load_sweep(o.file, so);
  if (o.list) {
    for (size_t i = 0; i < plan.points.size(); ++i)
      std::printf("%zu %s/%s%s\n", i, plan.points[i].sweep.c_str(), plan.points[i].name.c_str(),
                  point_done(out, plan.points[i]) ? " (done)" : "");
    return 0;
  }
  if (!o.emit_slurm.empty()) {
    ensure_writable_directory(o.emit_slurm);
    return emit_slurm(o, plan, out);
  }
  check_outputs(plan, out, o.report);
  ensure_writable_directory(out);
  // One sweep writes OUT at a time; the tasks of a Slurm array (--point) and merges share it.
  OutputLock lock(out, "--out", "eldrsim sweep",
                  o.point >= 0 || o.merge ? OutputLock::Mode::shared : OutputLock::Mode::exclusive);
  if (o.merge) {
    const size_t missing = merge(plan, out, o.quiet);
    if (missing == 0 && o.report) {
      lock.release();
      exec_analysis_script(project_root(out), "report.py", {out});
    }
    return missing == 0 ? 0 : 1;
  }
  int jobs = o.jobs > 0 ? o.jobs : usable_cpus();
  if (o.point >= 0) {
    if (size_t(o.point) >= plan.points.size())
      throw InputError("--point", "",
                       std::to_string(o.point) + " is past the last point (" + std::to_string(plan.points.size() - 1) +
                           ")");
  }
  std::vector<size_t> which;
  if (o.point >= 0)
    which.push_back(size_t(o.point));
  for (size_t i = 0; o.point < 0 && i < plan.points.size(); ++i)
    which.push_back(i);
  // Outside run_tasks (which takes the signals itself) the handler says this: points are published
  // whole, so whatever finished is kept.
  const InterruptNote note(out + ": finished points kept (the same command resumes)");
  size_t failures = 0;
  try {
    failures = run_points(plan, which, out, o.point >= 0 ? 1 : jobs, !o.no_fit, !o.own_warmups, o.quiet);
  } catch (const Interrupted& i) {
    size_t done = 0;
    for (size_t k : which)
      done += point_done(out, plan.points[k]);
    end_progress_line();
    std::fprintf(stderr,
                 "eldrsim: error: interrupted by %s: %s: %zu of %zu points done, kept (the same command resumes)\n",
                 signal_name(i.signal).c_str(), out.c_str(), done, which.size());
    return 128 + i.signal;
  } catch (...) {
    end_progress_line();  // main prints the error on a line of its own
    throw;
  }
  if (o.point >= 0)
    return failures == 0 ? 0 : 1;
  size_t missing = merge(plan, out, o.quiet);
  if (failures > 0)  // even when quiet: errors never are
    std::fprintf(stderr, "sweep: %s failed (logs: <point>.failed.log beside their directories)%s\n",
                 count_of(failures, "point").c_str(),
                 o.report ? "; no report written (fix them and rerun; `eldrsim report OUT` reports what finished)"
                          : "");
  if (failures == 0 && missing == 0 && o.report) {
    lock.release();
    exec_analysis_script(project_root(out), "report.py", {out});  // its exit status is the command's
  }
  return failures == 0 && missing == 0 ? 0 : 1;
}

}  // namespace

Command add_sweep_command(CLI::App& app)
{
  auto o    = std::make_shared<SweepCli>();
  auto* sub = app.add_subcommand(
      "sweep", "Run a grid of experiments (a sweep file, docs/experiments.md), each point in its own process, N at a "
               "time; resumable; writes OUT/combined.csv");
  sub->add_option("sweep", o->file, "Sweep file (JSON), e.g. configs/paper/all.json")->required();
  sub->add_option("--out,-o", o->out, "Results directory (default results/<sweep file stem>)");
  sub->add_option("-j,--jobs", o->jobs, "Points run at once (default: the CPUs this process may use)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--seeds", o->seeds, "Run every point with seeds 1..N; combined_seeds.csv has mean and 95% interval")
      ->check(CLI::Range(1, 1000));
  sub->add_option("--set", o->sets,
                  "Override a config key in every point, KEY=VALUE (repeatable; the sweep file's own "
                  "set and grid win)")
      ->allow_extra_args(false);
  sub->add_flag("--list", o->list, "List the points (index, directory) and whether they are done; run nothing");
  sub->add_flag("--merge", o->merge, "Only write combined.csv from the results present (exit 1 if some are missing)");
  sub->add_option("--point", o->point, "Run only the point with this index (as a Slurm array task does)")
      ->check(CLI::NonNegativeNumber);
  sub->add_flag("--report", o->report,
                "Once every point is done, write the report (eldrsim report OUT: OUT/report/report.md and .html)")
      ->excludes(sub->get_option("--list"))
      ->excludes(sub->get_option("--point"));
  sub->add_flag("--no-fit", o->no_fit,
                "Do not share routers' offline fits between points: every point fits on its own");
  sub->add_flag("--own-warmups", o->own_warmups,
                "Every point simulates its own warm-up (otherwise points that differ only in rate, duration or "
                "measured requests share one; the results are the same)");
  sub->add_option(
      "--emit-slurm", o->emit_slurm,
      "Write a Slurm job array (points.sbatch), a merge step (merge.sbatch) and submit.sh into DIR; run nothing");
  sub->add_option("--slurm-options", o->slurm_options,
                  "Extra #SBATCH lines for --emit-slurm, separated by ';', e.g. '--partition=cpu;--time=00:10:00'");
  sub->add_flag("--quiet,-q", o->quiet, "No progress lines (failures are still printed)");
  return {sub, [o] { return sweep(*o); }};
}

}  // namespace eldr::app
