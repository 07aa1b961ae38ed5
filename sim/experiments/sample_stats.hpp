#pragma once
// Statistics over samples of runs (no SimGrid): the two-sample Kolmogorov-Smirnov test that
// `eldrsim compare` applies to TPOT distributions, and the mean with a 95% confidence interval
// that `eldrsim sweep --seeds N` reports over seeds.
#include <cstddef>
#include <vector>

namespace eldr {

// sup_x |F_a(x) - F_b(x)| of the two empirical CDFs (scipy.stats.ks_2samp's statistic). Neither
// input needs to be sorted; both must be non-empty (else 0).
double ks_statistic(std::vector<double> a, std::vector<double> b);

// Asymptotic two-sided p-value: the Kolmogorov limiting distribution's survival function at
// sqrt(n m / (n + m)) * d, i.e. scipy.stats.kstwobign.sf(sqrt(en) * d).
double ks_pvalue(double d, size_t n, size_t m);

// Survival function of the Kolmogorov distribution, Q(x) = 2 sum_{j>=1} (-1)^(j-1) exp(-2 j^2 x^2)
// (for small x the equivalent theta-function series, which converges there).
double kolmogorov_sf(double x);

struct MeanInterval {
  size_t n    = 0;
  double mean = 0;
  double lo   = 0;  // 95% confidence interval of the mean (Student t, n - 1 degrees of freedom);
  double hi   = 0;  // lo == hi == mean when n < 2
};
MeanInterval mean_ci95(const std::vector<double>& values);

// Two-sided 97.5% quantile of Student's t with `df` degrees of freedom (df >= 1).
double student_t975(size_t df);

}  // namespace eldr
