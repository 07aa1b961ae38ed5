#pragma once
// ELDR, expert-locality-aware decode routing (docs/design.md section 1). The request's signature (from its
// prompt profile, handed over by the prefill worker) is compared with each decode worker's centroid;
// candidates are the workers within `tau` of the best similarity (at least two when tau > 0 and
// min_two is set); the least-loaded candidate wins, lowest index on ties. tau = 0 is pure locality,
// tau >= 1 pure least-loaded. The online refit re-clusters the signatures routed in the last
// refit_window_s every refit_interval_s (balanced K-means warm-started from the current centroids,
// new centroids matched to workers by maximum cosine) so profiles follow the traffic. Refit policies
// (eldr.refit): static (never), periodic (alias online: every refit_interval_s) and triggered (when
// the drift detector, drift_detector.hpp, finds the routed signatures moved away from the centroids).
// The router table's "eldr" is a composition (sim/routing/compose/): the locality-band filter and the
// expert-locality scorer (locality_plugins.cpp) take their decisions from this class in steps (begin, band,
// similarities, end); its own choose() is that composition's decision, for the tests.
#include "sim/config/experiment.hpp"
#include "sim/routing/decode_router.hpp"
#include "sim/routing/eldr/drift_detector.hpp"
#include "sim/routing/eldr/eldr_model.hpp"
#include "sim/routing/eldr/eldr_spec.hpp"
#include "sim/routing/router_setup.hpp"

#include <memory>

#include <deque>

namespace eldr {

// The fit options an experiment's eldr section asks for, and the fit itself on its calibration split.
EldrFitOptions eldr_fit_options(const Experiment& x);
EldrModel fit_eldr_for(const Experiment& x, const Workload& w, const GatingSource& routing);
// The router for an experiment: its model file, or a fit on the calibration split; checked against
// the cluster (one centroid per decode worker) and the routing's shape.
class EldrRouter;
std::unique_ptr<EldrRouter> make_eldr_router(const RouterSetup& setup);

enum class RefitPolicy { static_centroids, periodic, triggered };
// eldr.refit's value ("online" is periodic's older name). Throws std::invalid_argument on anything else.
RefitPolicy parse_refit_policy(const std::string& name);
DriftDetectorOptions drift_detector_options(const EldrSpec& spec);

// ELDR's locality state: the model, the band, the online refit and drift detection, which the
// expert-locality plugins run on (locality_plugins.cpp; router "eldr" is the composition band filter +
// queue scorer + lowest-index max-score picker, router_registry.cpp).
class EldrRouter {
 public:
  EldrRouter(EldrModel model, const EldrSpec& spec);

  // ELDR's decision in one call (the band, then the least loaded, lowest index on ties, then end()):
  // what the eldr composition decides (tests/unit/eldr_router_test.cpp holds the two equal), for tests
  // and benches.
  int choose(const Request& r, const DecodeLoadView& load);
  ProfileFields prompt_fields() const { return fields_for(model_.variant); }
  std::span<const int> prompt_layers() const { return model_.mask; }
  void observe_prompt(const Request& r, const PromptProfile& profile);
  double handoff_bytes(const Request& r) const;
  double routing_overhead_s() const { return spec_.routing_overhead_s; }
  // The nearest centroid (largest dot product of unit vectors: cosine) of the fitted model; none for a
  // prompt with nothing on the mask's layers.
  std::vector<int> home_workers(const Request& r, const PromptProfile& prompt) const;
  std::vector<std::pair<std::string, double>> stats() const;
  void log_decisions_to(DecisionDetail* detail) { trace_ = detail; }
  // Simulated times of the refits performed (periodic and triggered), in order.
  std::vector<double> refit_times() const { return refit_times_; }
  // Only the policies named periodic or triggered: "online" (periodic's older name) and static runs
  // keep the summaries they always had.
  bool follows_drift() const { return spec_.refit == "periodic" || spec_.refit == "triggered"; }
  bool profiles_cached_blocks() const { return spec_.signature_cache; }

  // One decision in steps, as the locality plugins take it (locality_plugins.cpp):
  // begin() takes the request's signature (observe_prompt first); band() appends to `out` the
  // candidates within tau of the best similarity among `candidates` (with min_two, the runner-up joins
  // a band of one), in their order; similarities() is every worker's exact similarity; end() counts
  // the decision and refits as the policy says.
  void begin(const Request& r);
  void band(std::span<const int> candidates, std::vector<int>& out);
  std::span<const float> similarities();
  void end(double now);

  // Decision on a ready signature (the band over every worker, then the least loaded, lowest index on
  // ties; no refit): for tests/benches.
  int choose_signature(std::span<const float> signature, std::span<const int> in_flight);
  const EldrModel& model() const { return model_; }
  const DriftDetector* detector() const { return policy_ == RefitPolicy::triggered ? &detector_ : nullptr; }

 private:
  void prepare(std::span<const float> signature);
  float exact(int w);
  int least_loaded_in_band(std::span<const int> in_flight);
  void remember(double now, std::span<const float> signature);
  void refit(double now);

  EldrModel model_;
  EldrSpec spec_;
  RefitPolicy policy_;
  DriftDetector detector_;
  std::vector<double> refit_times_;
  bool following_         = false;  // triggered: refitting each interval after a fire, until follow_until_s_
  double follow_until_s_  = 0;
  DecisionDetail* trace_  = nullptr;  // the decision log: exact similarities, band, candidates
  int last_nearest_       = -1;       // the last decision's most similar worker (lowest index on ties)
  float last_best_        = 0;
  size_t transport_bytes_ = 0;
  uint32_t pending_id_    = 0;
  bool pending_valid_     = false;
  Signature pending_;
  std::span<const float> current_;  // the signature of the decision under way
  bool banded_ = false;             // the decision under way has computed its band
  std::vector<int> all_, band_;     // scratch: every worker, a band
  CentroidTable table_;             // model_.centroids transposed for centroid_dots, rebuilt by each refit
  // Per worker, scratch of one decision: exact similarity (when known_), estimate and its bound, band.
  std::vector<float> sims_, approx_, bound_;
  std::vector<char> known_, in_band_;
  // The refit window, oldest first: the routing times, and the signatures as contiguous rows from
  // window_start_ (K-means reads them in place, no copy); dropped rows are reclaimed once they
  // outnumber the live ones.
  std::deque<double> window_times_;
  std::vector<float> window_rows_;
  size_t window_start_ = 0;
  // check_point of the rows of window_rows_ from its first, made by the refits as they first see a row
  // (a row is in refit_window_s / refit_interval_s refits: checked and hashed once, not by each fit).
  std::vector<PointCheck> window_checks_;
  long window_dropped_ = 0;  // rows ever dropped from the window's front: the id of its oldest row
  WindowCarry carry_;        // the last refit's dots, for the next (same results, less work)
  double next_refit_s_   = 0;
  long refits_           = 0;
  long decisions_        = 0;
  double similarity_sum_ = 0;
};

}  // namespace eldr
