#pragma once
#include "sim/common/rng.hpp"
#include "sim/routing/decode_router.hpp"

namespace eldr {

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
