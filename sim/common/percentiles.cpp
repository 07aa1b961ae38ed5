#include "sim/common/percentiles.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace eldr {

double percentile_sorted(const std::vector<double>& sorted, double q)
{
  if (sorted.empty())
    return 0.0;
  double pos  = q / 100.0 * double(sorted.size() - 1);
  size_t lo   = size_t(std::floor(pos));
  size_t hi   = std::min(lo + 1, sorted.size() - 1);
  double frac = pos - double(lo);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

Percentiles summarize(std::vector<double> values)
{
  Percentiles p;
  p.count = values.size();
  if (values.empty())
    return p;
  std::sort(values.begin(), values.end());
  p.p50  = percentile_sorted(values, 50);
  p.p90  = percentile_sorted(values, 90);
  p.p95  = percentile_sorted(values, 95);
  p.p99  = percentile_sorted(values, 99);
  p.mean = std::accumulate(values.begin(), values.end(), 0.0) / double(values.size());
  return p;
}

}  // namespace eldr
