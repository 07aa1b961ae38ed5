#pragma once
#include "sim/routing/decode_router.hpp"

namespace eldr {

// Workers in turn, 0, 1, ..., K-1, 0, ...
class RoundRobinRouter : public DecodeRouter {
 public:
  std::string_view name() const override { return "round_robin"; }
  int choose(const Request& r, const DecodeLoadView& load) override;

 private:
  int next_ = 0;
};

}  // namespace eldr
