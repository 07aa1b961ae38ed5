#pragma once
// Worked example (docs/adding-a-router.md): prompts that share their first KV block go to the same
// decode worker (the prefix hash modulo the workers), where the blocks may be cached already
// (serving.decode_prefix_cache), unless that worker holds more than kSlack requests above the least
// loaded one; then the least loaded, lowest index on ties. No randomness, no parameters.
#include "sim/routing/decode_router.hpp"
#include "sim/routing/router_setup.hpp"

#include <memory>

namespace eldr {

class PrefixAffinityRouter : public DecodeRouter {
 public:
  static constexpr int kSlack = 4;  // in-flight requests a home worker may hold above the least loaded
  std::string_view name() const override { return "prefix_affinity"; }
  int choose(const Request& r, const DecodeLoadView& load) override;
};

std::unique_ptr<DecodeRouter> make_prefix_affinity(const RouterSetup& setup);

}  // namespace eldr
