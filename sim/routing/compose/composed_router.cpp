#include "sim/routing/compose/composed_router.hpp"

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <stdexcept>

namespace eldr {

ComposedRouter::ComposedRouter(Composition c, const RouterSetup& setup, ExpertLocalityFactory make_locality)
    : c_(std::move(c)), rng_(setup.seed, "router." + c_.name)
{
  if (c_.uses_expert_locality()) {
    if (!make_locality)
      throw std::logic_error("router " + c_.name + ": an expert-locality plugin without a locality state to run on");
    locality_ = make_locality(setup);
  }
  if (c_.uses_label_pools())
    pools_ = domain_pools_for(setup);
  can_empty_ = std::any_of(c_.filters.begin(), c_.filters.end(),
                           [](const FilterStep& f) { return f.type == FilterType::load_threshold; });
  // Every scorer off (weight 0, a sweep's first point, say): the picker sees equal totals. Legitimate,
  // but rarely what was meant, so said once.
  if (c_.scorers.empty() && c_.picker.type == PickerType::max_score)
    std::fprintf(stderr, "eldrsim: note: router %s: no scorer has a weight above 0, so max-score-picker picks %s\n",
                 c_.name.c_str(),
                 c_.picker.ties == TieBreak::random ? "at random among the candidates"
                                                    : "the lowest-numbered candidate");
}

ComposedRouter::~ComposedRouter() = default;

int ComposedRouter::choose(const Request& r, const DecodeLoadView& load)
{
  if (locality_)
    locality_->begin(r);
  cand_.resize(size_t(load.workers()));
  std::iota(cand_.begin(), cand_.end(), 0);
  for (const FilterStep& f : c_.filters) {
    kept_.clear();
    filter(f, r, load);
    if (kept_.empty())
      ++fallbacks_;  // the candidates before the filter stand
    else
      cand_.swap(kept_);
  }
  total_.assign(cand_.size(), 0.0);
  for (const ScorerStep& s : c_.scorers) {
    part_.resize(cand_.size());
    score(s, r, load);
    for (size_t i = 0; i < cand_.size(); ++i)
      total_[i] += s.weight * part_[i];
  }
  const int w = pick(load);
  if (locality_)
    locality_->end(load.now_s);
  return w;
}

void ComposedRouter::filter(const FilterStep& f, const Request& r, const DecodeLoadView& load)
{
  switch (f.type) {
  case FilterType::label_pool: {
    const int pool = pool_of(*pools_, r);
    if (pool < 0) {
      kept_ = cand_;  // a label without a pool goes anywhere
      return;
    }
    const int first = pools_->first[size_t(pool)], last = first + pools_->size[size_t(pool)];
    for (int w : cand_)
      if (w >= first && w < last)
        kept_.push_back(w);
    return;
  }
  case FilterType::load_threshold:
    for (int w : cand_)
      if (load.in_flight[size_t(w)] <= f.max_in_flight)
        kept_.push_back(w);
    return;
  case FilterType::locality_band:
    locality_->band(cand_, kept_);
    return;
  }
}

void ComposedRouter::score(const ScorerStep& s, const Request& r, const DecodeLoadView& load)
{
  // Scores relative to the candidates: the best 1, the worst 0, all 1 when they are equal.
  auto min_max = [&](auto value, bool higher_is_better) {
    double lo = 0, hi = 0;
    for (size_t i = 0; i < cand_.size(); ++i) {
      const double v = value(cand_[i]);
      lo             = i == 0 ? v : std::min(lo, v);
      hi             = i == 0 ? v : std::max(hi, v);
    }
    for (size_t i = 0; i < cand_.size(); ++i) {
      const double v = value(cand_[i]);
      part_[i]       = hi == lo ? 1.0 : (higher_is_better ? v - lo : hi - v) / (hi - lo);
    }
  };
  switch (s.type) {
  case ScorerType::queue:
    min_max([&](int w) { return double(load.in_flight[size_t(w)]); }, false);
    return;
  case ScorerType::kv_cache_utilization:
    // vLLM's KV usage: blocks held by running requests (cached blocks nobody holds count as free).
    for (size_t i = 0; i < cand_.size(); ++i) {
      const BlockCache* c = load.kv_caches.empty() ? nullptr : &load.kv_caches[size_t(cand_[i])];
      part_[i] = c && c->capacity() > 0 ? 1.0 - double(c->used() - c->evictable()) / double(c->capacity()) : 1.0;
    }
    return;
  case ScorerType::prefix_cache:
    for (size_t i = 0; i < cand_.size(); ++i)
      part_[i] = load.prompt_block_keys.empty() || load.kv_caches.empty()
                     ? 0.0
                     : double(load.kv_caches[size_t(cand_[i])].match(load.prompt_block_keys)) /
                           double(load.prompt_block_keys.size());
    return;
  case ScorerType::expert_locality: {
    const std::span<const float> sims = locality_->similarities();
    min_max([&](int w) { return double(sims[size_t(w)]); }, true);
    return;
  }
  case ScorerType::label_match: {
    const int pool  = pool_of(*pools_, r);
    const int first = pool < 0 ? 0 : pools_->first[size_t(pool)];
    const int last  = pool < 0 ? 0 : first + pools_->size[size_t(pool)];
    for (size_t i = 0; i < cand_.size(); ++i)
      part_[i] = cand_[i] >= first && cand_[i] < last ? 1.0 : 0.0;
    return;
  }
  case ScorerType::precise_prefix_cache: {
    // llm-d's precise-prefix-cache-scorer (v0.8.0 preciseprefixcache/utils.go): the index's hit counts
    // are min-max normalised over the workers with a hit, every worker of the pool (not only the
    // candidates); a worker without one scores 0.
    const bool known = !load.prompt_block_keys.empty() && !load.kv_caches.empty();
    hits_.assign(size_t(load.workers()), 0.0);
    double lo = 0, hi = 0;
    for (int w = 0; known && w < load.workers(); ++w)
      if (const double n = double(load.kv_caches[size_t(w)].match(load.prompt_block_keys)); n > 0) {
        hits_[size_t(w)] = n;
        lo               = lo == 0 ? n : std::min(lo, n);
        hi               = std::max(hi, n);
      }
    for (size_t i = 0; i < cand_.size(); ++i) {
      const double n = hits_[size_t(cand_[i])];
      part_[i]       = n == 0 ? 0.0 : hi == lo ? 1.0 : (n - lo) / (hi - lo);
    }
    return;
  }
  case ScorerType::active_request: {
    // llm-d's active-request-scorer (v0.8.0 activerequest/active_request.go): the most in flight on any
    // worker of the pool scales the busy ones; an idle worker scores 1.
    long most = 0;
    for (int w = 0; w < load.workers(); ++w)
      most = std::max(most, long(load.in_flight[size_t(w)]));
    for (size_t i = 0; i < cand_.size(); ++i) {
      const long n = load.in_flight[size_t(cand_[i])];
      part_[i]     = n <= s.idle_threshold ? 1.0 : double(most - n) / double(most) * s.max_busy_score;
    }
    return;
  }
  }
}

int ComposedRouter::pick(const DecodeLoadView& load)
{
  const size_t n = cand_.size();
  switch (c_.picker.type) {
  case PickerType::max_score: {
    // One pass; random ties by reservoir sampling (uniform among them).
    size_t best = 0;
    long ties   = 1;
    for (size_t i = 1; i < n; ++i) {
      if (total_[i] > total_[best]) {
        best = i;
        ties = 1;
      } else if (total_[i] == total_[best] && c_.picker.ties == TieBreak::random && rng_.below(uint64_t(++ties)) == 0) {
        best = i;
      }
    }
    return cand_[best];
  }
  case PickerType::random: {
    if (c_.picker.top_k == 0 || size_t(c_.picker.top_k) >= n)
      return cand_[size_t(rng_.below(uint64_t(n)))];
    order_.resize(n);
    std::iota(order_.begin(), order_.end(), size_t(0));
    std::stable_sort(order_.begin(), order_.end(), [&](size_t a, size_t b) { return total_[a] > total_[b]; });
    return cand_[order_[size_t(rng_.below(uint64_t(c_.picker.top_k)))]];
  }
  case PickerType::p2c: {
    if (n == 1)
      return cand_[0];
    const size_t a = size_t(rng_.below(uint64_t(n)));
    size_t b       = size_t(rng_.below(uint64_t(n - 1)));
    if (b >= a)
      ++b;  // distinct from a, uniform over the others
    return total_[b] > total_[a] ? cand_[b] : cand_[a];
  }
  case PickerType::round_robin: {
    const auto it = std::lower_bound(cand_.begin(), cand_.end(), next_turn_);
    const int w   = it == cand_.end() ? cand_.front() : *it;
    next_turn_    = (w + 1) % load.workers();
    return w;
  }
  }
  return cand_.front();
}

bool ComposedRouter::uses_prompt_profile() const
{
  return locality_ != nullptr;
}
ProfileFields ComposedRouter::prompt_fields() const
{
  return locality_ ? locality_->prompt_fields() : ProfileFields{};
}
std::span<const int> ComposedRouter::prompt_layers() const
{
  return locality_ ? locality_->prompt_layers() : std::span<const int>{};
}
void ComposedRouter::observe_prompt(const Request& r, const PromptProfile& profile)
{
  if (locality_)
    locality_->observe_prompt(r, profile);
}
double ComposedRouter::handoff_bytes(const Request& r) const
{
  return locality_ ? locality_->handoff_bytes(r) : 0.0;
}
double ComposedRouter::routing_overhead_s() const
{
  return locality_ ? locality_->routing_overhead_s() : 0.0;
}

std::vector<int> ComposedRouter::home_workers(const Request& r, const PromptProfile& prompt) const
{
  // The label's pool where the policy knows labels, else the locality model's nearest profile.
  if (pools_) {
    std::vector<int> w;
    if (const int pool = pool_of(*pools_, r); pool >= 0)
      for (int k = 0; k < pools_->size[size_t(pool)]; ++k)
        w.push_back(pools_->first[size_t(pool)] + k);
    return w;
  }
  return locality_ ? locality_->home_workers(r, prompt) : std::vector<int>{};
}

std::vector<std::pair<std::string, double>> ComposedRouter::stats() const
{
  auto s = locality_ ? locality_->stats() : std::vector<std::pair<std::string, double>>{};
  if (can_empty_)
    s.emplace_back("filter_fallbacks", double(fallbacks_));
  return s;
}
void ComposedRouter::log_decisions_to(DecisionDetail* detail)
{
  if (locality_)
    locality_->log_decisions_to(detail);
}
std::vector<double> ComposedRouter::refit_times() const
{
  return locality_ ? locality_->refit_times() : std::vector<double>{};
}
bool ComposedRouter::follows_drift() const
{
  return locality_ && locality_->follows_drift();
}
bool ComposedRouter::profiles_cached_blocks() const
{
  return locality_ && locality_->profiles_cached_blocks();
}

std::unique_ptr<DecodeRouter> make_composed_router(const Composition& c, const RouterSetup& setup,
                                                   ExpertLocalityFactory make_locality)
{
  return std::make_unique<ComposedRouter>(c, setup, make_locality);
}

}  // namespace eldr
