#pragma once
#include <cstddef>
#include <vector>

namespace eldr {

struct Percentiles {
  double p50 = 0, p90 = 0, p95 = 0, p99 = 0, mean = 0;
  size_t count = 0;
};

// Linear interpolation between closest ranks (numpy's default "linear" method), so analysis
// scripts reproduce the same numbers. Sorts `values`.
double percentile_sorted(const std::vector<double>& sorted, double q);
Percentiles summarize(std::vector<double> values);

}  // namespace eldr
