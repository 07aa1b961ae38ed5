#pragma once
#include "sim/common/rng.hpp"
#include "sim/routing/decode_router.hpp"

namespace eldr {

// Power of two choices: two distinct workers at random, the less loaded (the first drawn on a tie).
class P2cRouter : public DecodeRouter {
 public:
  explicit P2cRouter(uint64_t seed) : rng_(seed, "router.p2c") {}
  std::string_view name() const override { return "p2c"; }
  int choose(const Request& r, const DecodeLoadView& load) override;

 private:
  Rng rng_;
};

}  // namespace eldr
