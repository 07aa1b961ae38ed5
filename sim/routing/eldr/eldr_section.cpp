// ELDR's config section (eldr.*), read through its entry in the router table (router_registry.cpp).
// The values stay in Experiment::eldr, where the fit, the sweeps and the benches read them.
#include "sim/common/json_reader.hpp"
#include "sim/config/experiment.hpp"
#include "sim/routing/eldr/eldr_router.hpp"

#include <filesystem>

namespace eldr {

void read_eldr_section(JsonReader& e, const std::string& root, Experiment& x)
{
  namespace fs          = std::filesystem;
  std::string eldr_file = e.string("model_file", "");
  if (!eldr_file.empty()) {
    x.eldr.model_file =
        fs::path(eldr_file).is_absolute() || fs::exists(eldr_file) ? eldr_file : (fs::path(root) / eldr_file).string();
    require_file(x.eldr.model_file, e, "model_file");
  }
  x.eldr.variant =
      e.choice("variant", "counts_idf", {"counts", "counts_idf", "sqrt_counts", "binary", "gate_prob", "gate_score"});
  x.eldr.kmeans             = e.choice("kmeans", "balanced", {"balanced", "vanilla"});
  x.eldr.tau                = e.number("tau", 0.1, 0, 2);
  x.eldr.min_two            = e.boolean("min_two_candidates", true);
  x.eldr.refit              = e.choice("refit", "online", {"online", "periodic", "static", "triggered"});
  x.eldr.refit_window_s     = e.number("refit_window_s", 5, 1e-3, 1e6);
  x.eldr.refit_interval_s   = e.number("refit_interval_s", 1, 1e-3, 1e6);
  x.eldr.refit_iterations   = int(e.integer("refit_iterations", 3, 1, 1000));
  x.eldr.drift_window_s     = e.number("drift_window_s", 5, 1e-3, 1e6);
  x.eldr.drift_similarity_z = e.number("drift_similarity_z", 6, 0, 1e6);
  x.eldr.drift_psi_ratio    = e.number("drift_psi_ratio", 4, 0, 1e6);
  x.eldr.mask_pairs         = int(e.integer("mask_pairs", 30000, 10, 10000000));
  x.eldr.mask_min_gain      = e.number("mask_min_gain", 0.001, 0, 1);
  x.eldr.kmeans_iterations  = int(e.integer("kmeans_iterations", 50, 1, 10000));
  x.eldr.signature_cache    = e.boolean("signature_cache", true);
  x.eldr.routing_overhead_s = e.number("routing_overhead_ms", 0.86, 0, 1e4) * 1e-3;
}

}  // namespace eldr
