#include "sim/routing/eldr/eldr_router.hpp"

#include "sim/common/input_error.hpp"

#include <algorithm>
#include <numeric>
#include <stdexcept>

namespace eldr {

EldrFitOptions eldr_fit_options(const Experiment& x)
{
  const EldrSpec spec = eldr_spec(x);
  EldrFitOptions o;
  o.variant           = *parse_signature_variant(spec.variant);
  o.kmeans            = spec.kmeans == "vanilla" ? KMeansVariant::vanilla : KMeansVariant::balanced;
  o.clusters          = x.topology.decode.instances;
  o.mask_pairs        = spec.mask_pairs;
  o.mask_min_gain     = spec.mask_min_gain;
  o.kmeans_iterations = spec.kmeans_iterations;
  o.seed              = x.seed;
  return o;
}

EldrModel fit_eldr_for(const Experiment& x, const Workload& w, const GatingSource& routing)
{
  auto gates = make_gate_source(routing);
  try {
    return fit_eldr(w.calibration, routing, gates.get(), x.model.name, eldr_fit_options(x));
  } catch (const std::invalid_argument& e) {
    throw InputError(x.config_file, "eldr", e.what());
  }
}

std::unique_ptr<EldrRouter> make_eldr_router(const RouterSetup& setup)
{
  if (!setup.experiment || !setup.workload || !setup.routing)
    throw std::invalid_argument("eldr router needs the experiment, its workload and its routing source");
  const Experiment& x     = *setup.experiment;
  const EldrSpec spec     = eldr_spec(x);
  const std::string& file = spec.model_file;
  EldrModel m             = file.empty() ? fit_eldr_for(x, *setup.workload, *setup.routing) : read_eldr_model(file);
  const std::string where = file.empty() ? x.config_file : file;
  if (m.centroids.rows != setup.decode_workers)
    throw InputError(where, "centroids",
                     std::to_string(m.centroids.rows) + " centroids for " + std::to_string(setup.decode_workers) +
                         " decode workers");
  const GatingShape& shape = setup.routing->shape();
  if (m.layers != shape.layers || m.experts != shape.experts)
    throw InputError(where, "layers",
                     "fitted for " + std::to_string(m.layers) + " layers x " + std::to_string(m.experts) +
                         " experts, but the run's routing has " + std::to_string(shape.layers) + " x " +
                         std::to_string(shape.experts));
  if (!gates_support(make_gate_source(*setup.routing).get(), m.variant))
    throw InputError(where, "variant",
                     "'" + std::string(to_string(m.variant)) + "' needs gate values the routing source lacks");
  return std::make_unique<EldrRouter>(std::move(m), spec);
}

RefitPolicy parse_refit_policy(const std::string& name)
{
  if (name == "static")
    return RefitPolicy::static_centroids;
  if (name == "periodic" || name == "online")
    return RefitPolicy::periodic;
  if (name == "triggered")
    return RefitPolicy::triggered;
  throw std::invalid_argument("unknown ELDR refit policy '" + name + "' (static, periodic, online, triggered)");
}

DriftDetectorOptions drift_detector_options(const EldrSpec& spec)
{
  DriftDetectorOptions o;
  o.window_s     = spec.drift_window_s;
  o.similarity_z = spec.drift_similarity_z;
  o.psi_ratio    = spec.drift_psi_ratio;
  return o;
}

EldrRouter::EldrRouter(EldrModel model, const EldrSpec& spec)
    : model_(std::move(model)), spec_(spec), policy_(parse_refit_policy(spec.refit)),
      detector_(model_.centroids.rows, drift_detector_options(spec))
{
  GatingShape shape;
  shape.layers     = model_.layers;
  shape.experts    = model_.experts;
  transport_bytes_ = signature_transport_bytes(shape, model_.variant);
  sims_.resize(size_t(model_.centroids.rows));
  approx_.resize(sims_.size());
  bound_.resize(sims_.size());
  known_.resize(sims_.size());
  in_band_.resize(sims_.size());
  table_        = CentroidTable(model_.centroids.values, model_.centroids.rows, model_.centroids.cols);
  next_refit_s_ = spec_.refit_interval_s;
}

void EldrRouter::observe_prompt(const Request& r, const PromptProfile& profile)
{
  pending_.resize(size_t(model_.dimension()));  // reused: no allocation per request
  make_signature(profile, model_.variant, &model_.idf, model_.mask, pending_);
  pending_id_    = r.id;
  pending_valid_ = true;
}

std::vector<int> EldrRouter::home_workers(const Request&, const PromptProfile& prompt) const
{
  const Signature sig = make_signature(prompt, model_.variant, &model_.idf, model_.mask);
  int best            = -1;
  float best_dot      = 0;
  for (int w = 0; w < model_.centroids.rows; ++w) {
    const float d = dot(model_.centroids.row(w), sig);
    if (best < 0 || d > best_dot)
      best = w, best_dot = d;
  }
  if (best < 0 || std::all_of(sig.begin(), sig.end(), [](float v) { return v == 0; }))
    return {};
  return {best};
}

double EldrRouter::handoff_bytes(const Request&) const
{
  return double(transport_bytes_);
}

void EldrRouter::begin(const Request& r)
{
  if (!pending_valid_ || pending_id_ != r.id)
    throw std::logic_error("ELDR: a decision without the request's prompt profile (observe_prompt) first");
  pending_valid_ = false;
  prepare(pending_);
}

void EldrRouter::prepare(std::span<const float> signature)
{
  // The decision compares similarities s_w = dot(centroid w, signature) with the best one, the band
  // floor and the runner-up. Bounded float16 estimates (s_w within approx_ +- bound_) settle most
  // comparisons; s_w itself is computed (exactly as dot()) only where an interval cannot, so the
  // decision and the best similarity are those of the exact s_w. Without the estimates, all are exact.
  current_             = signature;
  banded_              = false;
  const bool estimated = approx_centroid_dots(table_, signature, approx_, bound_);
  if (!estimated)
    centroid_dots(table_, signature, sims_);
  std::fill(known_.begin(), known_.end(), char(!estimated));
}

float EldrRouter::exact(int w)
{
  if (!known_[size_t(w)]) {
    sims_[size_t(w)]  = dot(model_.centroids.row(w), current_);
    known_[size_t(w)] = 1;
  }
  return sims_[size_t(w)];
}

void EldrRouter::band(std::span<const int> candidates, std::vector<int>& out)
{
  auto lo       = [&](int w) { return known_[size_t(w)] ? sims_[size_t(w)] : approx_[size_t(w)] - bound_[size_t(w)]; };
  auto hi       = [&](int w) { return known_[size_t(w)] ? sims_[size_t(w)] : approx_[size_t(w)] + bound_[size_t(w)]; };
  auto at_least = [&](int w, float v) { return lo(w) >= v || (hi(w) >= v && exact(w) >= v); };
  auto equals   = [&](int w, float v) { return lo(w) <= v && v <= hi(w) && exact(w) == v; };

  // The best: the maximum over the candidates whose interval reaches the highest lower end.
  float top_lo = -2;
  for (int w : candidates)
    top_lo = std::max(top_lo, lo(w));
  float best  = -2;
  int nearest = -1;
  for (int w : candidates)
    if (hi(w) >= top_lo) {
      const float e = exact(w);
      if (e > best) {
        best    = e;
        nearest = w;
      }
    }
  // Band: within tau of the best. With tau > 0 and min_two, the runner-up joins a band of one.
  const float floor = best - float(spec_.tau);
  int in_band       = 0;
  for (int w : candidates)
    in_band += in_band_[size_t(w)] = at_least(w, floor);
  float second = -2;
  if (spec_.tau > 0 && spec_.min_two && in_band < 2 && candidates.size() > 1) {
    // The maximum below the best: among the candidates below it, those reaching the highest lower end.
    float below_lo = -2;
    for (int w : candidates)
      if (!at_least(w, best))
        below_lo = std::max(below_lo, lo(w));
    for (int w : candidates)
      if (!at_least(w, best) && hi(w) >= below_lo)
        second = std::max(second, exact(w));
  }
  const size_t first = out.size();
  for (int w : candidates)
    if (in_band_[size_t(w)] || equals(w, second))
      out.push_back(w);
  ++decisions_;
  similarity_sum_ += best;
  last_best_    = best;
  last_nearest_ = nearest;
  banded_       = true;
  if (trace_) {
    // The decision log only (off: one pointer test): every similarity exact, the band as above.
    const int k   = model_.centroids.rows;
    trace_->valid = true;
    trace_->best  = best;
    trace_->floor = floor;
    trace_->sims.resize(size_t(k));
    for (int w = 0; w < k; ++w)
      trace_->sims[size_t(w)] = exact(w);
    trace_->candidates.assign(out.begin() + std::ptrdiff_t(first), out.end());
  }
}

std::span<const float> EldrRouter::similarities()
{
  for (int w = 0; w < model_.centroids.rows; ++w)
    exact(w);
  return sims_;
}

int EldrRouter::choose_signature(std::span<const float> signature, std::span<const int> in_flight)
{
  const int k = model_.centroids.rows;
  if (int(in_flight.size()) != k)
    throw std::invalid_argument("ELDR has " + std::to_string(k) + " centroids but the cluster has " +
                                std::to_string(in_flight.size()) + " decode workers");
  prepare(signature);
  return least_loaded_in_band(in_flight);
}

int EldrRouter::least_loaded_in_band(std::span<const int> in_flight)
{
  all_.resize(size_t(model_.centroids.rows));
  std::iota(all_.begin(), all_.end(), 0);
  band_.clear();
  band(all_, band_);
  int choice = -1;
  for (int w : band_)
    if (choice < 0 || in_flight[size_t(w)] < in_flight[size_t(choice)])
      choice = w;
  return choice;
}

int EldrRouter::choose(const Request& r, const DecodeLoadView& load)
{
  begin(r);
  const int w = least_loaded_in_band(load.in_flight);
  end(load.now_s);
  return w;
}

void EldrRouter::end(double now)
{
  if (!banded_) {
    // No band this decision (a composition that only scores similarity): the best over every worker.
    const auto sims = similarities();
    const auto top  = std::max_element(sims.begin(), sims.end());
    ++decisions_;
    similarity_sum_ += *top;
    last_best_    = *top;
    last_nearest_ = int(top - sims.begin());
  }
  banded_ = false;
  if (policy_ == RefitPolicy::periodic) {
    remember(now, current_);
    if (now >= next_refit_s_) {
      refit(now);
      next_refit_s_ = now + spec_.refit_interval_s;
    }
  } else if (policy_ == RefitPolicy::triggered) {
    // The detector reads what the decision computed anyway (nearest centroid, its similarity). When it
    // fires, the refit window still holds traffic from before the shift (it fires a few seconds in), so
    // the refit is repeated every refit_interval_s until the window has renewed (refit_window_s), as
    // periodic would; then a new reference is taken from the refitted centroids.
    remember(now, current_);
    if (following_) {
      if (now >= next_refit_s_) {
        refit(now);
        next_refit_s_ = now + spec_.refit_interval_s;
      }
      if (now >= follow_until_s_) {
        following_ = false;
        detector_.reset(now);
      }
    } else if (detector_.observe(now, last_nearest_, last_best_)) {
      refit(now);
      following_      = true;
      next_refit_s_   = now + spec_.refit_interval_s;
      follow_until_s_ = now + spec_.refit_window_s;
    }
  }
}

void EldrRouter::remember(double now, std::span<const float> signature)
{
  window_times_.push_back(now);
  window_rows_.insert(window_rows_.end(), signature.begin(), signature.end());
  while (!window_times_.empty() && window_times_.front() < now - spec_.refit_window_s) {
    window_times_.pop_front();
    ++window_start_;
    ++window_dropped_;
  }
  if (window_start_ > window_times_.size()) {
    window_rows_.erase(window_rows_.begin(), window_rows_.begin() + std::ptrdiff_t(window_start_ * signature.size()));
    window_checks_.erase(window_checks_.begin(),
                         window_checks_.begin() + std::ptrdiff_t(std::min(window_start_, window_checks_.size())));
    window_start_ = 0;
  }
}

void EldrRouter::refit(double now)
{
  const int k = model_.centroids.rows;
  if (int(window_times_.size()) < k)
    return;
  const int dim = model_.dimension();
  const DenseMatrixView points(window_rows_.data() + window_start_ * size_t(dim), int(window_times_.size()), dim);
  const size_t rows = window_start_ + window_times_.size();
  for (size_t i = window_checks_.size(); i < rows; ++i)
    window_checks_.push_back(check_point(std::span<const float>(window_rows_.data() + i * size_t(dim), size_t(dim))));
  const std::span<const PointCheck> checked(window_checks_.data() + window_start_, window_times_.size());
  // All-zero signatures (prompts with nothing on the mask's layers) carry no locality: K-means places
  // them anywhere, which is harmless.
  KMeansOptions o;
  o.variant        = model_.kmeans;
  o.max_iterations = spec_.refit_iterations;
  o.objective      = false;
  carry_.first     = window_dropped_;
  KMeansResult fit = fit_spherical_kmeans_warm(points, model_.centroids, o, &carry_, checked);
  // Keep each worker's profile where it was: new centroid j goes to the old slot it is closest to.
  std::vector<int> slot = match_centroids(model_.centroids, fit.centroids);
  carry_.reorder(slot);
  for (int j = 0; j < k; ++j) {
    auto from = fit.centroids.row(j);
    std::copy(from.begin(), from.end(), model_.centroids.row(slot[size_t(j)]).begin());
  }
  table_ = CentroidTable(model_.centroids.values, model_.centroids.rows, model_.centroids.cols);
  ++refits_;
  refit_times_.push_back(now);
}

std::vector<std::pair<std::string, double>> EldrRouter::stats() const
{
  std::vector<std::pair<std::string, double>> s = {
      {"refits", double(refits_)},
      {"mask_layers", double(model_.mask.size())},
      {"mean_best_similarity", decisions_ ? similarity_sum_ / double(decisions_) : 0.0}};
  if (policy_ == RefitPolicy::triggered) {
    // Only under the new policy, so static and online runs report exactly what they always did.
    s.emplace_back("drift_fires", double(detector_.fires()));
    s.emplace_back("drift_min_similarity_z", detector_.min_similarity_z());
    s.emplace_back("drift_max_psi_ratio", detector_.max_psi_ratio());
    s.emplace_back("drift_checks", double(detector_.checks()));
    s.emplace_back("drift_similarity_z_mean", detector_.similarity_z_mean());
    s.emplace_back("drift_similarity_z_sd", detector_.similarity_z_sd());
    s.emplace_back("drift_psi_ratio_mean", detector_.psi_ratio_mean());
    s.emplace_back("drift_psi_ratio_sd", detector_.psi_ratio_sd());
  }
  return s;
}

}  // namespace eldr
