#include "sim/routing/compose/composed_router.hpp"

#include <algorithm>
#include <cstdio>
#include <numeric>

namespace eldr {

ComposedRouter::ComposedRouter(Composition c, const RouterSetup& setup)
    : c_(std::move(c)), rng_(setup.seed, "router." + c_.name)
{
  PluginContext ctx(setup);
  for (const Step& s : c_.filters) {
    filters_.push_back(s.plugin->filter(s.params, ctx));
    can_empty_ = can_empty_ || s.plugin->can_empty;
  }
  for (const Step& s : c_.scorers)
    scorers_.push_back(s.plugin->scorer(s.params, ctx));
  picker_ = c_.picker.plugin->picker(c_.picker.params, ctx);
  shared_ = ctx.take_shared();
  for (const auto& p : shared_)
    parts_.push_back(p.get());
  for (const auto& p : filters_)
    parts_.push_back(p.get());
  for (const auto& p : scorers_)
    parts_.push_back(p.get());
  parts_.push_back(picker_.get());

  for (const RouterPart* p : parts_)
    if (p->uses_prompt_profile())
      profile_users_.push_back(p);
  // Layers are fixed when a part is built; more than one asking: every layer any of them counts.
  const auto every_layer = [](const RouterPart* p) { return p->prompt_layers().empty(); };
  if (profile_users_.size() > 1 && std::none_of(profile_users_.begin(), profile_users_.end(), every_layer)) {
    for (const RouterPart* p : profile_users_)
      layers_.insert(layers_.end(), p->prompt_layers().begin(), p->prompt_layers().end());
    std::sort(layers_.begin(), layers_.end());
    layers_.erase(std::unique(layers_.begin(), layers_.end()), layers_.end());
  }
  // Every scorer off (weight 0, a sweep's first point, say): the picker sees equal totals. Legitimate,
  // but rarely what was meant, so said once.
  if (const std::string what = picker_->without_scores(); c_.scorers.empty() && !what.empty())
    std::fprintf(stderr, "eldrsim: note: router %s: no scorer has a weight above 0, so %s picks %s\n", c_.name.c_str(),
                 std::string(c_.picker.type()).c_str(), what.c_str());
}

ComposedRouter::~ComposedRouter() = default;

int ComposedRouter::choose(const Request& r, const DecodeLoadView& load)
{
  for (RouterPart* p : parts_)
    p->begin(r);
  cand_.resize(size_t(load.workers()));
  std::iota(cand_.begin(), cand_.end(), 0);
  for (const auto& f : filters_) {
    kept_.clear();
    f->keep(Decision{r, load, cand_}, kept_);
    if (kept_.empty())
      ++fallbacks_;  // the candidates before the filter stand
    else
      cand_.swap(kept_);
  }
  total_.assign(cand_.size(), 0.0);
  for (size_t s = 0; s < scorers_.size(); ++s) {
    part_.resize(cand_.size());
    scorers_[s]->score(Decision{r, load, cand_}, part_);
    for (size_t i = 0; i < cand_.size(); ++i)
      total_[i] += c_.scorers[s].weight * part_[i];
  }
  const int w = picker_->pick(Decision{r, load, cand_}, total_, rng_);
  for (RouterPart* p : parts_)
    p->end(load.now_s);
  return w;
}

bool ComposedRouter::uses_prompt_profile() const
{
  return !profile_users_.empty();
}
ProfileFields ComposedRouter::prompt_fields() const
{
  ProfileFields f;
  for (const RouterPart* p : profile_users_) {
    f.gate_prob  = f.gate_prob || p->prompt_fields().gate_prob;
    f.gate_score = f.gate_score || p->prompt_fields().gate_score;
  }
  return f;
}
std::span<const int> ComposedRouter::prompt_layers() const
{
  return profile_users_.size() == 1 ? profile_users_[0]->prompt_layers() : std::span<const int>(layers_);
}
void ComposedRouter::observe_prompt(const Request& r, const PromptProfile& profile)
{
  for (RouterPart* p : parts_)
    p->observe_prompt(r, profile);
}
double ComposedRouter::handoff_bytes(const Request& r) const
{
  double bytes = 0;
  for (const RouterPart* p : parts_)
    bytes += p->handoff_bytes(r);
  return bytes;
}
double ComposedRouter::routing_overhead_s() const
{
  double s = 0;
  for (const RouterPart* p : parts_)
    s += p->routing_overhead_s();
  return s;
}

std::vector<int> ComposedRouter::home_workers(const Request& r, const PromptProfile& prompt) const
{
  // The answer of the part with the lowest precedence that has one (the first of those on a tie).
  std::optional<std::vector<int>> best;
  int rank = 0;
  for (const RouterPart* p : parts_)
    if (!best || p->home_precedence() < rank)
      if (auto home = p->home_workers(r, prompt)) {
        best = std::move(home);
        rank = p->home_precedence();
      }
  return best ? *best : std::vector<int>{};
}

std::vector<std::pair<std::string, double>> ComposedRouter::stats() const
{
  std::vector<std::pair<std::string, double>> s;
  for (const RouterPart* p : parts_)
    p->add_stats(s);
  if (can_empty_)
    s.emplace_back("filter_fallbacks", double(fallbacks_));
  return s;
}
void ComposedRouter::log_decisions_to(DecisionDetail* detail)
{
  for (RouterPart* p : parts_)
    p->log_decisions_to(detail);
}
std::vector<double> ComposedRouter::refit_times() const
{
  std::vector<double> t;
  for (const RouterPart* p : parts_) {
    const std::vector<double> mine = p->refit_times();
    t.insert(t.end(), mine.begin(), mine.end());
  }
  return t;
}
bool ComposedRouter::follows_drift() const
{
  return std::any_of(parts_.begin(), parts_.end(), [](const RouterPart* p) { return p->follows_drift(); });
}
bool ComposedRouter::profiles_cached_blocks() const
{
  return std::any_of(parts_.begin(), parts_.end(), [](const RouterPart* p) { return p->profiles_cached_blocks(); });
}

std::unique_ptr<DecodeRouter> make_composed_router(const Composition& c, const RouterSetup& setup)
{
  return std::make_unique<ComposedRouter>(c, setup);
}

}  // namespace eldr
