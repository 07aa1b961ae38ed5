#include "sim/routing/round_robin_router.hpp"

namespace eldr {

int RoundRobinRouter::choose(const Request&, const DecodeLoadView& load)
{
  int w = next_ % load.workers();
  next_ = (w + 1) % load.workers();
  return w;
}

}  // namespace eldr
