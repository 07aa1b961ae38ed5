#pragma once
// Worked example (docs/adding-a-router.md): join the shortest of d sampled queues. Each decision
// samples d distinct workers uniformly at random and takes the one with the fewest in-flight requests,
// the first sampled on a tie. d = 1 is random routing and d = 2 is p2c, in distribution (other draws);
// d >= the number of workers always picks a least-loaded worker, as jsq does, but jsq breaks ties by
// its own draws over the workers in index order: the same loads can get another worker, so the two
// runs differ.
//
// Its parameter lives in the config's own section, declared and read in jsq_of_d.cpp:
//   "jsq_of_d": {"d": 3}   (the default; at most 1048576)
#include "sim/common/rng.hpp"
#include "sim/config/experiment.hpp"
#include "sim/routing/decode_router.hpp"
#include "sim/routing/router_setup.hpp"

#include <memory>
#include <string>
#include <vector>

namespace eldr {

class JsqOfDRouter : public DecodeRouter {
 public:
  JsqOfDRouter(uint64_t seed, int d) : rng_(seed, "router.jsq_of_d"), d_(d) {}
  std::string_view name() const override { return "jsq_of_d"; }
  int choose(const Request& r, const DecodeLoadView& load) override;

 private:
  Rng rng_;
  int d_;
  std::vector<int> order_;  // scratch: a partial shuffle of the worker indices
};

// The router's table entry (sim/routing/registry/router_registry.cpp): its factory and its config section.
std::unique_ptr<DecodeRouter> make_jsq_of_d(const RouterSetup& setup);
extern const RouterSection kJsqOfDSection;

}  // namespace eldr
