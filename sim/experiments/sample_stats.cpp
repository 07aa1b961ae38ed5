#include "sim/experiments/sample_stats.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace eldr {

double ks_statistic(std::vector<double> a, std::vector<double> b)
{
  if (a.empty() || b.empty())
    return 0;
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  const double na = double(a.size()), nb = double(b.size());
  size_t i = 0, j = 0;
  double d = 0;
  // Walk the merged order; at each distinct value step both CDFs past every tie before comparing.
  while (i < a.size() && j < b.size()) {
    double x = std::min(a[i], b[j]);
    while (i < a.size() && a[i] == x)
      ++i;
    while (j < b.size() && b[j] == x)
      ++j;
    d = std::max(d, std::abs(double(i) / na - double(j) / nb));
  }
  // Once one sample is exhausted its CDF is 1; the other's only rises towards 1, so the gap is
  // largest right there and was already measured.
  return d;
}

double kolmogorov_sf(double x)
{
  if (x <= 0)
    return 1;
  if (x < 1.18) {
    // Q = 1 - sqrt(2 pi)/x sum_{k>=1} exp(-(2k-1)^2 pi^2 / (8 x^2)), fast for small x.
    const double pi = std::numbers::pi;
    double s        = 0;
    for (int k = 1; k <= 20; ++k) {
      double t = std::exp(-double((2 * k - 1) * (2 * k - 1)) * pi * pi / (8 * x * x));
      s += t;
      if (t < 1e-300)
        break;
    }
    return std::clamp(1 - std::sqrt(2 * pi) / x * s, 0.0, 1.0);
  }
  double s = 0, sign = 1;
  for (int j = 1; j <= 100; ++j) {
    double t = std::exp(-2.0 * j * j * x * x);
    s += sign * t;
    sign = -sign;
    if (t < 1e-300)
      break;
  }
  return std::clamp(2 * s, 0.0, 1.0);
}

double ks_pvalue(double d, size_t n, size_t m)
{
  if (n == 0 || m == 0)
    return 1;
  double en = double(n) * double(m) / double(n + m);
  return kolmogorov_sf(std::sqrt(en) * d);
}

double student_t975(size_t df)
{
  // scipy.stats.t.ppf(0.975, df) for df = 1..30, then the Cornish-Fisher expansion (error < 1e-4).
  static const double table[] = {12.706204736, 4.302652730, 3.182446305, 2.776445105, 2.570581836, 2.446911851,
                                 2.364624252,  2.306004135, 2.262157163, 2.228138852, 2.200985160, 2.178812830,
                                 2.160368656,  2.144786688, 2.131449546, 2.119905299, 2.109815578, 2.100922040,
                                 2.093024054,  2.085963447, 2.079613845, 2.073873068, 2.068657610, 2.063898562,
                                 2.059538553,  2.055529439, 2.051830516, 2.048407142, 2.045229642, 2.042272456};
  if (df == 0)
    return NAN;
  if (df <= 30)
    return table[df - 1];
  const double z = 1.959963985, v = double(df);
  const double z3 = z * z * z, z5 = z3 * z * z, z7 = z5 * z * z;
  return z + (z3 + z) / (4 * v) + (5 * z5 + 16 * z3 + 3 * z) / (96 * v * v) +
         (3 * z7 + 19 * z5 + 17 * z3 - 15 * z) / (384 * v * v * v);
}

MeanInterval mean_ci95(const std::vector<double>& values)
{
  MeanInterval r;
  r.n = values.size();
  if (r.n == 0)
    return r;
  double s = 0;
  for (double v : values)
    s += v;
  r.mean = s / double(r.n);
  r.lo = r.hi = r.mean;
  if (r.n < 2)
    return r;
  double ss = 0;
  for (double v : values)
    ss += (v - r.mean) * (v - r.mean);
  double half = student_t975(r.n - 1) * std::sqrt(ss / double(r.n - 1) / double(r.n));
  r.lo        = r.mean - half;
  r.hi        = r.mean + half;
  return r;
}

}  // namespace eldr
