#include "examples/routers/prefix_affinity.hpp"

#include <algorithm>

namespace eldr {

int PrefixAffinityRouter::choose(const Request& r, const DecodeLoadView& load)
{
  const int home      = int(r.prefix_hash % uint64_t(load.workers()));
  const auto least    = std::min_element(load.in_flight.begin(), load.in_flight.end());  // the first minimum
  const int home_load = load.in_flight[size_t(home)];
  return home_load - *least > kSlack ? int(least - load.in_flight.begin()) : home;
}

std::unique_ptr<DecodeRouter> make_prefix_affinity(const RouterSetup&)
{
  return std::make_unique<PrefixAffinityRouter>();
}

}  // namespace eldr
