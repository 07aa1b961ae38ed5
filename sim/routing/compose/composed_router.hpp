#pragma once
// A decode router run from a Composition (composition.hpp): filters, then weighted scores, then the
// picker, each a registered plugin (plugin.hpp) built for the router. Plugins with state keep it; the
// states plugins share (one per type and router: PluginContext::shared) live here too, and the router
// hooks are answered from all of them.
//
// A filter that would leave no candidate is skipped for that decision (the candidates before it
// stand) and counted: router_stats' filter_fallbacks, reported for compositions with a filter that
// can empty the set (PluginEntry::can_empty).
#include "sim/common/rng.hpp"
#include "sim/routing/compose/composition.hpp"
#include "sim/routing/compose/plugin.hpp"
#include "sim/routing/decode_router.hpp"
#include "sim/routing/router_setup.hpp"

#include <memory>
#include <vector>

namespace eldr {

class ComposedRouter : public DecodeRouter {
 public:
  // Throws std::invalid_argument (or InputError) when a plugin cannot work with the setup.
  ComposedRouter(Composition c, const RouterSetup& setup);
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
  Composition c_;
  Rng rng_;
  std::vector<std::unique_ptr<RouterPart>> shared_;  // the states plugins share, in the order built
  std::vector<std::unique_ptr<Filter>> filters_;
  std::vector<std::unique_ptr<Scorer>> scorers_;
  std::unique_ptr<Picker> picker_;
  std::vector<RouterPart*> parts_;                // every one of the above, shared states first
  std::vector<const RouterPart*> profile_users_;  // the parts asking for the prompt's profile
  std::vector<int> layers_;                       // the union of their prompt layers, when more than one asks
  bool can_empty_ = false;                        // a filter may leave no candidate
  long fallbacks_ = 0;
  // Scratch of one decision: the candidates (ascending), the next filter's, and their totals.
  std::vector<int> cand_, kept_;
  std::vector<double> total_, part_;
};

// The router for a composition (the experiment's `composed` section, or a built-in router's).
std::unique_ptr<DecodeRouter> make_composed_router(const Composition& c, const RouterSetup& setup);

}  // namespace eldr
