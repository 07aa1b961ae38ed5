#include "sim/app/commands.hpp"
#include "sim/common/atomic_file.hpp"
#include "sim/common/result_dir.hpp"
#include "sim/gating/gating_source_factory.hpp"
#include "sim/routing/eldr/eldr_router.hpp"
#include "sim/workload/workload_factory.hpp"

#include <cstdio>
#include <filesystem>
#include <memory>

namespace eldr::app {

namespace {

struct FitOptions {
  std::string config;
  std::string out;
  std::vector<std::string> sets;
  std::string routing_cache;
  bool quiet = false;
};

int fit(const FitOptions& o)
{
  check_output_file(o.out);  // before the fit, not after it
  std::error_code ec;
  const InterruptNote note(o.out + ": not written" +
                               (std::filesystem::exists(o.out, ec) ? ", the earlier file intact" : ""),
                           {atomic_temporary(o.out)});
  Experiment x = load_with_options(o.config, option_overrides(o.sets, {}));
  check_output_apart(o.out, "--out", experiment_inputs(x));
  Workload w   = make_workload(x);
  auto routing = make_gating_source(x, w, o.routing_cache);
  EldrModel m  = fit_eldr_for(x, w, *routing);
  write_file_atomically(o.out, eldr_model_json(m));
  std::string mask;
  for (int l : m.mask)
    mask += (mask.empty() ? "" : " ") + std::to_string(l);
  if (!o.quiet)
    std::printf("fit: %s signatures of %d calibration requests, mask of %zu layers [%s] (Spearman %.3f), %d %s "
                "centroids after %d K-means iterations -> %s\n",
                std::string(to_string(m.variant)).c_str(), m.calibration_requests, m.mask.size(), mask.c_str(),
                m.mask_spearman, m.centroids.rows, m.kmeans == KMeansVariant::balanced ? "balanced" : "vanilla",
                m.kmeans_iterations, o.out.c_str());
  return 0;
}

}  // namespace

Command add_fit_command(CLI::App& app)
{
  auto o    = std::make_shared<FitOptions>();
  auto* sub = app.add_subcommand("fit", "Fit ELDR (IDF, layer mask, balanced K-means) on an experiment's calibration "
                                        "split and write a router model file (use it with --set eldr.model_file=FILE)");
  sub->add_option("config", o->config,
                  "Experiment config (JSON): its workload, routing, decode workers and eldr section")
      ->required();
  sub->add_option("--out", o->out, "Router model file to write (JSON)")->required();
  sub->add_option("--set", o->sets, "Override a config key, KEY=VALUE (repeatable), e.g. --set eldr.variant=binary");
  sub->add_option("--routing-cache", o->routing_cache,
                  "Directory where generated routing sources are kept for other runs with the same inputs (as `run`)");
  sub->add_flag("--quiet,-q", o->quiet, "No summary line");
  return {sub, [o] { return fit(*o); }};
}

}  // namespace eldr::app
