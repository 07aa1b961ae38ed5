#pragma once
// A decode router run from a Composition (composition.hpp): filters, then weighted scores, then the
// picker. Plugins with state keep it here: the locality plugins share one locality state
// (expert_locality.hpp, built by the factory the router table gives), the label plugins the domain pools.
//
// A filter that would leave no candidate is skipped for that decision (the candidates before it
// stand) and counted: router_stats' filter_fallbacks, reported for compositions with a filter that
// can empty the set (load-threshold-filter; the pool and band filters never do, in their order).
#include "sim/common/rng.hpp"
#include "sim/routing/compose/composition.hpp"
#include "sim/routing/compose/expert_locality.hpp"
#include "sim/routing/decode_router.hpp"
#include "sim/routing/domain_pools.hpp"
#include "sim/routing/router_setup.hpp"

#include <memory>
#include <optional>
#include <vector>

namespace eldr {

class ComposedRouter : public DecodeRouter {
 public:
  // `make_locality` builds the locality plugins' state; a composition that uses them needs one.
  ComposedRouter(Composition c, const RouterSetup& setup, ExpertLocalityFactory make_locality = nullptr);
  ~ComposedRouter() override;

  std::string_view name() const override { return c_.name; }
  int choose(const Request& r, const DecodeLoadView& load) override;

  bool uses_prompt_profile() const override;
  ProfileFields prompt_fields() const override;
  std::span<const int> prompt_layers() const override;
  void observe_prompt(const Request& r, const PromptProfile& profile) override;
  double handoff_bytes(const Request& r) const override;
  double routing_overhead_s() const override;
  std::vector<int> home_workers(const Request& r, const PromptProfile& prompt) const override;
  std::vector<std::pair<std::string, double>> stats() const override;
  void log_decisions_to(DecisionDetail* detail) override;
  std::vector<double> refit_times() const override;
  bool follows_drift() const override;
  bool profiles_cached_blocks() const override;

  const Composition& composition() const { return c_; }

 private:
  void filter(const FilterStep& f, const Request& r, const DecodeLoadView& load);
  void score(const ScorerStep& s, const Request& r, const DecodeLoadView& load);
  int pick(const DecodeLoadView& load);

  Composition c_;
  Rng rng_;
  std::unique_ptr<ExpertLocality> locality_;  // the locality plugins' state, when one is used
  std::optional<DomainPools> pools_;          // the label plugins' pools, when one is used
  bool can_empty_ = false;                    // a filter may leave no candidate
  long fallbacks_ = 0;
  int next_turn_  = 0;  // round-robin-picker: the worker whose turn it is
  // Scratch of one decision: the candidates (ascending), the next filter's, and their totals.
  std::vector<int> cand_, kept_;
  std::vector<double> total_, part_;
  std::vector<double> hits_;  // precise-prefix-cache-scorer: each worker's cached prompt blocks
  std::vector<size_t> order_;
};

// The router for a composition (the experiment's `composed` section, or a built-in router's).
std::unique_ptr<DecodeRouter> make_composed_router(const Composition& c, const RouterSetup& setup,
                                                   ExpertLocalityFactory make_locality = nullptr);

}  // namespace eldr
