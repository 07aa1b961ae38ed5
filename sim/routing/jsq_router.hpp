#pragma once
#include "sim/common/rng.hpp"
#include "sim/routing/decode_router.hpp"

#include <span>

namespace eldr {

// The least-loaded worker in [first, first + count), ties broken uniformly at random by `rng`.
int least_loaded(std::span<const int> in_flight, int first, int count, Rng& rng);

// Join the shortest queue: the worker with the fewest in-flight requests; ties broken uniformly at
// random (a fixed tie-break would pile bursts onto low indices).
class JsqRouter : public DecodeRouter {
 public:
  explicit JsqRouter(uint64_t seed) : rng_(seed, "router.jsq") {}
  std::string_view name() const override { return "jsq"; }
  int choose(const Request& r, const DecodeLoadView& load) override;

 private:
  Rng rng_;
};

}  // namespace eldr
