// Two-sample Kolmogorov-Smirnov and mean confidence intervals (sim/experiments/sample_stats),
// against values by hand and from scipy 1.10 (stats.ks_2samp, stats.kstwobign.sf, stats.t.ppf).
#include "sim/experiments/sample_stats.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <vector>

using namespace eldr;

TEST_CASE("ks statistic: by hand, with ties, symmetric, order-free")
{
  // a = [1,2,2,3], b = [2,2,3,4,5]: at 1 F_a-F_b = .25-0; at 2 .75-.4 = .35; at 3 1-.6 = .4 (max).
  std::vector<double> a = {3, 2, 1, 2}, b = {5, 2, 4, 3, 2};
  CHECK(ks_statistic(a, b) == doctest::Approx(0.4));
  CHECK(ks_statistic(b, a) == doctest::Approx(0.4));
  // scipy: ks_2samp([.1,.4,.7,1.0,1.3], [.2,.5,.55,2.0,2.5,3.0]).statistic == 0.5
  CHECK(ks_statistic({0.1, 0.4, 0.7, 1.0, 1.3}, {0.2, 0.5, 0.55, 2.0, 2.5, 3.0}) == doctest::Approx(0.5));
  // 0..99 against 10..109: ten values of a lie below all of b.
  std::vector<double> x, y;
  for (int i = 0; i < 100; ++i) {
    x.push_back(i);
    y.push_back(i + 10);
  }
  CHECK(ks_statistic(x, y) == doctest::Approx(0.1));
  CHECK(ks_statistic(x, x) == 0);
  CHECK(ks_statistic({1, 2, 3}, {10, 20}) == 1);
  CHECK(ks_statistic({}, {1}) == 0);
}

TEST_CASE("ks p-value: the Kolmogorov limiting distribution as scipy.stats.kstwobign")
{
  struct Case {
    double x, sf;
  };
  for (Case c : {Case{0.3, 0.9999906941986655}, Case{0.5, 0.9639452436648751}, Case{0.8, 0.5441424115741981},
                 Case{1.0, 0.26999967167735456}, Case{1.18, 0.1234538094297657}, Case{1.2, 0.11224966667072497},
                 Case{1.5, 0.022217962616525127}, Case{2.0, 0.0006709252557796953}, Case{3.0, 3.045995948942526e-08}}) {
    CAPTURE(c.x);
    CHECK(kolmogorov_sf(c.x) == doctest::Approx(c.sf).epsilon(1e-9));
  }
  CHECK(kolmogorov_sf(0) == 1);
  // ks_2samp's statistic with en = n m / (n + m): kstwobign.sf(sqrt(en) * d)
  CHECK(ks_pvalue(0.5, 5, 6) == doctest::Approx(0.502914033641129).epsilon(1e-9));
  CHECK(ks_pvalue(0.4, 4, 5) == doctest::Approx(0.8691635724033446).epsilon(1e-9));
  CHECK(ks_pvalue(0.1, 100, 100) == doctest::Approx(0.6993741991310154).epsilon(1e-9));
  CHECK(ks_pvalue(0, 100, 100) == 1);
}

TEST_CASE("mean and 95% interval: Student t")
{
  // [10,12,11,13,9]: mean 11, s = sqrt(2.5), t(0.975, 4) = 2.776445105 -> 11 -+ 1.963243161
  MeanInterval m = mean_ci95({10, 12, 11, 13, 9});
  CHECK(m.n == 5);
  CHECK(m.mean == doctest::Approx(11));
  CHECK(m.lo == doctest::Approx(9.03675683852244));
  CHECK(m.hi == doctest::Approx(12.96324316147756));
  MeanInterval one = mean_ci95({4.5});
  CHECK(one.mean == 4.5);
  CHECK(one.lo == 4.5);
  CHECK(one.hi == 4.5);
  CHECK(mean_ci95({}).n == 0);
  MeanInterval same = mean_ci95({2, 2, 2});
  CHECK(same.lo == 2);
  CHECK(same.hi == 2);
  // scipy.stats.t.ppf(0.975, df)
  CHECK(student_t975(1) == doctest::Approx(12.706204736));
  CHECK(student_t975(30) == doctest::Approx(2.042272456));
  CHECK(student_t975(31) == doctest::Approx(2.039513446).epsilon(1e-4));
  CHECK(student_t975(40) == doctest::Approx(2.021075383).epsilon(1e-4));
  CHECK(student_t975(100) == doctest::Approx(1.983971518).epsilon(1e-4));
}
