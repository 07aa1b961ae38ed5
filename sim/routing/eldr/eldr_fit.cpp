#include "sim/routing/eldr/eldr_fit.hpp"
#include "sim/routing/eldr/eldr_router.hpp"

#include <cstdio>

namespace eldr {

FittedFile fit_eldr_file(const Experiment& x, const Workload& w, const GatingSource& gating)
{
  const EldrModel m = fit_eldr_for(x, w, gating);
  std::string mask;
  for (int l : m.mask)
    mask += (mask.empty() ? "" : " ") + std::to_string(l);
  char spearman[32];
  std::snprintf(spearman, sizeof spearman, "%.3f", m.mask_spearman);
  const std::string line = std::string(to_string(m.variant)) + " signatures of " +
                           std::to_string(m.calibration_requests) + " calibration requests, mask of " +
                           std::to_string(m.mask.size()) + " layers [" + mask + "] (Spearman " + spearman + "), " +
                           std::to_string(m.centroids.rows) + " " +
                           (m.kmeans == KMeansVariant::balanced ? "balanced" : "vanilla") + " centroids after " +
                           std::to_string(m.kmeans_iterations) + " K-means iterations";
  return {eldr_model_json(m), line};
}

void check_eldr_file(const std::string& path)
{
  (void)read_eldr_model(path);
}

bool eldr_file_given(const Experiment& x)
{
  return !eldr_spec(x).model_file.empty();
}

std::span<const char* const> eldr_run_only_keys()
{
  static const char* const kKeys[] = {"eldr.tau",
                                      "eldr.min_two_candidates",
                                      "eldr.refit",
                                      "eldr.refit_window_s",
                                      "eldr.refit_interval_s",
                                      "eldr.refit_iterations",
                                      "eldr.signature_cache"};  // online profiles of cached blocks only
  return kKeys;
}

}  // namespace eldr
