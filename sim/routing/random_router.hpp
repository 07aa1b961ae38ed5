#pragma once
#include "sim/common/rng.hpp"
#include "sim/routing/decode_router.hpp"

namespace eldr {

// Uniformly random worker, ignoring load.
class RandomRouter : public DecodeRouter {
 public:
  explicit RandomRouter(uint64_t seed) : rng_(seed, "router.random") {}
  std::string_view name() const override { return "random"; }
  int choose(const Request& r, const DecodeLoadView& load) override;

 private:
  Rng rng_;
};

}  // namespace eldr
