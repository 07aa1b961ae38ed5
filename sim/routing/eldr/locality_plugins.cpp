// The expert-locality plugins: locality-band-filter and expert-locality-scorer, both running on one
// ELDR state per router (its model, band and refits: eldr_router.hpp), which also answers the router
// hooks (the prompt profile, the signature's handoff bytes, the routing overhead, home workers, stats,
// the decision log, refits and drift).
#include "sim/routing/compose/plugin.hpp"
#include "sim/routing/eldr/eldr_router.hpp"

namespace eldr {

namespace {

// One decision's steps go to the model: begin, band (the filter), similarities (the scorer), end.
class EldrState : public RouterPart {
 public:
  explicit EldrState(std::unique_ptr<EldrRouter> eldr) : eldr_(std::move(eldr)) {}
  static std::unique_ptr<EldrState> make(const RouterSetup& setup)
  {
    return std::make_unique<EldrState>(make_eldr_router(setup));
  }
  EldrRouter& model() { return *eldr_; }

  void begin(const Request& r) override { eldr_->begin(r); }
  void end(double now) override { eldr_->end(now); }
  bool uses_prompt_profile() const override { return true; }
  ProfileFields prompt_fields() const override { return eldr_->prompt_fields(); }
  std::span<const int> prompt_layers() const override { return eldr_->prompt_layers(); }
  void observe_prompt(const Request& r, const PromptProfile& profile) override { eldr_->observe_prompt(r, profile); }
  double handoff_bytes(const Request& r) const override { return eldr_->handoff_bytes(r); }
  double routing_overhead_s() const override { return eldr_->routing_overhead_s(); }
  std::optional<std::vector<int>> home_workers(const Request& r, const PromptProfile& prompt) const override
  {
    return eldr_->home_workers(r, prompt);
  }
  void add_stats(std::vector<std::pair<std::string, double>>& out) const override
  {
    for (auto& s : eldr_->stats())
      out.push_back(std::move(s));
  }
  void log_decisions_to(DecisionDetail* detail) override { eldr_->log_decisions_to(detail); }
  std::vector<double> refit_times() const override { return eldr_->refit_times(); }
  bool follows_drift() const override { return eldr_->follows_drift(); }
  bool profiles_cached_blocks() const override { return eldr_->profiles_cached_blocks(); }

 private:
  std::unique_ptr<EldrRouter> eldr_;
};

class LocalityBandFilter : public Filter {
 public:
  explicit LocalityBandFilter(EldrState& state) : state_(state) {}
  void keep(const Decision& d, std::vector<int>& kept) override { state_.model().band(d.candidates, kept); }

 private:
  EldrState& state_;
};

class ExpertLocalityScorer : public Scorer {
 public:
  explicit ExpertLocalityScorer(EldrState& state) : state_(state) {}
  void score(const Decision& d, std::span<double> scores) override
  {
    const std::span<const float> sims = state_.model().similarities();
    min_max_scores(
        d, [&](int w) { return double(sims[size_t(w)]); }, true, scores);
  }

 private:
  EldrState& state_;
};

// A prompt's experts are known once it is prefilled.
constexpr std::string_view kDecodeOnly = "expert locality needs the prompt's experts, known only once it is prefilled";

}  // namespace

extern const PluginEntry kLocalityBandFilter = {
    .type = "locality-band-filter",
    .help = "ELDR's locality band: workers within eldr.tau of the best signature similarity (the eldr section's model)",
    .filter = [](const Json&, PluginContext& ctx) -> std::unique_ptr<Filter> {
      return std::make_unique<LocalityBandFilter>(ctx.shared(&EldrState::make));
    },
    .not_for_prefill = kDecodeOnly,
    .fit             = "eldr"};

extern const PluginEntry kExpertLocalityScorer = {
    .type   = "expert-locality-scorer",
    .help   = "signature similarity to the worker's profile, (s - min) / (max - min) over the candidates (the eldr "
              "section's model)",
    .scorer = [](const Json&, PluginContext& ctx) -> std::unique_ptr<Scorer> {
      return std::make_unique<ExpertLocalityScorer>(ctx.shared(&EldrState::make));
    },
    .not_for_prefill = kDecodeOnly,
    .fit             = "eldr"};

}  // namespace eldr
