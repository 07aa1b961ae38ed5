#include "sim/routing/jsq_router.hpp"

namespace eldr {

int least_loaded(std::span<const int> in_flight, int first, int count, Rng& rng)
{
  // Reservoir sampling over the minima: one pass, uniform among ties.
  int best = first, ties = 0, min_load = 0;
  for (int w = first; w < first + count; ++w) {
    int l = in_flight[size_t(w)];
    if (w == first || l < min_load) {
      min_load = l;
      best     = w;
      ties     = 1;
    } else if (l == min_load && rng.below(uint64_t(++ties)) == 0) {
      best = w;
    }
  }
  return best;
}

int JsqRouter::choose(const Request&, const DecodeLoadView& load)
{
  return least_loaded(load.in_flight, 0, load.workers(), rng_);
}

}  // namespace eldr
