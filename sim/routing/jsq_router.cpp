#include "sim/routing/jsq_router.hpp"

namespace eldr {

int JsqRouter::choose(const Request&, const DecodeLoadView& load)
{
  // Reservoir sampling over the minima: one pass, uniform among ties.
  int best = 0, ties = 0, min_load = 0;
  for (int w = 0; w < load.workers(); ++w) {
    int l = load.in_flight[size_t(w)];
    if (w == 0 || l < min_load) {
      min_load = l;
      best     = w;
      ties     = 1;
    } else if (l == min_load && rng_.below(uint64_t(++ties)) == 0) {
      best = w;
    }
  }
  return best;
}

}  // namespace eldr
