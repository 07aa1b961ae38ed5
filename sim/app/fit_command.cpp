#include "sim/app/commands.hpp"
#include "sim/common/atomic_file.hpp"
#include "sim/common/result_dir.hpp"
#include "sim/gating/gate_source.hpp"
#include "sim/gating/gating_source_factory.hpp"
#include "sim/routing/router_fit.hpp"
#include "sim/workload/workload_factory.hpp"

#include <cstdio>
#include <filesystem>
#include <memory>

namespace eldr::app {

namespace {

struct FitOptions {
  std::string config;
  std::string fit;
  std::string out;
  std::vector<std::string> sets;
  std::string routing_cache;
  bool quiet = false;
};

// --fit by name; else the fit the config's router uses; else the table's only fit.
const RouterFit& which_fit(const FitOptions& o, const Experiment& x)
{
  std::string names;
  for (const RouterFit& f : router_fits())
    names += (names.empty() ? "" : ", ") + std::string(f.name);
  if (!o.fit.empty()) {
    if (const RouterFit* f = find_router_fit(o.fit))
      return *f;
    throw InputError("--fit", "", "no router fit '" + o.fit + "' (there are: " + names + ")");
  }
  if (const RouterFit* f = router_fit_of(x))
    return *f;
  if (router_fits().size() == 1)
    return router_fits().front();
  throw InputError(o.config, "router",
                   "'" + x.router + "' fits nothing offline: name the fit with --fit (one of " + names + ")");
}

int fit(const FitOptions& o)
{
  check_output_file(o.out);  // before the fit, not after it
  std::error_code ec;
  const InterruptNote note(o.out + ": not written" +
                               (std::filesystem::exists(o.out, ec) ? ", the earlier file intact" : ""),
                           {atomic_temporary(o.out)});
  Experiment x = load_with_options(o.config, option_overrides(o.sets, {}));
  check_output_apart(o.out, "--out", experiment_inputs(x));
  const RouterFit& f = which_fit(o, x);
  Workload w         = make_workload(x);
  auto routing       = make_gating_source(x, w, o.routing_cache);
  set_gate_cache_dir(o.routing_cache);  // the gate variants' values, kept beside the sources
  const FittedFile fitted = f.fit(x, w, *routing);
  write_file_atomically(o.out, fitted.text);
  if (!o.quiet)
    std::printf("fit: %s -> %s\n", fitted.summary.c_str(), o.out.c_str());
  return 0;
}

}  // namespace

Command add_fit_command(CLI::App& app)
{
  auto o = std::make_shared<FitOptions>();
  std::string fits;
  for (const RouterFit& f : router_fits())
    fits +=
        std::string(fits.empty() ? "" : "; ") + f.name + ": " + f.what + ", read with --set " + f.file_key + "=FILE";
  auto* sub = app.add_subcommand(
      "fit", "Run a router's offline fit on an experiment's calibration split and write it (" + fits + ")");
  sub->add_option("config", o->config,
                  "Experiment config (JSON): its workload, routing, decode workers and the fit's section")
      ->required();
  sub->add_option("--out", o->out, "Router model file to write (JSON)")->required();
  sub->add_option("--fit", o->fit,
                  "Which fit (the config section that owns it); default: the one the config's router uses, else "
                  "the only one");
  sub->add_option("--set", o->sets, "Override a config key, KEY=VALUE (repeatable), e.g. --set seed=2");
  sub->add_option("--routing-cache", o->routing_cache,
                  "Directory where generated routing sources (and their gate values) are kept for other runs with the "
                  "same inputs (as `run`)");
  sub->add_flag("--quiet,-q", o->quiet, "No summary line");
  return {sub, [o] { return fit(*o); }};
}

}  // namespace eldr::app
