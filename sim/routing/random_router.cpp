#include "sim/routing/random_router.hpp"

namespace eldr {

int RandomRouter::choose(const Request&, const DecodeLoadView& load)
{
  return int(rng_.below(uint64_t(load.workers())));
}

}  // namespace eldr
