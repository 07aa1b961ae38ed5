#include "sim/routing/prefill_router.hpp"
#include "sim/common/rng.hpp"

#include <algorithm>
#include <string>

namespace eldr {

PrefillRouter::PrefillRouter(int workers, int virtual_nodes, double load_factor) : load_factor_(load_factor)
{
  ring_.reserve(size_t(workers) * size_t(virtual_nodes));
  for (int w = 0; w < workers; ++w)
    for (int v = 0; v < virtual_nodes; ++v)
      ring_.emplace_back(splitmix64(fnv1a("prefill-" + std::to_string(w) + "#" + std::to_string(v))), w);
  std::sort(ring_.begin(), ring_.end());
}

int PrefillRouter::owner(uint64_t key) const
{
  uint64_t point = splitmix64(key);
  auto it        = std::lower_bound(ring_.begin(), ring_.end(), std::make_pair(point, 0));
  return it == ring_.end() ? ring_.front().second : it->second;
}

int PrefillRouter::choose(uint64_t key, std::span<const int> in_flight) const
{
  int w        = owner(key);
  double total = 0;
  for (int l : in_flight)
    total += l;
  const double mean = total / double(in_flight.size());
  if (in_flight[size_t(w)] > load_factor_ * mean + 1.0)
    w = int(std::min_element(in_flight.begin(), in_flight.end()) - in_flight.begin());
  return w;
}

}  // namespace eldr
