#pragma once
// ELDR's parameters, the config's eldr section (docs/eldr.md): its key declarations and reader
// (eldr_spec.cpp), ELDR's entry in the router table. The fitted state lives in a router model file.
#include "sim/config/experiment.hpp"

#include <string>

namespace eldr {

class ConfigReader;

// Values as read from the section; the defaults are the declarations' (eldr_spec.cpp).
struct EldrSpec {
  std::string model_file;  // resolved; empty: fit on the workload's calibration split
  std::string variant;     // signature variant
  std::string kmeans;      // balanced | vanilla
  double tau   = 0;        // locality band
  bool min_two = false;    // with tau > 0, always keep at least two candidates
  std::string refit;       // static | periodic (alias online) | triggered (docs/eldr.md)
  double refit_window_s   = 0;
  double refit_interval_s = 0;  // periodic
  // triggered: the drift detector (drift_detector.hpp): window, and thresholds in units of the
  // statistics' stationary noise (chosen on stationary streams, docs/eldr.md "Refit policies").
  double drift_window_s     = 0;
  double drift_similarity_z = 0;
  double drift_psi_ratio    = 0;
  int refit_iterations      = 0;  // K-means iterations per online refit (warm-started)
  int mask_pairs            = 0;
  double mask_min_gain      = 0;  // a layer joins the mask only if it adds more Spearman than this
  int kmeans_iterations     = 0;
  bool signature_cache      = false;  // with prefix caching: per-KV-block expert counts (else cached
                                      // blocks add nothing to a signature)
  // After a prefill batch, before its first tokens and KV transfers: reading the prompts' routed
  // experts, building their signatures and deciding (the paper measures ~0.86 ms per request, 1.2% of
  // TTFT; the batch's requests are handled together, docs/eldr.md).
  double routing_overhead_s = 0;
};

// The section's keys and reader, for the router table.
extern const RouterSection kEldrSection;
// The experiment's eldr section (Experiment::router_sections, defaults included).
EldrSpec eldr_spec(const Experiment& x);
// The declared defaults (for code that builds a router without a config: tests, benches).
EldrSpec default_eldr_spec();

}  // namespace eldr
