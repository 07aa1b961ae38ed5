#pragma once
// A router's offline fit: what a policy computes from the workload's calibration split before its
// first decision (the expert-locality plugins' model: IDF, layer mask, centroids). A run fits at start
// unless its config hands it a fitted file; `eldrsim fit` writes such a file, and a sweep fits once per
// distinct fit input and hands the file to every point that reads the same (docs/experiments.md).
// The fits are a table (router_registry.cpp), so generic code names none of them.
#include "sim/config/experiment.hpp"
#include "sim/gating/gating_source.hpp"
#include "sim/workload/request.hpp"

#include <span>
#include <string>
#include <string_view>

namespace eldr {

struct FittedFile {
  std::string text;     // the file's content
  std::string summary;  // one line for the user: what was fitted (without the file's name)
};

struct RouterFit {
  const char* name;      // the config section that owns it: `eldrsim fit --fit NAME`, OUT/.NAME-fits/
  const char* label;     // how messages name it ("fitting ELDR 1 time")
  const char* what;      // what it fits, for --help
  const char* file_key;  // the config key that gives a run a fitted file instead
  // Keys the fit does not read, besides what no fit reads (the router, the load, the output): a sweep
  // shares one fit between points that differ only in these.
  std::span<const char* const> run_only_keys;
  bool (*used_by)(const Experiment& x);     // the run's router uses the fit
  bool (*file_given)(const Experiment& x);  // file_key names a file
  FittedFile (*fit)(const Experiment& x, const Workload& w, const GatingSource& gating);
  void (*check_file)(const std::string& path);  // reads a fitted file back whole; throws InputError if not
};

std::span<const RouterFit> router_fits();
const RouterFit* find_router_fit(std::string_view name);  // nullptr: no such fit
// The fit a run of `x` uses (nullptr: none), and the one it runs at start (used, and no file given).
const RouterFit* router_fit_of(const Experiment& x);
const RouterFit* fit_at_start(const Experiment& x);

}  // namespace eldr
