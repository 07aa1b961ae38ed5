#include "sim/app/commands.hpp"
#include "sim/cluster/sim_log.hpp"
#include "sim/cluster/simulation.hpp"
#include "sim/common/input_error.hpp"
#include "sim/common/result_dir.hpp"
#include "sim/config/experiment.hpp"
#include "sim/gating/gate_source.hpp"
#include "sim/gating/gating_source_factory.hpp"
#include "sim/metrics/invariants.hpp"
#include "sim/metrics/result_writer.hpp"
#include "sim/routing/compose/endpoint_picker_config.hpp"
#include "sim/routing/registry/router_registry.hpp"
#include "sim/workload/workload_factory.hpp"

#include <cstdio>
#include <filesystem>
#include <memory>
#include <unistd.h>

namespace eldr::app {

namespace {

struct RunOptions {
  std::string config;
  std::string router;
  std::string scheduler;  // an llm-d EndpointPickerConfig: router composed, composed.scheduler
  double rate   = 0;
  long requests = 0;
  long seed     = -1;
  std::string out;
  std::vector<std::string> sets;
  bool quiet     = false;
  bool steps     = false;
  bool decisions = false;
  std::string routing_cache;
  std::vector<std::string> log;  // SimGrid's --log and --cfg, passed on (sim_log.hpp)
  std::vector<std::string> cfg;
};

std::vector<OptionOverride> collect_overrides(const RunOptions& o)
{
  std::vector<OptionOverride> v;
  if (!o.scheduler.empty()) {
    // Relative to where the command runs, like the config's own path.
    v.push_back({"--scheduler", {"router", Json("composed").dump()}});
    const std::string file = std::filesystem::absolute(o.scheduler).string();
    v.push_back({"--scheduler", {"composed.scheduler", Json(file).dump()}});
    // llm-d runs a P/D file's prefill profile too.
    if (has_prefill_profile(file))
      v.push_back({"--scheduler", {"prefill_router.scheduler", Json(file).dump()}});
  }
  if (!o.router.empty())
    v.push_back({"--router", {"router", Json(o.router).dump()}});
  if (o.rate > 0)
    v.push_back({"--rate", {"workload.rate_rps", Json(o.rate).dump()}});
  if (o.requests > 0)
    v.push_back({"--requests", {"workload.measured_requests", Json(o.requests).dump()}});
  if (o.seed >= 0)
    v.push_back({"--seed", {"seed", Json(o.seed).dump()}});
  if (o.steps)
    v.push_back({"--steps", {"output.steps_csv", "true"}});
  if (o.decisions)
    v.push_back({"--decisions", {"output.decision_log", "true"}});
  return option_overrides(o.sets, v);
}

int run(const RunOptions& o)
{
  install_interrupt_handler();
  // Before any work: SimGrid would abort on some of these, and only once the simulation starts.
  for (const std::string& s : o.log)
    check_log_setting(s);
  for (const std::string& s : o.cfg)
    check_cfg_setting(s);
  Experiment x    = load_with_options(o.config, collect_overrides(o));
  std::string out = o.out;
  if (out.empty())
    out = "results/" + std::filesystem::path(o.config).stem().string() + "-" + x.router;
  // The output is checked (and its staging directory made) before simulating; results appear whole.
  check_output_apart(out, "--out", experiment_inputs(x));
  StagedDirectory staged(out);
  Workload w   = make_workload(x);
  auto routing = make_gating_source(x, w, o.routing_cache);
  set_gate_cache_dir(o.routing_cache);  // the gate variants' values, kept beside the sources
  long measured = 0;
  for (const Request& r : w.requests)
    measured += r.measured;
  if (!o.quiet)
    std::fprintf(stderr,
                 "eldrsim: %s, %s, %s, %d prefill + %d decode, %.0f req/s, %ld measured + %ld warm-up requests\n",
                 o.config.c_str(), x.model.name.c_str(), x.router.c_str(), x.topology.prefill.instances,
                 x.topology.decode.instances, x.workload.rate_rps, measured, long(w.requests.size()) - measured);
  // The progress line is rewritten in place: on a terminal only (a log would get it \r-joined).
  const bool progress = !o.quiet && ::isatty(2);
  RunRecorder rec     = [&] {
    try {
      return run_simulation(x, w, *routing, {.progress = progress, .log = o.log, .cfg = o.cfg});
    } catch (...) {
      if (progress)
        std::fputc('\n', stderr);  // the error goes on a line of its own, not onto the progress line
      throw;
    }
  }();
  if (auto broken = check_run_invariants(x, w, rec, rec.stopped_at_horizon)) {
    std::fprintf(stderr, "eldrsim: internal error: invariant violated: %s (no results written)\n", broken->c_str());
    return 1;
  }
  write_staged(staged.staging(), out, [&] { write_results(staged.staging(), x, w, rec); });
  staged.commit();
  RunSummary s = summarize_run(x, w, rec);
  if (!o.quiet && s.tpot_ms.count == 0)
    std::printf("%s: no measured request finished (%ld unfinished): no TPOT or TTFT -> %s\n", x.router.c_str(),
                s.unfinished, out.c_str());
  else if (!o.quiet)
    std::printf(
        "%s: TPOT p50 %.2f ms p99 %.2f ms, TTFT p50 %.1f ms, %.1f distinct experts/layer, %ld unfinished -> %s\n",
        x.router.c_str(), s.tpot_ms.p50, s.tpot_ms.p99, s.ttft_ms.p50, s.distinct_experts_per_layer_mean, s.unfinished,
        out.c_str());
  return s.unfinished == 0 ? 0 : 3;
}

}  // namespace

Command add_run_command(CLI::App& app)
{
  auto o    = std::make_shared<RunOptions>();
  auto* sub = app.add_subcommand("run", "Simulate one experiment and write summary.json and requests.csv");
  sub->add_option("config", o->config, "Experiment config (JSON), e.g. configs/default.json")->required();
  std::string routers;
  for (const auto& n : decode_router_names())
    routers += (routers.empty() ? "" : ", ") + n;
  sub->add_option("--router", o->router,
                  "Decode router: " + routers + " (`eldrsim routers --describe` says what each does)");
  sub->add_option("--scheduler", o->scheduler,
                  "An llm-d EndpointPickerConfig (YAML) whose decode profile routes decode (router composed with "
                  "composed.scheduler) and, in a P/D file, whose prefill profile routes prefill "
                  "(prefill_router.scheduler) (docs/routing-policies.md)");
  sub->add_option("--rate", o->rate, "Measured arrival rate, requests/s (workload.rate_rps)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--requests", o->requests, "Measured requests (workload.measured_requests)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--seed", o->seed, "Run seed")->check(CLI::NonNegativeNumber);
  sub->add_option("--out", o->out, "Output directory (default results/<config>-<router>)");
  sub->add_option("--set", o->sets,
                  "Override a config key by dotted path, KEY=VALUE (repeatable), "
                  "e.g. --set model=gpt-oss-120b --set workload.rate_rps=80")
      ->allow_extra_args(false);
  sub->add_flag("--steps", o->steps, "Also write steps.csv (one row per decode step)");
  sub->add_flag("--decisions", o->decisions,
                "Also write decisions.csv (one row per decode routing decision: loads seen, choice; "
                "for a router that scores the workers: the scores, the band it kept, the candidates)");
  sub->add_flag("--quiet,-q", o->quiet, "No progress or summary line");
  sub->add_option("--routing-cache", o->routing_cache,
                  "Directory where generated routing sources (and their gate values) are kept for other runs with the "
                  "same inputs (sweep "
                  "passes one to its points); results are the same with or without it");
  sub->add_option("--log", o->log,
                  "SimGrid log setting (repeatable), e.g. --log=eldr.thres:verbose: every step of each request "
                  "with its simulated time, on stderr (docs/watching-a-run.md); default: warnings only")
      ->allow_extra_args(false);
  sub->add_option("--cfg", o->cfg, "SimGrid config setting KEY:VALUE (repeatable), e.g. --cfg=network/model:CM02")
      ->allow_extra_args(false);
  return {sub, [o] { return run(*o); }};
}

}  // namespace eldr::app
