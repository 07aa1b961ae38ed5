#pragma once
// What the composition's expert-locality plugins (locality-band-filter, expert-locality-scorer) run
// on: a policy's locality state, one per router, shared by both plugins. The composition knows it only
// through this interface; the router table builds it (router_registry.cpp: ELDR's model and refits,
// sim/routing/eldr/).
#include "sim/routing/decode_router.hpp"
#include "sim/routing/router_setup.hpp"

#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace eldr {

class ExpertLocality {
 public:
  virtual ~ExpertLocality() = default;

  // One decision in steps: begin() takes the request's signature (observe_prompt came first); band()
  // appends to `out` the candidates the locality band keeps, in their order; similarities() is every
  // worker's similarity to the request; end() closes the decision (the state may refit itself).
  virtual void begin(const Request& r)                                      = 0;
  virtual void band(std::span<const int> candidates, std::vector<int>& out) = 0;
  virtual std::span<const float> similarities()                             = 0;
  virtual void end(double now)                                              = 0;

  // The router hooks the composition answers from its locality state (decode_router.hpp says what each
  // one means).
  virtual ProfileFields prompt_fields() const                                                = 0;
  virtual std::span<const int> prompt_layers() const                                         = 0;
  virtual void observe_prompt(const Request& r, const PromptProfile& profile)                = 0;
  virtual double handoff_bytes(const Request& r) const                                       = 0;
  virtual double routing_overhead_s() const                                                  = 0;
  virtual std::vector<int> home_workers(const Request& r, const PromptProfile& prompt) const = 0;
  virtual std::vector<std::pair<std::string, double>> stats() const                          = 0;
  virtual void log_decisions_to(DecisionDetail* detail)                                      = 0;
  virtual std::vector<double> refit_times() const                                            = 0;
  virtual bool follows_drift() const                                                         = 0;
  virtual bool profiles_cached_blocks() const                                                = 0;
};

// Builds the locality state for a router (throws std::invalid_argument or InputError on a setup it
// cannot work with).
using ExpertLocalityFactory = std::unique_ptr<ExpertLocality> (*)(const RouterSetup& setup);

}  // namespace eldr
