#pragma once
// Shared fixtures of the micro benchmarks: the real model and hardware files, read once.
#include "sim/config/experiment.hpp"
#include "sim/config/hardware.hpp"
#include "sim/config/model_spec.hpp"
#include "sim/gating/gating_source_factory.hpp"
#include "sim/workload/workload_factory.hpp"

#include <filesystem>
#include <memory>
#include <string>

namespace eldr::bench {

inline std::string source_path(const std::string& rel)
{
  return std::string(ELDR_SOURCE_DIR) + "/" + rel;
}

inline const ModelSpec& qwen3_30b()
{
  static const ModelSpec m = load_model(source_path("models/qwen3-30b-a3b.json"));
  return m;
}

inline const Hardware& mi300x()
{
  static const Hardware h = load_hardware(source_path("models/hardware/mi300x.json"));
  return h;
}

// configs/default.json with 2000 measured requests, no warm-up and 1000 calibration requests, and
// its generated routing, built once (the working directory becomes the source tree).
struct Scenario {
  Experiment x;
  Workload w;
  std::unique_ptr<GatingSource> routing;
};

inline const Scenario& default_scenario()
{
  static const Scenario s = [] {
    std::filesystem::current_path(ELDR_SOURCE_DIR);
    Scenario sc;
    sc.x       = load_experiment("configs/default.json", {{"workload.measured_requests", "2000"},
                                                          {"workload.warmup_requests", "0"},
                                                          {"workload.calibration_requests", "1000"}});
    sc.w       = make_workload(sc.x);
    sc.routing = make_gating_source(sc.x, sc.w);
    return sc;
  }();
  return s;
}

}  // namespace eldr::bench
