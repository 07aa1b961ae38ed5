#include "sim/routing/p2c_router.hpp"

namespace eldr {

int P2cRouter::choose(const Request&, const DecodeLoadView& load)
{
  const int k = load.workers();
  if (k == 1)
    return 0;
  int a = int(rng_.below(uint64_t(k)));
  int b = int(rng_.below(uint64_t(k - 1)));
  if (b >= a)
    ++b;  // distinct from a, uniform over the others
  return load.in_flight[size_t(b)] < load.in_flight[size_t(a)] ? b : a;
}

}  // namespace eldr
